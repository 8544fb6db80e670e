"""An idempotent producer's batch retried after its answer was lost (the connection cut after the
broker appended, before the producer read the answer) is stored once and answered with its
original offset; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch
INVALID_PRODUCER_EPOCH. A producer whose state expired (``producer.id.expiration.ms``) is
accepted at any sequence, as Kafka 3.9 (no UNKNOWN_PRODUCER_ID, so librdkafka does not bump its
epoch), and the state survives a clean restart (producer snapshot) and a kill -9
(snapshot + log). Against a broker process, over raw sockets and with confluent-kafka."""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.codec import api_schema, encode_request
from odradek.protocol.records import Record, build_batch

from .process_support import BrokerProcess

pytestmark = pytest.mark.timeout(60)

TOPIC = "idem-retry"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = {"producer.id.expiration.ms": "60000", "producer.id.expiration.check.interval.ms": "200"}
    process = BrokerProcess(tmp_path_factory.mktemp("idem") / "data", overrides).start()
    yield process
    process.kill()


def _produce_request(batch: bytes) -> ProduceRequest:
    part = PartitionProduceData(index=0, records=batch)
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=TOPIC, partition_data=(part,)),),
    )


async def _call(broker: BrokerProcess, request: Any) -> Any:
    async with KafkaConnection("127.0.0.1", broker.port) as conn:
        return await conn.send(request)


def _answer(response: Any) -> tuple[ErrorCode, int]:
    p = response.responses[0].partition_responses[0]
    return ErrorCode(p.error_code), int(p.base_offset)


async def _init_producer_id(broker: BrokerProcess) -> int:
    async with KafkaConnection("127.0.0.1", broker.port) as conn:
        rb = conn.builder(22, 4, 4)
        answer = await conn.send(
            rb(
                transactional_id=None,
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        assert answer.error_code == ErrorCode.none
        return int(answer.producer_id)


_RETRIABLE = (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available)


def _produce(broker: BrokerProcess, batch: bytes) -> tuple[ErrorCode, int]:
    """Produce, retrying while the partition has no leader yet (topic creation, restart)."""
    deadline = time.monotonic() + 15
    while True:
        answer = _answer(asyncio.run(_call(broker, _produce_request(batch))))
        if answer[0] not in _RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _batcher(pid: int, timestamp_ms: int | None = None) -> Any:
    def batch(seq: int, n: int = 2, epoch: int = 0) -> bytes:
        return build_batch(
            [Record(None, b"%d-%d" % (seq, i)) for i in range(n)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            timestamp_ms=timestamp_ms,
        )

    return batch


def test_a_retry_after_a_lost_answer_is_stored_once(broker: BrokerProcess) -> None:
    pid = asyncio.run(_init_producer_id(broker))
    assert _produce(broker, build_batch([Record(None, b"first")]))[0] == ErrorCode.none  # creates the topic
    batch = _batcher(pid)

    # send, and cut the connection before reading the answer: the broker appends anyway
    frame = encode_request(api_schema(0, 9), 1, "raw", _produce_request(batch(0)))
    with socket.create_connection(("127.0.0.1", broker.port)) as raw:
        raw.sendall(frame)
        time.sleep(0.5)
    first, retried = (_answer(asyncio.run(_call(broker, _produce_request(batch(0))))) for _ in range(2))
    assert first[0] == ErrorCode.none and retried == first  # both retries: the original offsets
    error, next_offset = _answer(asyncio.run(_call(broker, _produce_request(batch(2)))))
    assert error == ErrorCode.none and next_offset == first[1] + 2  # stored once: no gap for a duplicate
    assert _answer(asyncio.run(_call(broker, _produce_request(batch(7)))))[0] == ErrorCode.out_of_order_sequence_number
    asyncio.run(_call(broker, _produce_request(batch(0, epoch=1))))  # a new epoch starts anywhere
    stale = _answer(asyncio.run(_call(broker, _produce_request(batch(4, epoch=0)))))
    assert stale[0] == ErrorCode.invalid_producer_epoch


def test_an_expired_producer_is_accepted_at_any_sequence(broker: BrokerProcess) -> None:
    pid = asyncio.run(_init_producer_id(broker))
    old = _batcher(pid, timestamp_ms=int(time.time() * 1000) - 120_000)  # older than producer.id.expiration.ms
    assert _produce(broker, old(0))[0] == ErrorCode.none
    deadline = time.monotonic() + 10
    while (answer := _produce(broker, old(5)))[0] == ErrorCode.out_of_order_sequence_number:  # a gap, until expiry
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert answer[0] == ErrorCode.none  # forgotten: where it goes on is accepted, as Kafka 3.9
    assert _produce(broker, _batcher(pid)(0, epoch=1))[0] == ErrorCode.none  # a bumped epoch starts again at 0


def test_producer_state_survives_a_clean_restart_and_a_kill(broker: BrokerProcess) -> None:
    pid = asyncio.run(_init_producer_id(broker))
    batch = _batcher(pid)
    first = _produce(broker, batch(0))
    second = _produce(broker, batch(2))
    assert first[0] == second[0] == ErrorCode.none
    assert broker.stop() == 0
    partition_dir = broker.data_dir / f"{TOPIC}-0"
    snapshots = sorted(p.name for p in partition_dir.glob("*.snapshot"))
    assert snapshots and int(snapshots[-1][:20]) == second[1] + 2  # written at the log end on shutdown
    broker.start()
    assert _produce(broker, batch(2)) == second  # the retry is still recognised
    third = _produce(broker, batch(4))
    assert third == (ErrorCode.none, second[1] + 2)
    broker.kill()
    broker.start()
    assert _produce(broker, batch(4)) == third  # unclean: snapshot plus the batches after it
    assert _produce(broker, batch(8))[0] == ErrorCode.out_of_order_sequence_number
    assert _produce(broker, batch(6)) == (ErrorCode.none, third[1] + 2)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_confluent_idempotent_producer_goes_on_after_its_state_expired(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer

    topic = "idem-expiry"
    client_log = logging.getLogger("idem-expiry-client")
    seen = _Lines()
    client_log.addHandler(seen)
    client_log.setLevel(logging.DEBUG)
    client_log.propagate = False
    config = {"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "debug": "eos,protocol"}
    producer = Producer(config, logger=client_log)
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    old = int(time.time() * 1000) - 120_000  # the producer's state expires after each send
    for i in range(4):
        producer.produce(topic, value=b"m%d" % i, timestamp=old + i, on_delivery=delivered)
        assert producer.flush(15) == 0
        time.sleep(0.5)  # > producer.id.expiration.check.interval.ms
    assert errors == []
    assert [line for line in seen.lines if "unknown producer id" in line] == []
    assert [line for line in seen.lines if "bumped epoch" in line or "epoch bump" in line] == []
    assert sum("ProduceResponse" in line for line in seen.lines) >= 4  # the debug log was captured
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "idem-expiry", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < 4 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    time.sleep(0.5)
    extra = consumer.poll(0.5)
    consumer.close()
    assert values == [b"m0", b"m1", b"m2", b"m3"] and (extra is None or extra.error() is not None)
