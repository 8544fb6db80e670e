"""Pacer: a long loop of work gives the event loop a turn every slice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from odradek.replication.pacing import Pacer, pace


async def _work(items: int, item_s: float, step: Callable[[], Awaitable[None]]) -> None:
    for _ in range(items):
        await step()
        time.sleep(item_s)


async def _gaps(work: Awaitable[None]) -> list[float]:
    """The gaps between the turns a ticker task got while ``work`` ran."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.monotonic()
        while not done:
            await asyncio.sleep(0)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await work
    done = True
    await tick
    return gaps


def test_a_long_loop_yields_every_slice() -> None:
    pacer = Pacer(slice_s=0.02)
    gaps = asyncio.run(_gaps(_work(100, 0.003, pacer.step)))  # 300 ms of work
    assert pacer.yields >= 10
    assert max(gaps) < 0.15


def test_a_short_loop_does_not_yield() -> None:
    pacer = Pacer(slice_s=10.0)
    asyncio.run(_work(100, 0.0, pacer.step))
    assert pacer.yields == 0


def test_the_shared_pacer_slices_a_run_of_calls() -> None:
    gaps = asyncio.run(_gaps(_work(100, 0.003, pace)))  # as a component called once per item does
    assert len(gaps) >= 10
    assert max(gaps) < 0.15
