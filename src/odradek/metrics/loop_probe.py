"""The event loop's busy share and lag, exported under Kafka's idle-percent names.

odradek's one event loop is both Kafka's network processors and its request handler pool, so:

- ``kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent`` and
  ``kafka_network_socketserver_networkprocessoravgidlepercent`` are both ``1 - busy``, where
  busy is the CPU time the loop's thread used over the last window divided by the window's wall
  time (``time.thread_time``, read on the loop, so the I/O threads' writes are not counted).
  Like Kafka's, the value is a fraction in [0, 1] (0.3 means 30 % idle), and a value near 0
  means requests queue up;
- ``odradek_eventloop_lag_seconds`` is the largest delay, over the last window, between when the
  probe's wake-up was due and when the loop ran it: how long a ready callback (a request, a
  timer) waits behind others.

The probe wakes every ``interval_s`` (default 0.25 s) and closes a window every ``window_s``
(default 5 s); each wake is a few microseconds. Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from prometheus_client.core import Metric

from odradek.metrics.families import gauge

__all__ = ["EventLoopProbe"]


class EventLoopProbe:
    """Samples the loop's CPU share and lag; a ``prometheus_client`` collector."""

    def __init__(self, interval_s: float = 0.25, window_s: float = 5.0) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self.busy = 0.0
        """The loop thread's CPU share over the last window (0.0 before the first)."""
        self.lag_s = 0.0
        """The largest wake-up delay over the last window."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="event-loop-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def window(self, wall_s: float, cpu_s: float, max_lag_s: float) -> None:
        """Close a window of ``wall_s`` seconds in which the loop used ``cpu_s`` of CPU."""
        self.busy = min(1.0, max(0.0, cpu_s / wall_s)) if wall_s > 0 else 0.0
        self.lag_s = max(0.0, max_lag_s)

    async def _run(self) -> None:
        start_wall = time.monotonic()
        start_cpu = time.thread_time()
        max_lag = 0.0
        while True:
            due = time.monotonic() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now = time.monotonic()
            max_lag = max(max_lag, now - due)
            if now - start_wall >= self.window_s:
                cpu = time.thread_time()
                self.window(now - start_wall, cpu - start_cpu, max_lag)
                start_wall, start_cpu, max_lag = now, cpu, 0.0

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        idle = 1.0 - self.busy
        yield gauge(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
            "Share of time the event loop's thread was idle over the last window (0..1)",
            [({}, idle)],
        )
        yield gauge(
            "kafka_network_socketserver_networkprocessoravgidlepercent",
            "Share of time the event loop's thread was idle over the last window (0..1)",
            [({}, idle)],
        )
        yield gauge(
            "odradek_eventloop_lag_seconds",
            "Largest delay of a due callback on the event loop over the last window",
            [({}, self.lag_s)],
        )
