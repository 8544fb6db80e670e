"""A watchdog thread that notices event loop stalls and names the request that caused them.

The loop's selector call is wrapped (:meth:`LoopWatchdog.start`) so that each time the loop
comes back from ``select`` it notes the time, and each time it goes into ``select`` again it
measures how long it ran its callbacks: a busy period longer than ``threshold_s`` is a stall.
An idle loop therefore costs nothing (no heartbeat timer wakes it); the wrapper adds two clock
reads per loop iteration. A daemon thread looks every ``interval_s`` (half the threshold unless
given): when the loop has been busy for at least ``interval_s`` it reads the loop thread's stack
(``sys._current_frames``) while the loop is still stuck, and records what it is running: the
request of the innermost frame with a ``ctx`` (a handler's
:class:`~odradek.server.request.RequestContext`) or a ``connection`` whose ``times`` the
request handler filled in (the socket layer's record of the request being handled: API key,
version, correlation id), and the innermost odradek frame (``file:line function``). Every busy
period of at least ``threshold_s`` is seen by the thread at least once (the thread looks twice
per threshold). When the loop reaches ``select`` again the stall is over: one WARNING line on
the ``odradek.loop`` logger, written by the loop thread, gives its length and that
description, e.g.::

    event loop stalled 812 ms running CREATE_TOPICS v7 correlation id 5 from 127.0.0.1 \
(client id 'adminclient-1') at odradek/server/replica_assignment.py:83 in assign_replicas

A stall still running after 1 s is logged once more, by the thread, while it lasts (a loop
stuck for good is still reported). The longest stall and the count are exported as
``odradek_eventloop_stall_max_seconds`` (longest since the broker started) and
``odradek_eventloop_stalls_total`` (a ``prometheus_client`` collector).

Only a selector event loop (asyncio's default, with a ``_selector``) can be watched; on another
loop :meth:`start` logs that once and watches nothing. :meth:`LoopWatchdog.start` and
:meth:`LoopWatchdog.stop` run on the event loop; the attributes are written by the loop and the
watchdog thread and read from any thread.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from prometheus_client.core import Metric

from odradek.metrics.families import counter, gauge

__all__ = ["LoopWatchdog", "describe_frames"]

log = logging.getLogger("odradek.loop")

LONG_STALL_S = 1.0
"""A stall still running after this long is logged while it lasts."""
_IDLE = 0.0
"""``_busy_since`` while the loop waits in ``select``."""


def _api_name(api_key: int) -> str:
    from odradek.protocol.api_keys import ApiKey

    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API key {api_key}"


def _request_of(frame: FrameType) -> str | None:
    """The request a frame's ``ctx`` or ``connection`` local describes, if it has one."""
    names = frame.f_code.co_varnames
    if "ctx" not in names and "connection" not in names:
        return None
    local: dict[str, Any] = frame.f_locals
    ctx = local.get("ctx")
    header = getattr(ctx, "header", None)
    if header is not None and hasattr(header, "api_key"):
        return (
            f"{_api_name(header.api_key)} v{header.api_version} correlation id {header.correlation_id} "
            f"from {getattr(ctx, 'client_host', '?')} (client id {getattr(header, 'client_id', None)!r})"
        )
    times = getattr(local.get("connection"), "times", None)
    if times is not None and getattr(times, "api_key", -1) >= 0:
        peer = getattr(local.get("connection"), "peer", "?")
        return f"{_api_name(times.api_key)} v{times.api_version} correlation id {times.correlation_id} from {peer}"
    return None


def describe_frames(top: FrameType | None) -> str:
    """What the stack from ``top`` outward is doing: the request (if any) and the innermost
    odradek frame, or ``"no request"`` and the innermost frame."""
    request: str | None = None
    where: str | None = None
    frame = top
    innermost = top
    while frame is not None and (request is None or where is None):
        filename = frame.f_code.co_filename
        if where is None and "/odradek/" in filename:
            short = filename[filename.rindex("/odradek/") + 1 :]
            where = f"{short}:{frame.f_lineno} in {frame.f_code.co_name}"
        if request is None:
            request = _request_of(frame)
        frame = frame.f_back
    if where is None and innermost is not None:
        where = f"{innermost.f_code.co_filename}:{innermost.f_lineno} in {innermost.f_code.co_name}"
    return f"{request or 'no request'} at {where or '?'}"


class LoopWatchdog:
    """See the module docstring. ``threshold_s`` is the shortest stall reported; ``interval_s``
    how often the thread looks (default: half the threshold, at most)."""

    def __init__(self, threshold_s: float = 0.1, interval_s: float | None = None) -> None:
        self.threshold_s = threshold_s
        self.interval_s = min(interval_s, threshold_s / 2) if interval_s is not None else threshold_s / 2
        self.max_stall_s = 0.0
        """The longest stall seen (0.0: none over the threshold)."""
        self.stalls = 0
        """Stalls over the threshold seen."""
        self.last: str | None = None
        """The last stall's log line."""
        self._busy_since = _IDLE
        """When the loop came back from ``select`` (monotonic), or ``_IDLE`` inside it."""
        self._described: tuple[float, str] = (_IDLE, "")
        """The thread's last look at a busy loop: that busy period's ``_busy_since`` and what the
        loop thread was running."""
        self._selector: Any = None
        self._loop_thread = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        """Wrap the running loop's selector and start the watchdog thread (once)."""
        if self._thread is not None:
            return
        selector = getattr(asyncio.get_running_loop(), "_selector", None)
        if selector is None or not callable(getattr(selector, "select", None)):
            log.info("event loop stalls are not watched: the loop has no selector to time")
            return
        self._loop_thread = threading.get_ident()
        self._selector = selector
        selector.select = self._timed(selector.select)
        self._busy_since = time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="event-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Restore the selector and stop the thread (waits for it, at most one interval)."""
        self._stop.set()
        if self._selector is not None:
            self._selector.__dict__.pop("select", None)  # the class's own method again
            self._selector = None
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        self._busy_since = _IDLE

    def _timed(self, select: Callable[[float | None], Any]) -> Callable[[float | None], Any]:
        """``select`` noting when the loop stops and starts running callbacks (loop thread)."""

        def timed_select(timeout: float | None = None) -> Any:
            now = time.monotonic()
            busy_since = self._busy_since
            if busy_since != _IDLE and now - busy_since > self.threshold_s:
                self._ended(busy_since, now - busy_since)
            self._busy_since = _IDLE
            try:
                return select(timeout)
            finally:
                self._busy_since = time.monotonic()

        return timed_select

    def _watch(self) -> None:
        long_reported = _IDLE
        while not self._stop.wait(self.interval_s):
            busy_since = self._busy_since
            if busy_since == _IDLE:
                continue
            busy_s = time.monotonic() - busy_since
            if busy_s >= self.interval_s and self._described[0] != busy_since:
                frames = sys._current_frames().get(self._loop_thread)
                self._described = (busy_since, describe_frames(frames))
            if busy_s > LONG_STALL_S and long_reported != busy_since and self._described[0] == busy_since:
                long_reported = busy_since
                log.warning("event loop stalled for over %.0f ms so far, running %s", busy_s * 1000, self._described[1])

    def _ended(self, busy_since: float, stall_s: float) -> None:
        """Count and log a finished stall (loop thread, at its next ``select``)."""
        seen_since, description = self._described
        if seen_since != busy_since:  # only if the thread was not scheduled for a whole threshold
            description = "callbacks the watchdog thread did not see (it was not scheduled meanwhile)"
        self.stalls += 1
        self.max_stall_s = max(self.max_stall_s, stall_s)
        self.last = f"event loop stalled {stall_s * 1000:.0f} ms running {description}"
        log.warning("%s", self.last)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        yield gauge(
            "odradek_eventloop_stall_max_seconds",
            "Longest time the event loop ran one callback without yielding, since start (stalls over the threshold)",
            [({}, self.max_stall_s)],
        )
        yield counter(
            "odradek_eventloop_stalls",
            "Event loop stalls longer than the watchdog's threshold",
            [({}, float(self.stalls))],
        )
