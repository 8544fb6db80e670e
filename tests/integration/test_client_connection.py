"""KafkaConnection against a real broker: version negotiation, requests in flight together,
timeouts that leave the connection usable, and a broker that goes away."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable

import pytest

from odradek.client.connection import KafkaConnection
from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError
from odradek.errors import UnsupportedVersionError
from odradek.testing import BrokerRunner


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
            topics = conn.builder(19, 2, 7)
            created = await conn.send(
                topics(
                    topics=(
                        topics.make(
                            "CreatableTopic",
                            name="slow",
                            num_partitions=1,
                            replication_factor=1,
                            assignments=(),
                            configs=(),
                        ),
                    ),
                    timeout=datetime.timedelta(seconds=10),
                    validate_only=False,
                )
            )
            assert created.topics[0].error_code == 0
            fetch = conn.builder(1, 4, 12)
            long_poll = fetch(
                max_wait=datetime.timedelta(milliseconds=1500),
                min_bytes=1,
                topics=(
                    fetch.make(
                        "FetchTopic",
                        topic="slow",
                        partitions=(
                            fetch.make("FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1024),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
            with pytest.raises(KafkaTimeoutError):
                await conn.send(long_poll, timeout_ms=200)
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
        fetch = conn.builder(1, 4, 12)
        pending = asyncio.ensure_future(
            conn.send(fetch(max_wait=datetime.timedelta(seconds=10), min_bytes=1, topics=(), forgotten_topics_data=()))
        )
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
