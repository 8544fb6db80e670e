"""Helpers of the compaction tests: the cleaner's progress as its checkpoint file shows it, a roll of
the active segment without waiting for ``segment.ms``, and a partition read from the beginning by
each real client (confluent-kafka, kafka-python, aiokafka, kcat, the Spark source's planning and
executor path).

Each reader returns the records it saw as ``(offset, key, value)`` in order; :func:`last_values`
folds them into the table a compacted topic stands for. Readers stop at the partition's end
offset as ListOffsets gives it, so they also end when the tail of the log is a gap.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from odradek.spark.driver import DriverClient
from odradek.spark.fetch import read_range
from odradek.spark.options import parse_source_options
from odradek.spark.planning import plan_batch

Row = tuple[int, bytes | None, bytes | None]
"""(offset, key, value) of one record read."""

CHECKPOINT = "cleaner-offset-checkpoint"
KCAT = shutil.which("kcat")
ROLL_KEY = b"__roll__"
"""The key of the records :func:`roll` writes."""


def cleaner_checkpoint(log_dirs: Iterable[Path]) -> dict[tuple[str, int], int]:
    """The entries of the ``cleaner-offset-checkpoint`` files of ``log_dirs`` (Kafka's
    OffsetCheckpointFile, version 0: ``0``, the count, then ``topic partition offset`` lines);
    a missing or half-written file counts as empty."""
    out: dict[tuple[str, int], int] = {}
    for log_dir in log_dirs:
        try:
            lines = (Path(log_dir) / CHECKPOINT).read_text().splitlines()
        except OSError:
            continue
        if len(lines) < 2 or lines[0] != "0":
            continue
        for line in lines[2:]:
            parts = line.split()
            if len(parts) == 3:
                out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def wait_cleaned(log_dirs: Sequence[Path], topic: str, partition: int, offset: int, timeout_s: float = 30.0) -> None:
    """Wait until the cleaner's checkpoint of ``topic-partition`` reaches ``offset``."""
    wait_until(
        lambda: cleaner_checkpoint(log_dirs).get((topic, partition), -1) >= offset,
        f"the cleaner to clean {topic}-{partition} up to {offset} (checkpoint {cleaner_checkpoint(log_dirs)})",
        timeout_s,
    )


def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes | None]], **config: object) -> list[int]:
    """Produce ``records`` (key, value) to partition 0 with an idempotent confluent producer;
    their offsets."""
    offsets: list[int] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        assert err is None, err
        offsets.append(msg.offset())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **config})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    return sorted(offsets)


def roll(bootstrap: str, topic: str, segment_bytes: int) -> int:
    """Roll the active segment of ``topic``-0 without waiting for ``segment.ms``: two records of
    :data:`ROLL_KEY`, each larger than half of ``segment.bytes``, so the second always starts a new
    segment and is alone in it. Returns the offset of the second (the new active segment's base,
    the offset a clean of everything before reaches)."""
    big = b"r" * (segment_bytes // 2 + 64)
    offsets = produce(bootstrap, topic, [(ROLL_KEY, big)])
    offsets += produce(bootstrap, topic, [(ROLL_KEY, big)])
    return offsets[-1]


def last_values(rows: Iterable[Row]) -> dict[bytes | None, bytes | None]:
    table: dict[bytes | None, bytes | None] = {}
    for _offset, key, value in rows:
        table[key] = value
    return table


def keys_seen_more_than_once(rows: Iterable[Row]) -> list[bytes | None]:
    """Keys read more than once, the :data:`ROLL_KEY` aside (its records straddle the active
    segment, which is never cleaned)."""
    seen: set[bytes | None] = set()
    again: list[bytes | None] = []
    for _offset, key, _value in rows:
        if key == ROLL_KEY:
            continue
        if key in seen:
            again.append(key)
        seen.add(key)
    return again


# --- readers ----------------------------------------------------------------------------------------


def read_confluent(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[Row]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compaction-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        rows: list[Row] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                if msg.offset() >= high:
                    return rows
                continue
            rows.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError(f"confluent-kafka did not reach offset {high} of {topic}-0; read {rows[-3:]}")
    finally:
        consumer.close()


def read_kafka_python(bootstrap: str, topic: str) -> list[Row]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=500)
    try:
        tp = KafkaTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        rows: list[Row] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"kafka-python stuck at {consumer.position(tp)} of {end}"
            for records in consumer.poll(timeout_ms=500).values():
                rows += [(r.offset, r.key, r.value) for r in records]
        return rows
    finally:
        consumer.close()


def read_aiokafka(bootstrap: str, topic: str) -> list[Row]:
    async def go() -> list[Row]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            rows: list[Row] = []
            deadline = time.monotonic() + 30
            while await consumer.position(tp) < end:
                assert time.monotonic() < deadline, f"aiokafka stuck at {await consumer.position(tp)} of {end}"
                for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                    rows += [(r.offset, r.key, r.value) for r in records]
            return rows
        finally:
            await consumer.stop()

    return asyncio.run(go())


def read_kcat(bootstrap: str, topic: str) -> list[Row]:
    """kcat -C -e from the beginning; keys and values are printed hex-free, so the test data are
    printable ASCII without ``|`` or newlines; a null value prints as NULL (-Z)."""
    assert KCAT is not None
    result = subprocess.run(
        [KCAT, "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-Z", "-f", "%o|%k|%s\\n"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    rows: list[Row] = []
    for line in result.stdout.splitlines():
        offset, key, value = line.split("|", 2)
        rows.append((int(offset), None if key == "NULL" else key.encode(), None if value == "NULL" else value.encode()))
    return rows


def read_spark_source(bootstrap: str, topic: str) -> list[Row]:
    """The ``odradek`` Spark source without a JVM: the driver plans the batch (earliest to
    latest, ``failOnDataLoss`` true) and each range is read as an executor task would."""
    options = parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "failOnDataLoss": "true"}, "batch"
    )
    client = DriverClient(options.client)
    try:
        ranges = plan_batch(client, options)
    finally:
        client.close()
    rows: list[Row] = []
    for rng in ranges:
        for batch in read_range(options, rng, "spark-kafka-source-compaction"):
            table = batch.to_pydict()
            rows += list(zip(table["offset"], table["key"], table["value"], strict=True))
    return rows
