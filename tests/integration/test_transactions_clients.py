"""Transactions with the three Python clients against one broker process: commit and abort,
consume-transform-produce with ``send_offsets_to_transaction``, zombie fencing, and what
read_committed and read_uncommitted consumers see."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .cli_support import odradek
from .process_support import BrokerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = {"transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4"}
    process = BrokerProcess(tmp_path_factory.mktemp("txn-clients") / "data", overrides).start()
    yield process
    process.kill()


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 15
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            for m in consumer.consume(200, 0.5):
                if m.error() is None:
                    values.append(m.value())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
    finally:
        consumer.close()
    return values


def test_confluent_commit_abort_and_isolation_levels(broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "confluent-1"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("conf", b"ok-%d" % i, partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("conf", b"dropped", partition=0)
    assert producer.flush(10) == 0  # written, then aborted (abort alone would purge it unsent)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("conf", b"open", partition=0)
    producer.flush(10)
    assert read_all(broker.bootstrap_servers, "conf", "read_committed") == [b"ok-0", b"ok-1", b"ok-2"]
    assert read_all(broker.bootstrap_servers, "conf", "read_uncommitted") == [
        b"ok-0",
        b"ok-1",
        b"ok-2",
        b"dropped",
        b"open",
    ]
    producer.commit_transaction(30)
    assert read_all(broker.bootstrap_servers, "conf", "read_committed")[-1] == b"open"


def test_a_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    first = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "zombie"})
    first.init_transactions(30)
    first.begin_transaction()
    first.produce("fenced", b"zombie-write", partition=0)
    first.flush(10)
    second = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "zombie"})
    second.init_transactions(30)  # aborts the first one's transaction and bumps the epoch
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    second.begin_transaction()
    second.produce("fenced", b"new-write", partition=0)
    second.commit_transaction(30)
    assert read_all(broker.bootstrap_servers, "fenced", "read_committed") == [b"new-write"]


def test_consume_transform_produce_commits_offsets_with_the_output(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        source.produce("ctp-in", b"%d" % i, partition=0)
    assert source.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ctp",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition("ctp-in", 0, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-1"})
    producer.init_transactions(30)
    seen: list[Any] = []
    deadline = time.monotonic() + 15
    while len(seen) < 10 and time.monotonic() < deadline:
        seen += [m for m in consumer.consume(10, 0.5) if m.error() is None]
    assert len(seen) == 10
    producer.begin_transaction()
    for m in seen[:6]:
        producer.produce("ctp-out", m.value() + b"!", partition=0)
    producer.send_offsets_to_transaction(
        [TopicPartition("ctp-in", 0, seen[5].offset() + 1)], consumer.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    producer.begin_transaction()
    for m in seen[6:]:
        producer.produce("ctp-out", m.value() + b"!", partition=0)
    producer.send_offsets_to_transaction([TopicPartition("ctp-in", 0, 10)], consumer.consumer_group_metadata(), 30)
    producer.abort_transaction(30)
    [committed] = consumer.committed([TopicPartition("ctp-in", 0)], timeout=10)
    consumer.close()
    assert committed.offset == 6  # the aborted transaction's offsets never became the group's
    assert read_all(bootstrap, "ctp-out", "read_committed") == [b"%d!" % i for i in range(6)]


def test_kafka_python_transactions(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="kafka-python-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp", b"kept", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("kp", b"aborted", partition=0)
    producer.abort_transaction()
    producer.close()
    assert read_all(broker.bootstrap_servers, "kp", "read_committed") == [b"kept"]


def test_aiokafka_transactions(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="aiokafka-1")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("aio", b"kept", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait("aio", b"aborted", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(go())
    assert read_all(broker.bootstrap_servers, "aio", "read_committed") == [b"kept"]


def test_transactions_list_and_describe(broker: BrokerProcess) -> None:

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "described"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("desc", b"x", partition=0)
    assert producer.flush(10) == 0

    def cli(*args: str) -> list[list[str]]:
        done = odradek("transactions", "--bootstrap-server", broker.bootstrap_servers, *args)
        assert done.returncode == 0, done.stderr
        return [line.split() for line in done.stdout.splitlines()]

    listed = cli("list")
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert next(r for r in listed if r[0] == "described")[3] == "Ongoing"
    header, row = cli("describe", "--transactional-id", "described")
    assert header[:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"]
    assert row[1] == "described" and row[4] == "Ongoing" and row[8] == "desc-0"
    header, producing = cli("describe-producers", "--topic", "desc", "--partition", "0")
    assert header == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    assert producing[:2] == row[2:4] and producing[3] == "0" and producing[5] == "0"  # open since offset 0
    assert abs(int(producing[4]) - time.time() * 1000) < 60_000
    # open, but its coordinator knows it: not hanging, however old
    assert cli("find-hanging", "--topic", "desc", "--max-transaction-timeout", "0")[1:] == []
    producer.commit_transaction(30)
    deadline = time.monotonic() + 10  # the markers are written after EndTxn is answered
    while next(r for r in cli("list") if r[0] == "described")[3] != "CompleteCommit":
        assert time.monotonic() < deadline, "the transaction did not complete"
        time.sleep(0.1)
    _header, committed = cli("describe-producers", "--topic", "desc", "--partition", "0")
    assert committed[0] == producing[0] and committed[5] == "None" and int(committed[2]) >= 0
    argv = ["transactions", "--bootstrap-server", broker.bootstrap_servers]
    missing = odradek(*argv, "describe-producers", "--topic", "desc", "--partition", "9", "--broker-id", row[0])
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_an_idle_transactional_id_expires(tmp_path_factory: pytest.TempPathFactory) -> None:
    overrides = {
        "transaction.state.log.num.partitions": "2",
        "transactional.id.expiration.ms": "1500",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
    }
    short = BrokerProcess(tmp_path_factory.mktemp("txn-expiry") / "data", overrides).start()
    try:
        producer = Producer({"bootstrap.servers": short.bootstrap_servers, "transactional.id": "short-lived"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("expiry", b"x", partition=0)
        producer.commit_transaction(30)

        def describe() -> subprocess.CompletedProcess[str]:
            args = ["describe", "--transactional-id", "short-lived"]
            return odradek("transactions", "--bootstrap-server", short.bootstrap_servers, *args)

        assert describe().returncode == 0
        deadline = time.monotonic() + 20
        while (done := describe()).returncode == 0:
            assert time.monotonic() < deadline, "the transactional id did not expire"
            time.sleep(0.3)
        assert "TRANSACTIONAL_ID_NOT_FOUND" in done.stderr + done.stdout
        assert "expired and was removed" in short.log_text()
    finally:
        short.kill()


def test_the_next_transaction_does_not_wait_out_a_concurrent_transactions_backoff(broker: BrokerProcess) -> None:
    """AddPartitionsToTxn sent the moment EndTxn is answered (the markers still being written) is
    held until the previous transaction completes and answered NONE, not CONCURRENT_TRANSACTIONS."""
    import datetime

    from odradek.client.connection import KafkaConnection
    from odradek.errors import ErrorCode

    async def go() -> list[ErrorCode]:
        async with KafkaConnection("127.0.0.1", broker.port) as conn:
            init, find = conn.builder(22, 4, 4), conn.builder(10, 4, 4)
            deadline = time.monotonic() + 15
            while True:  # FindCoordinator creates __transaction_state; then it loads
                await conn.send(find(key_type=1, coordinator_keys=("back-to-back",)))
                answer: Any = await conn.send(
                    init(
                        transactional_id="back-to-back",
                        transaction_timeout=datetime.timedelta(seconds=60),
                        producer_id=-1,
                        producer_epoch=-1,
                    )
                )
                if answer.error_code == ErrorCode.none or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert answer.error_code == ErrorCode.none
            pid, epoch = int(answer.producer_id), int(answer.producer_epoch)
            add, end = conn.builder(24, 3, 3), conn.builder(26, 3, 3)
            errors = []
            for _ in range(10):
                added: Any = await conn.send(
                    add(
                        v3_and_below_transactional_id="back-to-back",
                        v3_and_below_producer_id=pid,
                        v3_and_below_producer_epoch=epoch,
                        v3_and_below_topics=(add.make("AddPartitionsToTxnTopic", name="b2b", partitions=(0,)),),
                    )
                )
                errors.append(
                    ErrorCode(added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
                )
                ended: Any = await conn.send(
                    end(transactional_id="back-to-back", producer_id=pid, producer_epoch=epoch, committed=True)
                )
                assert ended.error_code == ErrorCode.none
            return errors

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("b2b", 1, 1)])["b2b"].result(30)
    assert asyncio.run(go()) == [ErrorCode.none] * 10
