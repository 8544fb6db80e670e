"""Operations on a log's ordered list of segments (Kafka's ``LogSegments`` and the segment parts of
``LocalLog``): reading across segments, removing them (retention, truncation), flushing them, replacing some
with a cleaned one, and the timestamp lookups of ListOffsets (v1+, and v0's segment-start list).

A log keeps its segments in two parallel lists, ascending by base offset: ``segments`` (the
:class:`~odradek.storage.segment.LogSegment` objects; the last is the active one) and
``base_offsets`` (their base offsets, for ``bisect``). The functions here read them or change
them in place, always both together.

Threading: called by :class:`~odradek.storage.log.Log` on the broker's event-loop thread only.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.storage.cleaner.swap import remove_replaced, swap_in
from odradek.storage.results import FetchDataInfo
from odradek.storage.segment import LogSegment
from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "find_offset_by_timestamp",
    "find_replaced_range",
    "flush_segments",
    "latest_timestamp",
    "legacy_offsets_before",
    "read_across",
    "remove_segments",
    "replace_segments",
    "truncate_segments",
]

logger = logging.getLogger("odradek.storage.log")


def find_replaced_range(
    segments: Sequence[LogSegment], base_offset: int, old: Sequence[LogSegment], tp: TopicPartition
) -> tuple[int, int]:
    """``(first, end)``: the slice of ``segments`` that ``old`` occupies. ``old`` must be
    consecutive inactive segments of the list (the same objects), the first at ``base_offset``;
    raises ValueError otherwise."""
    if not old or old[0].base_offset != base_offset:
        raise ValueError(f"{tp}: the cleaned segment {base_offset} does not start the replaced group")
    try:
        first = next(i for i, s in enumerate(segments) if s is old[0])
    except StopIteration:
        raise ValueError(f"{tp}: segment {base_offset} is no longer in the log") from None
    end = first + len(old)
    if end >= len(segments) or any(a is not b for a, b in zip(segments[first:end], old, strict=True)):
        raise ValueError(f"{tp}: the replaced segments are not consecutive inactive segments of the log")
    return first, end


def replace_segments(
    directory: Path,
    segments: list[LogSegment],
    base_offsets: list[int],
    base_offset: int,
    old: Sequence[LogSegment],
    *,
    open_segment: Callable[[int], LogSegment],
    tp: TopicPartition,
    ident: str,
) -> LogSegment:
    """Swap the cleaned segment ``base_offset`` (its ``.cleaned`` files in ``directory``) in for
    ``old`` and return it; ``segments``/``base_offsets`` are updated in place.

    Checks first (:func:`find_replaced_range`; ValueError, nothing changed). Then Kafka's
    crash-safe order (:mod:`odradek.storage.cleaner.swap`): ``.cleaned`` -> ``.swap``; old files
    -> ``.deleted``; ``.swap`` -> final names; the new segment opened by ``open_segment(base)``
    and put in the lists; ``.deleted`` files removed. An OSError raised on the way leaves the
    files in a state start-up recovery completes or undoes, but the lists possibly naming closed
    segments: the caller must take the log dir offline (Kafka's ``maybeHandleIOException``).
    """
    first, end = find_replaced_range(segments, base_offset, old, tp)
    swap_in(directory, base_offset, old)
    new = open_segment(base_offset)
    segments[first:end] = [new]
    base_offsets[first:end] = [base_offset]
    remove_replaced(directory, old)
    logger.info(
        "%s Replaced %d segment(s) from offset %d with the cleaned segment %s (%d bytes)",
        ident,
        len(old),
        base_offset,
        new.log_path.name,
        new.size,
    )
    return new


def find_offset_by_timestamp(
    segments: Sequence[LogSegment], base_offsets: Sequence[int], timestamp: int, log_start_offset: int
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record at or above ``log_start_offset`` whose
    timestamp is >= ``timestamp``; None when none qualifies. Segments wholly below the log start
    offset and segments whose largest timestamp is below ``timestamp`` are skipped unread; only
    the batch holding the answer is decoded."""
    n = len(segments)
    for i, segment in enumerate(segments):
        if i + 1 < n and base_offsets[i + 1] <= log_start_offset:
            continue
        if segment.max_timestamp_so_far >= timestamp:
            found = segment.find_offset_by_timestamp(timestamp, log_start_offset)
            if found is not None:
                return found
    return None


def latest_timestamp(segments: Sequence[LogSegment]) -> tuple[int, int] | None:
    """``(offset, max_timestamp)`` of the first record with the largest timestamp of all
    ``segments`` (the earliest segment wins a tie); None when empty or without timestamps."""
    best: LogSegment | None = None
    best_ts = -1
    for segment in segments:
        ts = segment.max_timestamp_so_far
        if ts > best_ts:
            best, best_ts = segment, ts
    return best.find_max_timestamp_record() if best is not None else None


def legacy_offsets_before(
    segments: Sequence[LogSegment],
    log_start_offset: int,
    log_end_offset: int,
    timestamp: int,
    max_num_offsets: int,
    now_ms: int,
) -> list[int]:
    """ListOffsets v0's ``old_style_offsets`` (Kafka 3.9's ``UnifiedLog.legacyFetchOffsetsBefore``),
    in descending order, at most ``max_num_offsets`` of them.

    The candidates are one ``(offset, time)`` per segment, ``(max(base_offset, log_start_offset),
    file mtime)``, then ``(log_end_offset, now_ms)`` when the last segment holds any bytes.
    ``timestamp`` -1 (latest) starts at the last candidate, -2 (earliest) and -4 (earliest local)
    at the first (so at most one offset); any other value at the last candidate whose time is <=
    ``timestamp`` (none: an empty list). From there the offsets are taken backwards. Segment
    times are file modification times, not record timestamps, as in Kafka. ``max_num_offsets``
    0 gives an empty list; a negative one raises ``ValueError`` (Kafka's array of negative size).
    """
    if max_num_offsets < 0:
        raise ValueError(f"max_num_offsets {max_num_offsets} is negative")
    candidates = [(max(s.base_offset, log_start_offset), s.last_modified_ms) for s in segments]
    if segments and segments[-1].size > 0:
        candidates.append((log_end_offset, now_ms))
    if timestamp == -1:
        start = len(candidates) - 1
    elif timestamp in (-2, -4):
        start = 0 if candidates else -1
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = min(max_num_offsets, start + 1)
    return sorted((candidates[start - j][0] for j in range(count)), reverse=True)


def read_across(
    segments: Sequence[LogSegment],
    base_offsets: Sequence[int],
    log_end_offset: int,
    fetch_offset: int,
    max_bytes: int,
    max_offset: int | None,
    min_one_message: bool,
) -> FetchDataInfo:
    """Read from the segment holding ``fetch_offset``, or the next one when that segment has
    nothing at or after it (a gap compaction or an aborted write left). ``max_offset`` bounds the
    read (exclusive); the checks of the offset against the log's range are the caller's."""
    idx = max(bisect.bisect_right(base_offsets, fetch_offset) - 1, 0)
    n = len(base_offsets)
    while idx < n:
        upper = base_offsets[idx + 1] if idx + 1 < n else log_end_offset
        limit = max_offset if max_offset is not None and max_offset < upper else None
        info = segments[idx].read(fetch_offset, max_bytes, limit, min_one_message)
        if info is not None:
            return info
        idx += 1
    return FetchDataInfo(fetch_offset)


def remove_segments(
    segments: list[LogSegment], base_offsets: list[int], doomed: Sequence[LogSegment], reason: str, ident: str
) -> None:
    """Take ``doomed`` out of the lists and delete their files (retention, DeleteRecords)."""
    for seg in doomed:
        logger.info("%s Deleting segment %s (%s breached)", ident, seg.log_path.name, reason)
        segments.remove(seg)
        base_offsets.remove(seg.base_offset)
        seg.delete()


def truncate_segments(segments: list[LogSegment], base_offsets: list[int], offset: int) -> int:
    """Delete the segments whose base offset is above ``offset`` (always keeping the first one),
    truncate the one left last at ``offset`` (a whole batch holding it goes) and make it the active
    segment; return the new log end offset (replication truncation)."""
    while len(segments) > 1 and base_offsets[-1] > offset:
        base_offsets.pop()
        segments.pop().delete()
    active = segments[-1]
    active.truncate_to(offset)
    active.make_active()
    return active.read_next_offset()


def flush_segments(segments: Sequence[LogSegment], base_offsets: Sequence[int], start: int, end: int) -> None:
    """fsync the segments holding offsets in ``[start, end)``."""
    first = max(bisect.bisect_right(base_offsets, start) - 1, 0)
    for seg in segments[first:]:
        if seg.base_offset >= end:
            break
        seg.flush()
