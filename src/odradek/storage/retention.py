"""Which segments retention may delete (Kafka's ``UnifiedLog.deletableSegments`` and predicates).

Pure functions over a log's segment list; ``Log.delete_old_segments``/``delete_records`` do the
deleting. Rules (Kafka's): segments are considered oldest first and the walk stops at the first
one that is kept; a segment is deletable only if it lies wholly below the high watermark (its
successor's base offset, or the log end offset for the last one, is <= the high watermark); the
last segment is never deletable while empty. Event-loop thread only, like the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from odradek.storage.config import LogConfig
from odradek.storage.segment import LogSegment

__all__ = [
    "SegmentPredicate",
    "below_log_start_offset",
    "deletable_segments",
    "delete_policy_enabled",
    "retention_ms_breached",
    "retention_passes",
    "retention_size_breached",
]

SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]
"""``predicate(segment, next_segment_or_None) -> delete?``"""


def deletable_segments(
    segments: Sequence[LogSegment], predicate: SegmentPredicate, *, high_watermark: int, log_end_offset: int
) -> list[LogSegment]:
    """The leading run of ``segments`` that ``predicate`` accepts, within the rules above."""
    out: list[LogSegment] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if nxt is None and seg.size == 0:
            break
        if high_watermark < upper or not predicate(seg, nxt):
            break
        out.append(seg)
    return out


def below_log_start_offset(log_start_offset: int) -> SegmentPredicate:
    """Segments whose every offset is below the log start offset."""
    return lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset


def retention_ms_breached(now_ms: int, retention_ms: int) -> SegmentPredicate:
    """Segments whose largest timestamp (or mtime, without timestamps) is older than ``retention.ms``."""
    return lambda seg, nxt: now_ms - seg.largest_timestamp > retention_ms


def retention_size_breached(log_size: int, retention_bytes: int) -> SegmentPredicate:
    """The oldest segments while the log without them is still at least ``retention.bytes``."""
    excess = log_size - retention_bytes

    def breached(seg: LogSegment, nxt: LogSegment | None) -> bool:
        nonlocal excess
        if excess - seg.size >= 0:
            excess -= seg.size
            return True
        return False

    return breached


def delete_policy_enabled(config: LogConfig) -> bool:
    """True when ``cleanup.policy`` includes ``delete``."""
    policy = config.get("cleanup.policy")
    return "delete" in (policy if isinstance(policy, list) else [policy])


def retention_passes(
    config: LogConfig, now_ms: int, log_size: Callable[[], int]
) -> Iterator[tuple[SegmentPredicate, str]]:
    """The passes of time and size retention, in Kafka's order, each ``(predicate, reason)``:
    none unless ``cleanup.policy`` includes ``delete``; ``retention.bytes`` (when >= 0 and
    exceeded) against ``log_size()`` read once the caller asks for the first pass (so after the
    log-start pass), then ``retention.ms`` (when >= 0). Lazy: deleting between passes is expected."""
    if not delete_policy_enabled(config):
        return
    retention_bytes = config.retention_bytes
    size = log_size()
    if 0 <= retention_bytes < size:
        yield retention_size_breached(size, retention_bytes), "retention.bytes"
    if config.retention_ms >= 0:
        yield retention_ms_breached(now_ms, config.retention_ms), "retention.ms"
