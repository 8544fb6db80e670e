"""Work in slices: a loop over many items gives the event loop a turn every ``slice_s`` seconds.

A handler whose work grows with a request's numbers (a LeaderAndIsr of thousands of partitions,
each opening a log and mapping its indexes) calls :meth:`Pacer.step` once per item; the step
costs one ``time.monotonic()`` and, once the slice is used up, one ``await asyncio.sleep(0)``, so
no request holds the loop for much longer than a slice (default 20 ms, well under the loop
watchdog's 100 ms) and other connections, timers and heartbeats keep being served in between.

Event loop only; a Pacer belongs to one loop over items (not shared between tasks). For a loop
whose steps are calls into a component (a Produce handler appending to each of its partitions),
the component awaits :func:`pace` instead: one Pacer per thread (per event loop) shared by every
caller, so any run of such calls longer than a slice gives the loop a turn.
"""

from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["DEFAULT_SLICE_S", "Pacer", "pace"]

DEFAULT_SLICE_S = 0.02


class Pacer:
    """See the module docstring."""

    __slots__ = ("_started", "slice_s", "yields")

    def __init__(self, slice_s: float = DEFAULT_SLICE_S) -> None:
        self.slice_s = slice_s
        self.yields = 0
        """How many times :meth:`step` gave the loop a turn."""
        self._started = time.monotonic()

    async def step(self) -> None:
        """Give the loop a turn if this slice has run ``slice_s`` or more; else return at once."""
        if time.monotonic() - self._started >= self.slice_s:
            await asyncio.sleep(0)
            self.yields += 1
            self._started = time.monotonic()


_shared = threading.local()


async def pace() -> None:
    """A step of this thread's shared Pacer (see the module docstring)."""
    pacer = getattr(_shared, "pacer", None)
    if pacer is None:
        pacer = _shared.pacer = Pacer()
    await pacer.step()
