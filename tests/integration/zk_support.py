"""Helpers shared by the tests that talk to a real ZooKeeper: run a scenario with a deadline, wait
for a condition (watches fire asynchronously)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def run(fn: Callable[[], Awaitable[T]], timeout_s: float = 60.0) -> T:
    async def main() -> T:
        return await asyncio.wait_for(fn(), timeout_s)

    return asyncio.run(main())


async def eventually(
    predicate: Callable[[], bool], timeout_s: float = 10.0, describe: Callable[[], str] = lambda: ""
) -> None:
    """Wait until ``predicate()`` holds; the failure message ends with ``describe()`` (what was seen)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"condition not reached in {timeout_s} s {describe()}".rstrip()
        await asyncio.sleep(0.02)
