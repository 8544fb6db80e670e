"""confluent-kafka (librdkafka 2.16) against a real broker: produce, consume, admin, offsets."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from odradek.testing import BrokerRunner


def _admin(broker: BrokerRunner) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _create(broker: BrokerRunner, topic: str, partitions: int = 1, **config: str) -> None:
    admin = _admin(broker)
    fs = admin.create_topics([NewTopic(topic, partitions, 1, config=config)], operation_timeout=10)
    fs[topic].result(10)


def _produce(broker: BrokerRunner, topic: str, messages: list[dict], **conf: object) -> list:
    delivered: list = []
    errors: list = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **conf})

    def cb(err, msg):  # type: ignore[no-untyped-def]
        (errors if err else delivered).append(err or msg)

    for m in messages:
        producer.produce(topic, on_delivery=cb, **m)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return delivered


def _consume_all(broker: BrokerRunner, topic: str, partitions: int, expected: int, **conf: object) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4()}",
            "enable.auto.commit": False,
            **conf,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list = []
    deadline = time.time() + 30
    while len(out) < expected and time.time() < deadline:
        for msg in consumer.consume(1000, 0.5):
            assert msg.error() is None, msg.error()
            out.append(msg)
    consumer.close()
    return out


def test_produce_consume_keys_headers_nulls(odradek_broker: BrokerRunner) -> None:
    topic = "plain"
    _create(odradek_broker, topic, 3)
    messages = []
    for i in range(300):
        m: dict = {"value": f"value-{i}".encode(), "key": f"key-{i % 7}".encode(), "partition": i % 3}
        if i % 10 == 0:
            m["headers"] = [("h1", b"x" * (i % 5)), ("h2", None)]
        if i % 17 == 0:
            m["key"] = None
        if i % 19 == 0:
            m["value"] = None
        messages.append(m)
    delivered = _produce(odradek_broker, topic, messages)
    assert len(delivered) == 300
    got = _consume_all(odradek_broker, topic, 3, 300)
    assert len(got) == 300
    by_partition: dict[int, list] = {}
    for msg in got:
        by_partition.setdefault(msg.partition(), []).append(msg)
    for p, msgs in by_partition.items():
        offsets = [m.offset() for m in msgs]
        assert offsets == list(range(len(msgs))), "offsets dense and in order"
        sent = [m for m in messages if m["partition"] == p]
        assert [m.value() for m in msgs] == [s["value"] for s in sent]
        assert [m.key() for m in msgs] == [s["key"] for s in sent]
        for got_msg, s in zip(msgs, sent):
            if "headers" in s:
                assert got_msg.headers() == s["headers"]
            else:
                assert not got_msg.headers()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(odradek_broker: BrokerRunner, codec: str) -> None:
    topic = f"comp-{codec}"
    _create(odradek_broker, topic, 1)
    values = [f"{codec}-{i}-".encode() * 20 for i in range(500)]
    _produce(odradek_broker, topic, [{"value": v, "key": b"k"} for v in values], **{"compression.type": codec})
    got = _consume_all(odradek_broker, topic, 1, len(values))
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(len(values)))


def test_one_megabyte_messages(odradek_broker: BrokerRunner) -> None:
    topic = "big"
    _create(odradek_broker, topic, 1, **{"max.message.bytes": str(3 * 1024 * 1024)})
    payloads = [bytes([i]) * (1024 * 1024) for i in range(5)]
    _produce(odradek_broker, topic, [{"value": p} for p in payloads], **{"message.max.bytes": 3 * 1024 * 1024})
    got = _consume_all(
        odradek_broker,
        topic,
        1,
        5,
        **{"fetch.max.bytes": 1024, "message.max.bytes": 1000, "max.partition.fetch.bytes": 1024},
    )
    assert [m.value() for m in got] == payloads


def test_message_too_large_rejected(odradek_broker: BrokerRunner) -> None:
    topic = "small-limit"
    _create(odradek_broker, topic, 1, **{"max.message.bytes": "2000"})
    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers, "message.max.bytes": 100000})
    errors: list = []
    producer.produce(topic, value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_admin_create_describe_delete(odradek_broker: BrokerRunner) -> None:
    admin = _admin(odradek_broker)
    fs = admin.create_topics([NewTopic("adm-a", 4, 1), NewTopic("adm-b", 2, 1)], operation_timeout=10)
    for f in fs.values():
        f.result(10)
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic("adm-a", 1, 1)])["adm-a"].result(10)
    assert "TOPIC_ALREADY_EXISTS" in str(info.value)
    md = admin.list_topics(timeout=10)
    assert len(md.topics["adm-a"].partitions) == 4
    assert len(md.topics["adm-b"].partitions) == 2
    for p in md.topics["adm-a"].partitions.values():
        assert p.leader == 0 and p.replicas == [0] and p.isrs == [0]
    admin.delete_topics(["adm-b"], operation_timeout=10)["adm-b"].result(10)
    md = admin.list_topics(timeout=10)
    assert "adm-b" not in md.topics and "adm-a" in md.topics


def test_list_offsets_by_time(odradek_broker: BrokerRunner) -> None:
    topic = "times"
    _create(odradek_broker, topic, 1)
    base = 1_700_000_000_000
    _produce(
        odradek_broker,
        topic,
        [{"value": b"v%d" % i, "timestamp": base + i * 1000} for i in range(50)],
        **{"linger.ms": 0, "batch.num.messages": 1},
    )
    admin = _admin(odradek_broker)
    tp = TopicPartition(topic, 0)
    res = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 10_500)}).get(tp)
    assert res.result(10).offset == 11
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset == 0
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset == 50
    mx = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert mx.offset == 49 and mx.timestamp == base + 49_000
    future = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 10**9)})[tp].result(10)
    assert future.offset == -1
    consumer = Consumer({"bootstrap.servers": odradek_broker.bootstrap_servers, "group.id": "t"})
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 20_000)], timeout=10)
    assert found[0].offset == 20
    consumer.close()


def test_auto_create_topic_on_produce(odradek_broker: BrokerRunner) -> None:
    _produce(odradek_broker, "auto-created", [{"value": b"hello"}])
    got = _consume_all(odradek_broker, "auto-created", 1, 1)
    assert got[0].value() == b"hello"
