"""kafka-python 3.0 against a real broker."""

from __future__ import annotations

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from odradek.testing import BrokerRunner


def test_produce_consume_in_order(odradek_broker: BrokerRunner) -> None:
    admin = KafkaAdminClient(bootstrap_servers=odradek_broker.bootstrap_servers)
    admin.create_topics([NewTopic("kp", num_partitions=3, replication_factor=1)])
    assert "kp" in admin.list_topics()
    admin.close()
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers, linger_ms=5)
    sent: dict[int, list[tuple[bytes | None, bytes]]] = {0: [], 1: [], 2: []}
    futures = []
    for i in range(300):
        key = None if i % 11 == 0 else b"k%d" % i
        value = b"value-%d" % i
        headers = [("n", b"%d" % i)] if i % 5 == 0 else []
        futures.append(producer.send("kp", value=value, key=key, partition=i % 3, headers=headers))
        sent[i % 3].append((key, value))
    producer.flush()
    metas = [f.get(timeout=10) for f in futures]
    assert all(m.offset >= 0 for m in metas)
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=odradek_broker.bootstrap_servers,
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
        auto_offset_reset="earliest",
    )
    tps = [TopicPartition("kp", p) for p in range(3)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got: dict[int, list] = {0: [], 1: [], 2: []}
    headers_seen = 0
    for msg in consumer:
        got[msg.partition].append((msg.key, msg.value))
        assert msg.offset == len(got[msg.partition]) - 1
        if msg.headers:
            headers_seen += 1
            assert msg.headers[0][0] == "n"
        if sum(len(v) for v in got.values()) == 300:
            break
    end = consumer.end_offsets(tps)
    consumer.close()
    assert got == sent
    assert headers_seen == 60
    assert {tp.partition: off for tp, off in end.items()} == {0: 100, 1: 100, 2: 100}


def test_compression_gzip_and_lz4(odradek_broker: BrokerRunner) -> None:
    for codec in ("gzip", "lz4", "zstd"):
        topic = f"kp-{codec}"
        producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers, compression_type=codec)
        values = [f"{codec}-{i}".encode() * 10 for i in range(100)]
        for v in values:
            producer.send(topic, v)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=odradek_broker.bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=3000,
            group_id=None,
        )
        got = [m.value for m in consumer]
        consumer.close()
        assert got == values
