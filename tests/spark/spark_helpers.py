"""Kafka helpers for the Spark tests (create topics, produce, consume everything back)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep it alive until the futures resolve
    futures = admin.create_topics([NewTopic(name, partitions, 1)])
    for future in futures.values():
        future.result(timeout=30)


def produce(bootstrap: str, topic: str, records: Iterable[dict[str, Any]]) -> int:
    """Produce dicts of ``Producer.produce`` keyword arguments (value, key, partition, timestamp,
    headers) in order, synchronously acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    errors: list[Any] = []
    count = 0
    for record in records:
        producer.produce(topic, on_delivery=lambda e, _m: errors.append(e) if e else None, **record)
        count += 1
    assert producer.flush(30) == 0
    assert not errors, errors
    return count


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0) -> list[Any]:
    """Every record of ``topic`` (assigned from offset 0) until ``expected`` arrived."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < expected and time.monotonic() < deadline:
            records += [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
        time.sleep(0.2)
        records += [m for m in consumer.consume(500, timeout=0.2) if m.error() is None]
    finally:
        consumer.close()
    return records


def read_committed(
    bootstrap: str, topic: str, partitions: int, timeout: float = 20.0, settle_s: float = 1.0
) -> list[bytes]:
    """Every value a read_committed consumer sees in ``topic``, read to the end of each partition
    (its last stable offset) within ``timeout``, then for ``settle_s`` more."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=0.5):
                if m.error() is None:
                    values.append(m.value())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
        if settle_s > 0:
            time.sleep(settle_s)
            values += [m.value() for m in consumer.consume(500, timeout=0.2) if m.error() is None]
    finally:
        consumer.close()
    return values
