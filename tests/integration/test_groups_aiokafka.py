"""Consumer groups with aiokafka 0.14: rebalances through leave and crash, commits, resume."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from odradek.testing import BrokerRunner

from .group_support import create_topic, produce, run_member_churn

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignor", ["range", "sticky"])
def test_three_members_share_partitions_through_leave_and_crash(odradek_broker: BrokerRunner, assignor: str) -> None:
    b = odradek_broker.bootstrap_servers
    timings = run_member_churn(b, "aiokafka", assignor, f"aio-{assignor}", "aio-churn")
    assert timings["after_kill"] < 6.0 + 5.0, timings


def test_commit_and_resume(odradek_broker: BrokerRunner) -> None:
    b = odradek_broker.bootstrap_servers
    create_topic(b, "aio-resume", 2)
    produce(b, "aio-resume", 10, partitions=2)

    async def scenario() -> None:
        def consumer() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                "aio-resume",
                bootstrap_servers=b,
                group_id="aio-resumers",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )

        first = consumer()
        await first.start()
        seen = 0
        while seen < 20:
            batches = await first.getmany(timeout_ms=1000)
            seen += sum(len(v) for v in batches.values())
        await first.commit({TopicPartition("aio-resume", 0): 7, TopicPartition("aio-resume", 1): 10})
        await first.stop()
        second = consumer()
        await second.start()
        try:
            assert await second.committed(TopicPartition("aio-resume", 0)) == 7
            records = []
            while len(records) < 3:
                batches = await second.getmany(timeout_ms=1000)
                records += [r for rs in batches.values() for r in rs]
            assert {(r.partition, r.offset) for r in records} == {(0, 7), (0, 8), (0, 9)}
        finally:
            await second.stop()

    asyncio.run(scenario())
