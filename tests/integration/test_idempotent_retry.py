"""An idempotent producer's batch retried after its answer was lost (the connection cut after the
broker appended, before the producer read the answer) is stored once and answered with its
original offset; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch
INVALID_PRODUCER_EPOCH. Against a broker process, over raw sockets."""

from __future__ import annotations

import asyncio
import datetime
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
    process = BrokerProcess(tmp_path_factory.mktemp("idem") / "data").start()
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


def test_a_retry_after_a_lost_answer_is_stored_once(broker: BrokerProcess) -> None:
    async def init(conn_broker: BrokerProcess) -> int:
        async with KafkaConnection("127.0.0.1", conn_broker.port) as conn:
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

    pid = asyncio.run(init(broker))
    asyncio.run(_call(broker, _produce_request(build_batch([Record(None, b"first")]))))  # creates the topic
    deadline = time.monotonic() + 10
    while _answer(asyncio.run(_call(broker, _produce_request(build_batch([Record(None, b"first")])))))[0] != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)

    def batch(seq: int, n: int = 2, epoch: int = 0) -> bytes:
        return build_batch(
            [Record(None, b"%d-%d" % (seq, i)) for i in range(n)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )

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
