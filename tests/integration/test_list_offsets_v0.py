"""ListOffsets v0 on the wire, as a Kafka 3.9 broker answers the 0.8-0.10.0 clients that send it:
``max_num_offsets`` offsets, latest first, from the segment starts."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

from confluent_kafka import Producer
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol import legacy_messages as legacy
from odradek.server.runner import BrokerRunner

from .admin_support import create

RECORDS = 40


def _kafka_python_v0(bootstrap: str, topic: str, timestamp: int, max_num_offsets: int) -> Any:
    """A ListOffsets v0 request encoded by kafka-python, sent on a plain socket, its answer
    decoded by kafka-python."""
    t = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest[0](
        replica_id=-1,
        topics=[
            t(
                name=topic,
                partitions=[
                    t.ListOffsetsPartition(partition_index=0, timestamp=timestamp, max_num_offsets=max_num_offsets)
                ],
            )
        ],
    )
    request.with_header(correlation_id=11, client_id="kp-v0")
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size_bytes = sock.recv(4, socket.MSG_WAITALL)
        (size,) = struct.unpack(">i", size_bytes)
        body = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack(">i", body[:4]) == (11,)
    return ListOffsetsResponse[0].decode(body[4:])


def _v0(topic: str, partition: int, timestamp: int, max_num_offsets: int, replica_id: int = -1) -> Any:
    return legacy.ListOffsetsRequestV0(
        replica_id=replica_id,
        topics=(
            legacy.ListOffsetsTopicV0(
                name=topic,
                partitions=(
                    legacy.ListOffsetsPartitionV0(
                        partition_index=partition, timestamp=timestamp, max_num_offsets=max_num_offsets
                    ),
                ),
            ),
        ),
    )


def test_list_offsets_v0_answers_old_style_offsets(odradek_broker: BrokerRunner) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create(odradek_broker, "lo-v0", 1, **{"segment.bytes": "1024"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(RECORDS):
        producer.produce("lo-v0", value=b"x" * 200 + str(i).encode(), partition=0)
        producer.flush(10)
    assert producer.flush(10) == 0

    latest = _kafka_python_v0(bootstrap, "lo-v0", -1, 1)
    (p,) = latest.topics[0].partitions
    assert (p.error_code, list(p.old_style_offsets)) == (0, [RECORDS])
    earliest = _kafka_python_v0(bootstrap, "lo-v0", -2, 5)
    assert list(earliest.topics[0].partitions[0].old_style_offsets) == [0]

    host, port = bootstrap.split(":")

    async def scenario() -> None:
        async with KafkaConnection(host, int(port), client_id="lo-v0") as conn:
            assert conn.api_versions[2][0] == 0

            async def ask(*args: Any) -> tuple[int, list[int]]:
                res = await conn.send(_v0(*args), 0)
                (part,) = res.topics[0].partitions
                return int(part.error_code), list(part.old_style_offsets)

            error, offsets = await ask("lo-v0", 0, -1, 100)
            assert error == ErrorCode.none
            # the log end, then every segment's start down to 0: several segments of 1 KiB
            assert offsets[0] == RECORDS and offsets[-1] == 0 and len(offsets) > 3
            assert offsets == sorted(set(offsets), reverse=True)
            assert await ask("lo-v0", 0, -1, 2) == (0, offsets[:2])
            assert await ask("lo-v0", 0, -1, 0) == (0, [])
            # segment times are file mtimes: every segment was written before an hour from now,
            # none before the epoch's first second
            assert await ask("lo-v0", 0, int(time.time() * 1000) + 3_600_000, 100) == (0, offsets)
            assert await ask("lo-v0", 0, 1000, 100) == (0, [])
            assert await ask("lo-v0", 0, -1, -1) == (ErrorCode.unknown_server_error, [])
            assert await ask("lo-v0", 7, -1, 1) == (ErrorCode.unknown_topic_or_partition, [])
            assert await ask("no-such-topic", 0, -2, 1) == (ErrorCode.unknown_topic_or_partition, [])

    asyncio.run(scenario())
