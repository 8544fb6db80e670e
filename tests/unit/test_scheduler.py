"""The broker's periodic tasks (:class:`odradek.server.scheduler.Scheduler`)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from odradek.server.scheduler import Scheduler


def test_a_failing_run_is_logged_and_the_schedule_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def flaky(now_ms: int) -> None:
        calls.append(now_ms)
        if len([c for c in calls if c > 0]) == 2:
            raise RuntimeError("disk on fire")

    async def later(now_ms: int) -> None:
        await asyncio.sleep(0)
        calls.append(-1)

    async def run() -> list[str]:
        scheduler = Scheduler("broker 7")
        scheduler.every(5, flaky, "flaky")
        scheduler.every(5, later, "later")
        for _ in range(200):
            await asyncio.sleep(0.005)
            if len([c for c in calls if c > 0]) >= 4 and -1 in calls:
                break
        names = scheduler.names
        await scheduler.shutdown()
        assert scheduler.names == []
        return names

    with caplog.at_level(logging.ERROR, logger="odradek.server.broker"):
        names = asyncio.run(run())
    assert names == ["flaky", "later"]
    assert len([c for c in calls if c > 0]) >= 4 and -1 in calls
    assert "broker 7: flaky task failed" in caplog.text and "disk on fire" in caplog.text
    count = len(calls)
    asyncio.run(asyncio.sleep(0.02))
    assert len(calls) == count  # nothing runs after shutdown
