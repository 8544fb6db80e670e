"""KafkaConnection against a real broker: version negotiation, requests in flight together,
timeouts that leave the connection usable, and a broker that goes away."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import pytest

from odradek.client.connection import KafkaConnection
from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError
from odradek.errors import UnsupportedVersionError
from odradek.testing import BrokerRunner


async def _create_topic(conn: KafkaConnection, name: str) -> None:
    topics = conn.builder(19, 2, 7)
    creatable = topics.make(
        "CreatableTopic", name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
    )
    created = await conn.send(topics(topics=(creatable,), timeout=datetime.timedelta(seconds=10), validate_only=False))
    assert created.topics[0].error_code == 0


def _long_poll(conn: KafkaConnection, topic: str, wait_ms: int) -> Any:
    """Fetch v4 of partition 0 of ``topic`` from offset 0, waiting up to ``wait_ms`` for a byte."""
    fetch = conn.builder(1, 4, 12)
    partition = fetch.make("FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1024)
    return fetch(
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1,
        topics=(fetch.make("FetchTopic", topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def _address(broker: BrokerRunner) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.split(":")
    return host, int(port)


def test_negotiates_versions_and_pipelines_requests(odradek_broker: BrokerRunner) -> None:
    host, port = _address(odradek_broker)

    async def go() -> None:
        async with KafkaConnection(host, port) as conn:
            assert conn.api_versions[3][1] >= 12 and 19 in conn.api_versions
            assert conn.version_for(3, 0, 9) == 9
            with pytest.raises(UnsupportedVersionError):
                conn.version_for(3, 40, 50)
            with pytest.raises(UnsupportedVersionError):
                conn.version_for(9999)
            metadata = conn.builder(3, 1, 12)
            api_versions = conn.builder(18, 0, 3)
            requests = [
                metadata(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
                if i % 2
                else api_versions(client_software_name="t", client_software_version="1")
                for i in range(40)
            ]
            responses = await asyncio.gather(*(conn.send(r) for r in requests))
            for i, response in enumerate(responses):
                assert type(response).__name__ == ("MetadataResponse" if i % 2 else "ApiVersionsResponse")
            # an explicit older version converts the request, unless that would lose a setting
            old = await conn.send(requests[1], api_version=4)
            assert type(old).__version__ == 4 and old.brokers[0].port == port
            with pytest.raises(UnsupportedVersionError, match="allow_auto_topic_creation"):
                await conn.send(requests[1], api_version=1)

    asyncio.run(go())


def test_timeout_leaves_connection_usable(odradek_broker: BrokerRunner) -> None:
    host, port = _address(odradek_broker)

    async def go() -> None:
        async with KafkaConnection(host, port) as conn:
            await _create_topic(conn, "slow")
            with pytest.raises(KafkaTimeoutError):
                await conn.send(_long_poll(conn, "slow", 1500), timeout_ms=200)
            versions = conn.builder(18, 0, 3)
            answer = await conn.send(versions(client_software_name="t", client_software_version="1"))
            assert type(answer).__name__ == "ApiVersionsResponse"
            assert not conn.closed

    asyncio.run(go())


def test_broker_going_away_fails_pending_requests(odradek_broker_factory: Callable[..., BrokerRunner]) -> None:
    runner = odradek_broker_factory()
    host, port = _address(runner)

    async def go() -> None:
        conn = await KafkaConnection(host, port).connect()
        await _create_topic(conn, "idle")
        # a long poll on a partition with nothing to read (a Fetch naming none is answered at once)
        pending = asyncio.ensure_future(conn.send(_long_poll(conn, "idle", 10_000)))
        await asyncio.sleep(0.2)
        await asyncio.get_running_loop().run_in_executor(None, runner.stop)
        with pytest.raises(KafkaConnectionError):
            await pending
        assert conn.closed
        versions = conn.builder(18, 0, 3)
        with pytest.raises(KafkaConnectionError):
            await conn.send(versions(client_software_name="t", client_software_version="1"))
        await conn.close()
        with pytest.raises(KafkaConnectionError, match="connection refused"):
            await KafkaConnection(host, port, connect_timeout_ms=1000).connect()

    asyncio.run(go())
