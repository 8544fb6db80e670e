"""What part of a log is cleanable (Kafka's ``LogCleanerManager.cleanableOffsets`` and
``maxCompactionDelay``), and the dirty ratio of a log (``LogToClean``).

The dirty section starts at the checkpointed first dirty offset (the log start offset when there
is none, or when it is outside ``[log start, log end]``) and ends at the first uncleanable
offset: the smallest of the last stable offset (the high watermark without transactions), the
active segment's base offset, and the base offset of the first dirty segment whose largest
timestamp is within ``min.compaction.lag.ms`` of now. Pure functions of a log's segment metadata;
run on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.storage.log import Log
    from odradek.storage.segment import LogSegment

__all__ = ["LogToClean", "cleanable_offsets", "max_compaction_delay", "segments_between"]


def segments_between(log: Log, start: int, end: int) -> list[LogSegment]:
    """Segments holding offsets in ``[start, end)`` (Kafka's ``logSegments(from, to)``)."""
    segs = log.segments
    out = []
    for i, seg in enumerate(segs):
        upper = segs[i + 1].base_offset if i + 1 < len(segs) else log.log_end_offset + 1
        if seg.base_offset < end and upper > start:
            out.append(seg)
    return out


def cleanable_offsets(
    log: Log, last_clean_offset: int | None, now_ms: int, last_stable_offset: int
) -> tuple[int, int, bool]:
    """``(first dirty offset, first uncleanable offset, checkpoint must be reset)``."""
    start, end = log.log_start_offset, log.log_end_offset
    checkpoint = start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpoint < start or checkpoint > end:
        checkpoint, force = start, last_clean_offset is not None
    first_dirty = checkpoint
    bounds = [last_stable_offset, log.active_segment.base_offset]
    lag = max(int(log.config.get("min.compaction.lag.ms")), 0)
    if lag > 0:
        for seg in segments_between(log, first_dirty, log.active_segment.base_offset):
            if seg is not log.active_segment and seg.largest_timestamp > now_ms - lag:
                bounds.append(seg.base_offset)
                break
    return first_dirty, max(first_dirty, min(bounds)), force


def max_compaction_delay(log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty non-active segment is (0: none)."""
    stamps = []
    for seg in segments_between(log, first_dirty_offset, log.active_segment.base_offset):
        if seg is log.active_segment:
            continue
        h = seg.read_header_at(0)
        if h is not None and h.max_timestamp > 0:
            stamps.append(h.max_timestamp)
    if not stamps:
        return 0
    clean_until = now_ms - max(int(log.config.get("max.compaction.lag.ms")), 0)
    earliest = min(stamps)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A candidate log: bytes already clean, bytes cleanable now, and whether the max
    compaction lag forces a clean (Kafka's ``LogToClean``)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @classmethod
    def of(cls, log: Log, first_dirty: int, uncleanable: int, needs_now: bool) -> LogToClean:
        clean = sum(s.size for s in segments_between(log, log.log_start_offset, first_dirty))
        cleanable = sum(s.size for s in segments_between(log, first_dirty, uncleanable))
        return cls(log, first_dirty, uncleanable, clean, cleanable, needs_now)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0
