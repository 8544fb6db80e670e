"""Transactions on the partition, against a broker process: transactional batches hold the last
stable offset until a WriteTxnMarkers COMMIT or ABORT; read_committed consumers (confluent-kafka)
see committed records only and stop at an open transaction, read_uncommitted ones see everything;
aborts land in ``.txnindex`` (``dump-log`` prints them); a kill -9 keeps an open transaction open."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

from .cli_support import odradek
from .process_support import BrokerProcess

pytestmark = pytest.mark.timeout(120)

TOPIC = "txn-markers"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("txn") / "data").start()
    yield process
    process.kill()


async def _send(broker: BrokerProcess, build: Any) -> Any:
    async with KafkaConnection("127.0.0.1", broker.port) as conn:
        return await conn.send(build(conn))


class TxnProducer:
    """Raw transactional writes: a producer id, numbered transactional batches, markers."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.sequence = 0

        def init(conn: KafkaConnection) -> Any:
            rb = conn.builder(22, 4, 4)
            return rb(
                transactional_id=None,
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )

        answer = asyncio.run(_send(broker, init))
        assert answer.error_code == ErrorCode.none
        self.producer_id = int(answer.producer_id)

    def produce(self, values: list[bytes]) -> None:
        batch = build_batch(
            [Record(None, v) for v in values],
            producer_id=self.producer_id,
            producer_epoch=0,
            base_sequence=self.sequence,
            is_transactional=True,
        )
        self.sequence += len(values)

        def build(conn: KafkaConnection) -> Any:
            rb = conn.builder(0, 9, 9)
            part = rb.make("PartitionProduceData", index=0, records=batch)
            return rb(
                transactional_id="raw-txn",
                acks=-1,
                timeout=datetime.timedelta(seconds=10),
                topic_data=(rb.make("TopicProduceData", name=TOPIC, partition_data=(part,)),),
            )

        answer = asyncio.run(_send(self.broker, build))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none

    def marker(self, commit: bool, coordinator_epoch: int = 0) -> ErrorCode:
        def build(conn: KafkaConnection) -> Any:
            rb = conn.builder(27, 1, 1)
            topic = rb.make("WritableTxnMarkerTopic", name=TOPIC, partition_indexes=(0,))
            marker = rb.make(
                "WritableTxnMarker",
                producer_id=self.producer_id,
                producer_epoch=0,
                transaction_result=commit,
                topics=(topic,),
                coordinator_epoch=coordinator_epoch,
            )
            return rb(markers=(marker,))

        deadline = time.monotonic() + 15  # after a restart the partition may not be loaded yet
        while True:
            answer = asyncio.run(_send(self.broker, build))
            code = ErrorCode(answer.markers[0].topics[0].partitions[0].error_code)
            if code not in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower):
                return code
            assert time.monotonic() < deadline, code
            time.sleep(0.1)


def _read(broker: BrokerProcess, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"r-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(100, 0.5)
            values += [m.value() for m in msgs if m.error() is None]
            if any(m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF for m in msgs):
                break
    finally:
        consumer.close()
    return values


def _end(broker: BrokerProcess, isolation: str) -> int:
    """The partition's end offset for ``isolation``; right after a restart the broker may not lead
    the partition yet (librdkafka: unknown partition, leader not available): asked again then."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "w", "isolation.level": isolation})
    deadline = time.monotonic() + 15
    try:
        while True:
            try:
                return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)[1])
            except KafkaException as exc:
                retriable = (KafkaError._UNKNOWN_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
                if exc.args[0].code() not in retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def test_commit_and_abort_decide_what_read_committed_sees(broker: BrokerProcess) -> None:
    created = odradek("topics", "--bootstrap-server", broker.bootstrap_servers, "--create", "--topic", TOPIC)
    assert created.returncode == 0, created.stderr
    producer = TxnProducer(broker)
    producer.produce([b"c1", b"c2"])
    assert _read(broker, "read_committed") == []  # the open transaction holds the LSO at offset 0
    assert _read(broker, "read_uncommitted") == [b"c1", b"c2"]
    assert producer.marker(commit=True) == ErrorCode.none
    assert _read(broker, "read_committed") == [b"c1", b"c2"]
    producer.produce([b"a1", b"a2", b"a3"])
    assert producer.marker(commit=False) == ErrorCode.none
    producer.produce([b"c3"])
    assert producer.marker(commit=True) == ErrorCode.none
    assert _read(broker, "read_committed") == [b"c1", b"c2", b"c3"]
    assert _read(broker, "read_uncommitted") == [b"c1", b"c2", b"a1", b"a2", b"a3", b"c3"]
    # the abort is in the segment's .txnindex: producer, first offset 3, marker at offset 6
    dumped = odradek("dump-log", "--files", str(broker.data_dir / f"{TOPIC}-0" / "00000000000000000000.txnindex"))
    assert dumped.returncode == 0, dumped.stderr
    assert f"producerId: {producer.producer_id} firstOffset: 3 lastOffset: 6" in dumped.stdout


def test_an_open_transaction_survives_kill_9(broker: BrokerProcess) -> None:
    producer = TxnProducer(broker)
    producer.produce([b"open-1"])
    committed_end = _end(broker, "read_committed")
    assert committed_end < _end(broker, "read_uncommitted")
    broker.kill()
    broker.start()
    assert _end(broker, "read_committed") == committed_end  # still held at the open transaction
    assert b"open-1" not in _read(broker, "read_committed")
    assert producer.marker(commit=True) == ErrorCode.none
    assert _read(broker, "read_committed")[-1] == b"open-1"


def test_a_stale_producer_epoch_marker_is_refused(broker: BrokerProcess) -> None:
    producer = TxnProducer(broker)
    producer.produce([b"x"])

    def build(conn: KafkaConnection) -> Any:
        rb = conn.builder(27, 1, 1)
        topic = rb.make("WritableTxnMarkerTopic", name=TOPIC, partition_indexes=(0, 7))
        marker = rb.make(
            "WritableTxnMarker",
            producer_id=producer.producer_id,
            producer_epoch=-1,
            transaction_result=True,
            topics=(topic,),
            coordinator_epoch=0,
        )
        return rb(markers=(marker,))

    answer = asyncio.run(_send(broker, build))
    codes = {int(p.partition_index): ErrorCode(p.error_code) for p in answer.markers[0].topics[0].partitions}
    assert codes == {0: ErrorCode.invalid_producer_epoch, 7: ErrorCode.unknown_topic_or_partition}
    assert producer.marker(commit=False) == ErrorCode.none


def test_a_marker_from_an_older_coordinator_is_fenced(broker: BrokerProcess) -> None:
    producer = TxnProducer(broker)
    producer.produce([b"fenced-1"])
    assert producer.marker(commit=True, coordinator_epoch=3) == ErrorCode.none
    producer.produce([b"fenced-2"])
    assert producer.marker(commit=False, coordinator_epoch=2) == ErrorCode.transaction_coordinator_fenced
    broker.kill()  # the coordinator epoch is replayed from the marker in the log
    broker.start()
    assert producer.marker(commit=False, coordinator_epoch=2) == ErrorCode.transaction_coordinator_fenced
    assert producer.marker(commit=False, coordinator_epoch=3) == ErrorCode.none
    committed = _read(broker, "read_committed")
    assert b"fenced-1" in committed and b"fenced-2" not in committed


def test_find_hanging_and_abort(broker: BrokerProcess) -> None:
    """A transaction no coordinator knows (raw transactional batches) holds the LSO back;
    ``transactions find-hanging`` lists it and ``transactions abort`` ends it."""

    def cli(*args: str, expect: int = 0) -> list[list[str]]:
        done = odradek("transactions", "--bootstrap-server", broker.bootstrap_servers, *args)
        assert done.returncode == expect, done.stderr
        return [line.split() for line in (done.stdout if expect == 0 else done.stderr).splitlines()]

    def hanging() -> list[list[str]]:
        header, *rows = cli("find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
        assert header == [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ]
        return rows

    for row in hanging():  # left open by the other tests of this module (by pid, epoch, coordinator epoch)
        coordinator_epoch = str(max(int(row[4]), 0))
        cli("abort", "--topic", TOPIC, "--partition", "0", "--producer-id", row[2], "--producer-epoch", row[3],
            "--coordinator-epoch", coordinator_epoch)  # fmt: skip
    assert hanging() == []
    assert _end(broker, "read_committed") == _end(broker, "read_uncommitted")

    producer = TxnProducer(broker)
    start = _end(broker, "read_uncommitted")
    producer.produce([b"hanging-1", b"hanging-2"])
    assert _end(broker, "read_committed") == start  # held at the open transaction
    [row] = hanging()
    assert row[:2] == [TOPIC, "0"] and row[2] == str(producer.producer_id) and row[5] == str(start)
    [line] = cli("abort", "--topic", TOPIC, "--partition", "0", "--start-offset", str(start))
    assert line[:2] == ["Aborted", "the"] and str(producer.producer_id) in line
    assert hanging() == []
    assert _end(broker, "read_committed") == _end(broker, "read_uncommitted") > start
    assert not {b"hanging-1", b"hanging-2"} & set(_read(broker, "read_committed"))
    error = cli("abort", "--topic", TOPIC, "--partition", "0", "--start-offset", str(start), expect=1)
    assert "no open transaction starts at offset" in " ".join(error[0])
