"""A watchdog thread that notices event loop stalls and names the request that caused them.

The loop updates a heartbeat every ``interval_s`` (a ``call_later`` chain, a few microseconds per
beat); a daemon thread sleeps until the heartbeat could first be more than ``threshold_s``
late, so while the loop is healthy it wakes about once per threshold, not once per beat (each
wakeup costs an idle broker CPU), and during a stall once per interval. When the heartbeat is more than
``threshold_s`` late, the thread looks at the loop thread's stack (``sys._current_frames``)
while the loop is still stuck, and records what it is running: the request of the innermost
frame with a ``ctx`` (a handler's :class:`~odradek.server.request.RequestContext`) or a
``connection`` whose ``times`` the request handler filled in (the socket layer's record of the
request being handled: API key, version, correlation id), and the innermost odradek frame
(``file:line function``). When the heartbeat beats again the stall is over: one WARNING line on
the ``odradek.loop`` logger gives its length and that description, e.g.::

    event loop stalled 812 ms running CREATE_TOPICS v7 correlation id 5 from 127.0.0.1 \
(client id 'adminclient-1') at odradek/server/replica_assignment.py:83 in assign_replicas

A stall still running after 1 s is logged once more while it lasts (a loop stuck for good is
still reported). The longest stall and the count are exported as
``odradek_eventloop_stall_max_seconds`` (longest since the broker started) and
``odradek_eventloop_stalls_total`` (a ``prometheus_client`` collector).

:meth:`LoopWatchdog.start` and :meth:`LoopWatchdog.stop` run on the event loop; the attributes
are written by the watchdog thread and read from any thread.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from prometheus_client.core import Metric

from odradek.metrics.families import counter, gauge

__all__ = ["LoopWatchdog", "describe_frames"]

log = logging.getLogger("odradek.loop")

LONG_STALL_S = 1.0
_DUE_MARGIN_S = 0.001
"""A stall still running after this long is logged while it lasts."""


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
    """See the module docstring. ``threshold_s`` is the shortest stall reported."""

    def __init__(self, threshold_s: float = 0.1, interval_s: float = 0.02) -> None:
        self.threshold_s = threshold_s
        self.interval_s = interval_s
        self.max_stall_s = 0.0
        """The longest stall seen (0.0: none over the threshold)."""
        self.stalls = 0
        """Stalls over the threshold seen."""
        self.last: str | None = None
        """The last stall's log line."""
        self._beat = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._timer: asyncio.TimerHandle | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        """Start beating on the running loop and start the watchdog thread (once)."""
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._stop.clear()
        self._beat_now()
        self._thread = threading.Thread(target=self._watch, name="event-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the heartbeat and the thread (waits for the thread, at most one interval)."""
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None

    def _beat_now(self) -> None:
        self._beat = time.monotonic()
        if self._loop is not None and not self._stop.is_set():
            self._timer = self._loop.call_later(self.interval_s, self._beat_now)

    def _watch(self) -> None:
        stalled_beat: float | None = None
        description = ""
        reported_long = False
        while True:
            if stalled_beat is None:  # asleep until this beat could first be declared late
                wait = self._beat + self.interval_s + self.threshold_s + _DUE_MARGIN_S - time.monotonic()
            else:  # in a stall: watch for its end and for the long-stall report
                wait = self.interval_s
            if self._stop.wait(max(wait, _DUE_MARGIN_S)):
                return
            beat = self._beat
            late = time.monotonic() - beat - self.interval_s
            if stalled_beat is not None and beat != stalled_beat:
                self._ended(beat - stalled_beat - self.interval_s, description)
                stalled_beat = None
            if stalled_beat is None and late > self.threshold_s:
                stalled_beat, reported_long = beat, False
                description = describe_frames(sys._current_frames().get(self._loop_thread))
            elif stalled_beat is not None and late > LONG_STALL_S and not reported_long:
                reported_long = True
                log.warning("event loop stalled for over %.0f ms so far, running %s", late * 1000, description)

    def _ended(self, stall_s: float, description: str) -> None:
        if stall_s <= self.threshold_s:
            return
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
