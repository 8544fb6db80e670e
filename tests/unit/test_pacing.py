"""Pacer: a long loop of work gives the event loop a turn every slice."""

from __future__ import annotations

import asyncio
import time

from odradek.replication.pacing import Pacer, pace


async def _work(items: int, item_s: float, pacer: Pacer) -> None:
    for _ in range(items):
        await pacer.step()
        time.sleep(item_s)


async def _longest_gap(items: int, item_s: float, pacer: Pacer) -> float:
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
    await _work(items, item_s, pacer)
    done = True
    await tick
    return max(gaps)


def test_a_long_loop_yields_every_slice() -> None:
    pacer = Pacer(slice_s=0.02)
    longest = asyncio.run(_longest_gap(100, 0.003, pacer))  # 300 ms of work
    assert pacer.yields >= 10
    assert longest < 0.15


def test_a_short_loop_does_not_yield() -> None:
    pacer = Pacer(slice_s=10.0)
    asyncio.run(_work(100, 0.0, pacer))
    assert pacer.yields == 0


async def _shared_steps(items: int, item_s: float) -> list[float]:
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.monotonic()
        while not done:
            await asyncio.sleep(0)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    for _ in range(items):
        await pace()  # as a component called once per item does
        time.sleep(item_s)
    done = True
    await tick
    return gaps


def test_the_shared_pacer_slices_a_run_of_calls() -> None:
    gaps = asyncio.run(_shared_steps(100, 0.003))
    assert len(gaps) >= 10
    assert max(gaps) < 0.15
