"""Compaction seen by real clients, on one broker whose cleaner acts quickly (``log.cleaner.backoff.ms``
100, topics with ``min.cleanable.dirty.ratio`` 0.01 and a small ``segment.bytes``).

One compacted topic takes keyed data and tombstones from an idempotent confluent-kafka producer,
a committed and an aborted transaction, an idempotent batch retried over a raw connection (stored
once), and a keyless record that is refused INVALID_RECORD (kafka-python). Once the active segment
is rolled and the cleaner's checkpoint passes it, every reader (confluent-kafka read_committed,
kafka-python and aiokafka read_uncommitted, kcat, the Spark source's planning and executor path
with ``failOnDataLoss``) reads, from the beginning across the gaps, each key exactly once with its
last value: tombstones are still there (within ``delete.retention.ms``; their delete horizon is
stamped on the first clean) and no record of the aborted transaction is. On a topic with
``delete.retention.ms`` 0, a clean after the one that stamped the horizon removes the
tombstones. ``odradek dump-log`` shows the cleaned segments: records with gaps between their
offsets and the delete horizon of the batches that keep tombstones. A Spark range that starts and
ends inside gaps reads exactly the records kept in it.

The internal topics: created compacted with ``offsets.topic.segment.bytes`` and
``transaction.state.log.segment.bytes`` as their ``segment.bytes``; a group's commits fill several
``__consumer_offsets`` segments, the cleaner compacts them, and after a restart the coordinator
loads the cleaned partition to the same committed offset.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError

from odradek.cli.dump_log import main as dump_log
from odradek.client.connection import RequestBuilder
from odradek.coordinator.group.schemas import partition_for
from odradek.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from odradek.spark.fetch import read_range
from odradek.spark.offsets import OffsetRange
from odradek.spark.options import parse_source_options
from odradek.testing import BrokerRunner

from .compaction_support import (
    KCAT,
    ROLL_KEY,
    Row,
    keys_seen_more_than_once,
    last_values,
    produce,
    read_aiokafka,
    read_confluent,
    read_kafka_python,
    read_kcat,
    read_spark_source,
    roll,
    wait_cleaned,
)
from .test_idempotent_retry import _answer, _call, _init_producer_id

pytestmark = pytest.mark.timeout(180)

TOPIC = "table"
SEGMENT_BYTES = 4096
OFFSETS_SEGMENT_BYTES = 8192
TXN_SEGMENT_BYTES = 16384
KEYS = 120
OVERRIDES = {
    "log.cleaner.backoff.ms": "100",
    "offsets.topic.segment.bytes": str(OFFSETS_SEGMENT_BYTES),
    "transaction.state.log.segment.bytes": str(TXN_SEGMENT_BYTES),
    "offsets.topic.num.partitions": "1",
}


@dataclass
class Table:
    """The broker, and what the compacted topic should read as (key -> last value)."""

    broker: BrokerRunner
    expected: dict[bytes | None, bytes | None]
    clean_end: int = 0

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(self.broker.data_dir)]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Table]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("compaction")), OVERRIDES).start()
    try:
        yield Table(runner, {})
    finally:
        runner.stop()


def create(broker: BrokerRunner, name: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1, config=config)], operation_timeout=10)[name].result(15)


def _txn_producer(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    return producer


def _write_transactions(t: Table) -> None:
    producer = _txn_producer(t.bootstrap, "compaction-txn")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(TOPIC, key=b"tx-%d" % i, value=b"committed-%d" % i, partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(TOPIC, key=b"tx-%d" % i, value=b"aborted", partition=0)
    for i in range(5):
        producer.produce(TOPIC, key=b"ab-%d" % i, value=b"aborted", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    t.expected.update({b"tx-%d" % i: b"committed-%d" % i for i in range(10)})


def _idempotent_produce_twice(broker: BrokerRunner) -> list[tuple[ErrorCode, int]]:
    """One idempotent batch sent twice (a retry whose first answer was lost): both answers."""
    batch = build_batch(
        [Record(b"idem-%d" % i, b"once-%d" % i) for i in range(5)],
        producer_id=asyncio.run(_init_producer_id(broker)),
        producer_epoch=0,
        base_sequence=0,
    )
    rb = RequestBuilder(0, 9)
    partition = rb.make("PartitionProduceData", index=0, records=batch)
    request = rb(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(rb.make("TopicProduceData", name=TOPIC, partition_data=(partition,)),),
    )
    return [_answer(asyncio.run(_call(broker, request))) for _ in range(2)]


def _check_reads(t: Table, rows: list[Row], reader: str) -> None:
    assert keys_seen_more_than_once(rows) == [], reader
    table = last_values(rows)
    table.pop(ROLL_KEY, None)
    assert table == t.expected, reader
    offsets = [offset for offset, _, _ in rows]
    assert offsets == sorted(offsets) and offsets[-1] >= t.clean_end, reader


def test_clients_read_the_last_value_of_every_key_after_a_clean(table: Table) -> None:
    t = table
    create(
        t.broker,
        TOPIC,
        **{
            "cleanup.policy": "compact",
            "segment.bytes": str(SEGMENT_BYTES),
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    # keyed data in rounds: every key rewritten, the last round's value wins
    for round_ in range(4):
        records = [(b"key-%03d" % k, b"v%d-%03d" % (round_, k)) for k in range(KEYS)]
        produce(t.bootstrap, TOPIC, records)
        t.expected.update(records)
    deleted = [(b"key-%03d" % k, None) for k in range(0, KEYS, 10)]
    produce(t.bootstrap, TOPIC, deleted)  # tombstones
    t.expected.update(deleted)
    _write_transactions(t)
    first, retry = _idempotent_produce_twice(t.broker)
    assert first[0] == ErrorCode.none
    assert retry == first  # the retry is answered with the original offset, stored once
    t.expected.update({b"idem-%d" % i: b"once-%d" % i for i in range(5)})
    # a keyless record is refused on a compacted topic
    producer = KafkaProducer(bootstrap_servers=t.bootstrap, retries=0)
    with pytest.raises(InvalidRecordError):
        producer.send(TOPIC, value=b"no key", partition=0).get(timeout=30)
    producer.close()

    t.clean_end = roll(t.bootstrap, TOPIC, SEGMENT_BYTES)
    wait_cleaned(t.log_dirs, TOPIC, 0, t.clean_end)

    readers = {
        "confluent-kafka": lambda: read_confluent(t.bootstrap, TOPIC),
        "confluent-kafka read_uncommitted": lambda: read_confluent(t.bootstrap, TOPIC, "read_uncommitted"),
        "kafka-python": lambda: read_kafka_python(t.bootstrap, TOPIC),
        "aiokafka": lambda: read_aiokafka(t.bootstrap, TOPIC),
        "spark source": lambda: read_spark_source(t.bootstrap, TOPIC),
    }
    if KCAT is not None:
        readers["kcat"] = lambda: read_kcat(t.bootstrap, TOPIC)
    for name, read in readers.items():
        rows = read()
        assert all(value != b"aborted" for _, _, value in rows), name
        _check_reads(t, rows, name)


def test_dump_log_shows_the_cleaned_segment(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    cleaned = sorted((Path(table.broker.data_dir) / f"{TOPIC}-0").glob("*.log"))[:-1]  # all but the active
    assert dump_log(["--files", ",".join(str(p) for p in cleaned), "--deep-iteration"]) == 0
    captured = capsys.readouterr()
    batches = [line for line in captured.out.splitlines() if line.startswith("baseOffset: ")]
    assert batches and any("deleteHorizonMs: OptionalLong[" in line for line in batches)
    assert "Non-consecutive offsets in " in captured.err  # the gaps the cleaner left


def test_spark_ranges_starting_and_ending_inside_gaps(table: Table) -> None:
    rows = read_confluent(table.bootstrap, TOPIC)
    offsets = [offset for offset, _, _ in rows]
    gaps = [(a, b) for a, b in itertools.pairwise(offsets) if b > a + 1]
    assert gaps
    (a, b), (c, _d) = gaps[0], gaps[-1]
    options = parse_source_options(
        {"kafka.bootstrap.servers": table.bootstrap, "subscribe": TOPIC, "failOnDataLoss": "true"}, "batch"
    )
    # from inside the first gap to inside the last: exactly the records kept in between
    rng = OffsetRange(TOPIC, 0, a + 1, c + 2)
    got = [o for batch in read_range(options, rng, "gaps") for o in batch.column("offset").to_pylist()]
    assert got == [o for o in offsets if rng.from_offset <= o < rng.until_offset]
    assert got[0] == b


def test_tombstones_go_after_delete_retention_on_a_later_clean(table: Table) -> None:
    topic = "table-horizon"
    create(
        table.broker,
        topic,
        **{
            "cleanup.policy": "compact",
            "segment.bytes": str(SEGMENT_BYTES),
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "0",
        },
    )
    records = [(b"key-%03d" % k, b"v-%03d" % k) for k in range(60)]
    deleted = [(b"key-%03d" % k, None) for k in range(0, 60, 6)]
    produce(table.bootstrap, topic, records + deleted)
    # the first clean that reaches the tombstones stamps their delete horizon (now + 0 ms) ...
    wait_cleaned(table.log_dirs, topic, 0, roll(table.bootstrap, topic, SEGMENT_BYTES))
    rewritten = [(b"key-%03d" % k, b"late-%03d" % k) for k in range(1, 60, 2)]
    produce(table.bootstrap, topic, rewritten)
    # ... and a later one removes them
    end = roll(table.bootstrap, topic, SEGMENT_BYTES)
    wait_cleaned(table.log_dirs, topic, 0, end)
    expected = {k: v for k, v in dict(records + deleted + rewritten).items() if v is not None}
    for name, rows in (
        ("confluent-kafka", read_confluent(table.bootstrap, topic)),
        ("kafka-python", read_kafka_python(table.bootstrap, topic)),
    ):
        assert all(value is not None for _, _, value in rows), name
        assert keys_seen_more_than_once(rows) == [], name
        got = last_values(rows)
        got.pop(ROLL_KEY, None)
        assert got == expected, name
        assert rows[-1][0] == end, name


def test_internal_topics_are_compacted_with_their_segment_bytes(table: Table) -> None:
    consumer = Consumer({"bootstrap.servers": table.bootstrap, "group.id": "compaction-commits"})
    try:
        for i in range(200):  # ~120 bytes a commit: several 8 KiB segments
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, i + 1)], asynchronous=False)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": table.bootstrap})
    resources = [ConfigResource("topic", "__consumer_offsets"), ConfigResource("topic", "__transaction_state")]
    described = {r.name: f.result(15) for r, f in admin.describe_configs(resources).items()}
    offsets_cfg, txn_cfg = described["__consumer_offsets"], described["__transaction_state"]
    assert offsets_cfg["cleanup.policy"].value == "compact" == txn_cfg["cleanup.policy"].value
    assert offsets_cfg["segment.bytes"].value == str(OFFSETS_SEGMENT_BYTES)
    assert txn_cfg["segment.bytes"].value == str(TXN_SEGMENT_BYTES)
    del admin

    partition = partition_for("compaction-commits", 1)
    directory = Path(table.broker.data_dir) / f"__consumer_offsets-{partition}"
    assert len(list(directory.glob("*.log"))) >= 3
    active_base = int(sorted(directory.glob("*.log"))[-1].name.split(".")[0])
    wait_cleaned(table.log_dirs, "__consumer_offsets", partition, active_base)
    cleaned = sorted(directory.glob("*.log"))[:-1]
    assert sum(p.stat().st_size for p in cleaned) < 1024  # at most the last commit before the active segment

    # a restart loads the cleaned partition to the same committed offset
    data_dir = table.broker.data_dir
    table.broker.stop()
    table.broker = BrokerRunner(data_dir, OVERRIDES).start()
    consumer = Consumer({"bootstrap.servers": table.bootstrap, "group.id": "compaction-commits"})
    try:
        (committed,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)
        assert committed.offset == 200
    finally:
        consumer.close()
