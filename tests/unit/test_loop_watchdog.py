"""The event loop watchdog: a loop blocked on purpose is reported with the request it ran."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import pytest

from odradek.metrics.loop_watchdog import LoopWatchdog


@dataclass
class _Header:
    api_key: int = 19
    api_version: int = 7
    correlation_id: int = 42
    client_id: str = "fuzzer"


@dataclass
class _Context:
    header: _Header
    client_host: str = "127.0.0.1"


def _handle_blocking(ctx: _Context, seconds: float) -> None:
    time.sleep(seconds)  # a handler that does not yield


async def _run(watchdog: LoopWatchdog, block_s: float) -> None:
    watchdog.start()
    try:
        await asyncio.sleep(0.1)
        _handle_blocking(_Context(_Header()), block_s)
        await asyncio.sleep(0.1)
    finally:
        watchdog.stop()


def test_a_blocked_loop_is_logged_with_its_request_and_exported(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(threshold_s=0.1, interval_s=0.01)
    with caplog.at_level(logging.WARNING, logger="odradek.loop"):
        asyncio.run(_run(watchdog, 0.3))
    assert watchdog.stalls == 1
    assert 0.25 <= watchdog.max_stall_s < 0.5
    lines = [r.getMessage() for r in caplog.records if r.name == "odradek.loop"]
    assert len(lines) == 1
    assert "CREATE_TOPICS v7 correlation id 42 from 127.0.0.1 (client id 'fuzzer')" in lines[0]
    assert "test_loop_watchdog.py" in lines[0] or "_handle_blocking" in lines[0]
    samples = {s.name: s.value for metric in watchdog.collect() for s in metric.samples}
    assert samples["odradek_eventloop_stall_max_seconds"] == watchdog.max_stall_s
    assert samples["odradek_eventloop_stalls_total"] == 1


def test_pauses_under_the_threshold_are_not_stalls(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(threshold_s=0.5, interval_s=0.01)  # well above a loaded machine's hiccups
    with caplog.at_level(logging.WARNING, logger="odradek.loop"):
        asyncio.run(_run(watchdog, 0.2))
    assert watchdog.stalls == 0
    assert watchdog.max_stall_s == 0.0
    assert not [r for r in caplog.records if r.name == "odradek.loop"]


def test_a_long_stall_is_reported_while_it_lasts(caplog: pytest.LogCaptureFixture) -> None:
    watchdog = LoopWatchdog(threshold_s=0.1, interval_s=0.01)
    with caplog.at_level(logging.WARNING, logger="odradek.loop"):
        asyncio.run(_run(watchdog, 1.3))
    lines = [r.getMessage() for r in caplog.records if r.name == "odradek.loop"]
    assert len(lines) == 2
    assert lines[0].startswith("event loop stalled for over")
    assert lines[1].startswith("event loop stalled 1")


def test_an_idle_loop_is_not_woken_and_stop_restores_the_selector() -> None:
    """The watchdog times the loop's own ``select`` calls: an idle loop sleeps through."""

    async def idle() -> tuple[int, bool, bool]:
        loop = asyncio.get_running_loop()
        selector = loop._selector  # type: ignore[attr-defined]
        watchdog = LoopWatchdog(threshold_s=0.1)
        watchdog.start()
        wrapped = "select" in vars(selector)
        calls = 0
        timed = selector.select

        def counting(timeout: float | None = None) -> object:
            nonlocal calls
            calls += 1
            return timed(timeout)

        selector.select = counting
        await asyncio.sleep(0.5)
        selector.select = timed
        watchdog.stop()
        return calls, wrapped, "select" not in vars(selector)

    calls, wrapped, restored = asyncio.run(idle())
    assert wrapped and restored
    assert calls <= 3  # the sleep's own timer; a 20 ms heartbeat would have made about 25
