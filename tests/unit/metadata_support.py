"""Helpers shared by the metadata store unit tests: run a scenario on a fresh loop, let watches fire."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def run(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await fn()

    return asyncio.run(main())


async def settle() -> None:
    """Let scheduled watch callbacks run."""
    for _ in range(10):
        await asyncio.sleep(0)
