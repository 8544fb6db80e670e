"""Replication throttles (Kafka's ``ReplicationQuotaManager``), one for each side of a broker.

The leader side bounds the bytes this broker sends to followers of throttled partitions; the
follower side bounds the bytes it fetches for them. A partition is throttled when its topic's
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas`` names it
with this broker (``"0:101,1:102"``: partition:broker pairs) or is ``*``. Replicas in the ISR are
never throttled (the callers check): a throttle slows a reassignment's copy, not the partitions
already in sync.

The rate (``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``, bytes
per second, unlimited by default) is measured as Kafka's sampled rate: bytes recorded in the
last ``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``,
divided by the time they span, at least ``(num - 1) * size`` seconds (so the first window cannot
spike it). While the rate is above the limit, throttled partitions get no data; in-sync ones are
served as usual.

Event loop only (the fetch path and the follower fetchers run there).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from odradek.storage import TopicPartition

UNLIMITED = 2**63 - 1


def parse_throttled_replicas(value: str | None, broker_id: int) -> set[int] | None:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id``:
    None for ``*`` (every partition), else the partitions of the pairs naming this broker."""
    text = (value or "").strip()
    if text == "*":
        return None
    partitions: set[int] = set()
    for pair in filter(None, (p.strip() for p in text.split(","))):
        partition, _, broker = pair.partition(":")
        if broker.strip() == str(broker_id):
            partitions.add(int(partition))
    return partitions


class ReplicationQuota:
    """A byte rate limit and the partitions it applies to."""

    def __init__(
        self,
        rate: int = UNLIMITED,
        samples: int = 11,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.samples = max(2, samples)
        self.window_s = window_s
        self._clock = clock
        self._windows: deque[list[float]] = deque()  # [start, bytes]
        self._throttled: dict[str, set[int] | None] = {}

    # --- which partitions ----------------------------------------------------------------------

    def set_throttled(self, topic: str, partitions: set[int] | None) -> bool:
        """Throttle ``partitions`` of ``topic`` (None: all of them; empty: none); True if that changed."""
        before = self._throttled.get(topic, set())
        if partitions is not None and not partitions:
            self._throttled.pop(topic, None)
        else:
            self._throttled[topic] = partitions
        return before != self._throttled.get(topic, set())

    @property
    def throttles_any(self) -> bool:
        """Whether a rate is set and some partition is throttled (else :meth:`is_throttled` is False for all)."""
        return self.rate < UNLIMITED and bool(self._throttled)

    def is_throttled(self, tp: TopicPartition) -> bool:
        if self.rate >= UNLIMITED or tp.topic not in self._throttled:
            return False
        partitions = self._throttled[tp.topic]
        return partitions is None or tp.partition in partitions

    # --- how fast ------------------------------------------------------------------------------

    def record(self, nbytes: int) -> None:
        if nbytes <= 0:
            return
        now = self._clock()
        self._purge(now)
        if not self._windows or now - self._windows[-1][0] >= self.window_s:
            self._windows.append([now, 0.0])
        self._windows[-1][1] += nbytes

    def measured_rate(self) -> float:
        """Bytes per second over the sample windows."""
        now = self._clock()
        self._purge(now)
        if not self._windows:
            return 0.0
        total = sum(w[1] for w in self._windows)
        elapsed = max(now - self._windows[0][0], (self.samples - 1) * self.window_s)
        return total / elapsed

    def is_exceeded(self) -> bool:
        return self.rate < UNLIMITED and self.measured_rate() > self.rate

    def _purge(self, now: float) -> None:
        horizon = now - self.samples * self.window_s
        while self._windows and self._windows[0][0] < horizon:
            self._windows.popleft()


def apply_topic_throttles(
    quotas: dict[str, ReplicationQuota], topic: str, overrides: dict[str, str], broker_id: int
) -> list[tuple[str, set[int] | None]]:
    """A topic's ``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
    (``quotas`` maps ``"leader"`` and ``"follower"`` to their quota) as they name ``broker_id``;
    returns the (side, partitions) that changed, None meaning every partition."""
    changed = []
    for side, quota in quotas.items():
        partitions = parse_throttled_replicas(overrides.get(f"{side}.replication.throttled.replicas"), broker_id)
        if quota.set_throttled(topic, partitions):
            changed.append((side, partitions))
    return changed
