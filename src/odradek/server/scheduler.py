"""The broker's periodic tasks (Kafka's ``KafkaScheduler``): retention, flush, checkpoints, ISR
expiration and propagation, producer id expiry, leader rebalancing.

:class:`Scheduler` starts one asyncio task per schedule; each calls its action with the wall-clock
time in ms every interval (awaiting it when it returns an awaitable). A failing run is logged with
the task's name and the schedule goes on, as Kafka's scheduler logs and continues. ``shutdown``
cancels every task and waits for each to end. Event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable

log = logging.getLogger("odradek.server.broker")


class Scheduler:
    """Periodic tasks of one broker (``owner`` names it in log lines, e.g. ``broker 1``)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._tasks: list[asyncio.Task[None]] = []

    def every(self, interval_ms: int, action: Callable[[int], object], name: str) -> None:
        """Call ``action(now_ms)`` every ``interval_ms`` (the first time one interval from now)
        until :meth:`shutdown`."""

        async def run() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000.0)
                try:
                    pending = action(int(time.time() * 1000))
                    if inspect.isawaitable(pending):
                        await pending
                except Exception:
                    log.exception("%s: %s task failed", self.owner, name)

        self._tasks.append(asyncio.get_running_loop().create_task(run(), name=name))

    @property
    def names(self) -> list[str]:
        """The running schedules' names, in the order they were started."""
        return [task.get_name() for task in self._tasks if not task.done()]

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
