"""A broker compacts a topic with ``cleanup.policy=compact`` end to end: keyed records and a
tombstone produced by a real client, the cleaner (worker process) rewrites the rolled segments,
and a consumer reading from the start gets the last value of every key at its original offset."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.storage import LogManager
from odradek.storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from odradek.storage.config import LogConfig
from odradek.testing import BrokerRunner

KEYS = 20
ROUNDS = 10


def _consume_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def test_a_compacted_topic_is_cleaned_by_the_broker(odradek_broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerRunner = odradek_broker_factory(overrides={"log.cleaner.backoff.ms": "100"})
    bootstrap = broker.bootstrap_servers
    topic = f"table-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "3600000",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for r in range(ROUNDS):
        for k in range(KEYS):
            producer.produce(topic, key=b"key-%02d" % k, value=b"round-%d" % r, partition=0)
        producer.flush(10)
    producer.produce(topic, key=b"key-00", value=None, partition=0)  # a tombstone
    for k in range(1, 4):  # enough to roll past the tombstone
        producer.produce(topic, key=b"key-%02d" % k, value=b"x" * 2000, partition=0)
        producer.flush(10)
    end = ROUNDS * KEYS + 4

    checkpoint = Path(broker.data_dir) / CLEANER_OFFSET_CHECKPOINT
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (checkpoint.exists() and f"{topic} 0 " in checkpoint.read_text()):
        time.sleep(0.1)
    assert f"{topic} 0 " in checkpoint.read_text()

    records = _consume_all(bootstrap, topic, end)
    assert len(records) < end  # compacted
    table = {key: (offset, value) for offset, key, value in records}
    assert table[b"key-00"] == (ROUNDS * KEYS, None)  # the tombstone, kept until its horizon
    for k in range(4, KEYS):
        assert table[b"key-%02d" % k] == ((ROUNDS - 1) * KEYS + k, b"round-%d" % (ROUNDS - 1))
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and offsets[-1] == end - 1


def test_a_restarted_broker_loads_a_compacted_log_with_its_topic_config(odradek_broker_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Logs are opened with their topic's overrides from ``/config/topics`` (Kafka's LogManager
    start-up), not with the broker defaults until the first LeaderAndIsr: retention must never see a
    compacted log as a ``delete`` one, not even between loading and leadership."""
    broker: BrokerRunner = odradek_broker_factory()
    data_dir = broker.data_dir
    topic = f"table-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, key=b"k", value=b"v", partition=0)
    assert producer.flush(10) == 0
    broker.stop()

    loaded: list[dict[str, LogConfig]] = []
    original = LogManager.load_logs

    def spy(self: LogManager, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        loaded.append(dict(topic_configs or {}))
        original(self, topic_configs)

    monkeypatch.setattr(LogManager, "load_logs", spy)
    odradek_broker_factory(data_dir=data_dir)
    at_load = loaded[0][topic]
    assert at_load.compacted and at_load.segment_bytes == 4096
