"""One clean of one log, from files (Kafka's ``Cleaner.doClean``): build the offset map of the
dirty section, then rewrite groups of segments into ``.cleaned`` files.

Runs in a worker process (or in-process for tests and benchmarks): it reads the segments by path
(``mmap``), never the ``Log`` object, and writes only ``<base>.log.cleaned``,
``<base>.index.cleaned``, ``<base>.timeindex.cleaned`` and ``<base>.txnindex.cleaned`` next to
them. The event loop later checks that the log still has exactly the segments of the plan and
swaps the files in (:mod:`.swap`).

Steps (Kafka's):

1. **Offset map** over the dirty segments, those overlapping ``[first_dirty_offset,
   upper_bound)``: keys of data batches that are not aborted (``.txnindex``), latest offset
   each. When the map is full it stops; the clean then ends at its latest offset + 1.
2. **Groups**: the segments with a base offset below that end are grouped, in order, so that a
   group's total size stays within ``segment.bytes`` and its offsets fit 32-bit relative offsets
   (Kafka's ``groupSegmentsBySize``). Each group becomes one cleaned segment named by its first
   base offset.
3. **Rewrite** each batch by the rules of :mod:`.batch_filter`; write the offset and time
   indexes (an entry per ``index.interval.bytes``, Kafka's rule) and the ``.txnindex`` of the
   aborted transactions whose markers stay. If the group's last batch would go, an empty batch
   (no producer) with its offsets is written instead, so the cleaned segment ends where the group
   did and swap recovery (:mod:`odradek.storage.log_loader`) replaces exactly the group's
   segments. The cleaned ``.log`` gets the group's last modification time (time retention).
4. **Throttle** reads and writes to ``io_max_bytes_per_second`` (Kafka's ``Throttler``).

Errors (corrupt batches, I/O, ENOSPC) propagate after the ``.cleaned`` files of the clean are
removed; the log is untouched. Test hook: :data:`CRASH_POINT_ENV` (see :mod:`.swap`).
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from odradek.errors import CorruptRecordError
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CONTROL_FLAG_MASK,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
)
from odradek.storage.cleaner.batch_filter import (
    CleanedTransactionMetadata,
    build_empty_batch,
    control_type_of,
    filter_batch,
    map_batch_keys,
    records_of,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.swap import CLEANED_SUFFIX, cleaned_paths, crash_point, remove_suffixed
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.txn_index import AbortedTxn, TransactionIndex

__all__ = ["CleanPlan", "CleanResult", "CleanedGroup", "CleanerStats", "SegmentRef", "run_clean"]

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A segment of the plan: base offset, ``.log`` path, its size when planned, and the base
    offset of the next segment (the log end offset for the last one)."""

    base_offset: int
    log_path: str
    size: int
    next_base_offset: int


@dataclass(frozen=True, slots=True)
class CleanPlan:
    """Everything a worker needs to clean a log (picklable). ``segments`` are all the segments
    from the log start below ``upper_bound`` (the first uncleanable offset; never the active
    one). ``retain_offsets``: last offsets of batches kept even if emptied (active producers'
    last batches); None derives them from the log (each producer id's last batch)."""

    directory: str
    segments: tuple[SegmentRef, ...]
    first_dirty_offset: int
    upper_bound: int
    now_ms: int
    delete_retention_ms: int
    map_capacity_bytes: int
    max_segment_bytes: int
    index_interval_bytes: int
    max_index_bytes: int
    retain_offsets: frozenset[int] | None = None
    io_max_bytes_per_second: float = float("inf")
    txn_index_paths: tuple[str, ...] = ()
    """The ``.txnindex`` of every segment of the log, the active one included: an aborted
    transaction's entry sits with its marker, which may come after the cleaned range."""


@dataclass(slots=True)
class CleanerStats:
    """Figures of one clean (Kafka's ``CleanerStats``)."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    map_records_read: int = 0
    map_bytes_read: int = 0
    map_entries: int = 0
    map_utilization: float = 0.0
    elapsed_s: float = 0.0
    end_offset: int = -1
    first_dirty_offset: int = -1


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """A cleaned segment waiting in ``.cleaned`` files and the planned segments it replaces."""

    base_offset: int
    replaces: tuple[SegmentRef, ...]
    last_modified_ns: int


@dataclass
class CleanResult:
    groups: list[CleanedGroup]
    end_offset: int
    stats: CleanerStats = field(default_factory=CleanerStats)


class _Throttler:
    """Sleeps so that bytes / elapsed stays under ``rate`` (bytes per second)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.done = 0

    def maybe_throttle(self, n: int) -> None:
        if self.rate == float("inf") or self.rate <= 0:
            return
        self.done += n
        ahead = self.done / self.rate - (time.monotonic() - self.start)
        if ahead > 0.001:
            time.sleep(ahead)


def _batches(m: _Mapped) -> Iterator[tuple[int, BatchHeader, bytes]]:
    """``(position, header, batch bytes)`` of each batch; CorruptRecordError at the first batch
    that is torn, malformed, fails its CRC, or whose offsets are not increasing within the
    segment's range."""
    mm, size, path = m.data, m.size, m.path
    expected, limit = m.ref.base_offset, m.ref.next_base_offset
    pos = 0
    while pos < size:
        if size - pos < LOG_OVERHEAD + MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"{path}: truncated batch at position {pos}")
        h = BatchHeader.parse(mm[pos : pos + BATCH_HEADER_SIZE])
        bsize = h.batch_length + LOG_OVERHEAD
        if h.batch_length < MIN_BATCH_LENGTH or pos + bsize > size or h.magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"{path}: invalid batch at position {pos} (length {h.batch_length})")
        batch = mm[pos : pos + bsize]
        if crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]) != h.crc:
            raise CorruptRecordError(f"{path}: CRC mismatch in the batch at position {pos}")
        last = h.base_offset + h.last_offset_delta
        if h.base_offset < expected or last >= limit:
            raise CorruptRecordError(
                f"{path}: the batch at position {pos} has offsets {h.base_offset}-{last} outside [{expected}, {limit})"
            )
        expected = last + 1
        yield pos, h, batch
        pos += bsize


class _Mapped:
    """A read-only view of a segment's ``.log`` up to its planned size."""

    def __init__(self, ref: SegmentRef) -> None:
        self.ref = ref
        self.path = path = ref.log_path
        self.size = size = ref.size
        self._fd = os.open(path, os.O_RDONLY)
        actual = os.fstat(self._fd).st_size
        if actual < size:
            os.close(self._fd)
            raise CorruptRecordError(f"{path} has {actual} bytes, fewer than the {size} planned")
        self.data: mmap.mmap | bytes = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ) if size else b""

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        os.close(self._fd)

    def __enter__(self) -> _Mapped:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _aborted_in(plan: CleanPlan, start: int, end: int) -> list[AbortedTxn]:
    """The ``.txnindex`` entries of the log overlapping ``[start, end)`` (Kafka's
    ``collectAbortedTransactions``)."""
    out: list[AbortedTxn] = []
    for path in plan.txn_index_paths:
        for txn in TransactionIndex(Path(path)).entries():
            if txn.last_offset >= start and txn.first_offset < end:
                out.append(txn)
    return out


def _producer_last_batches(segments: tuple[SegmentRef, ...]) -> frozenset[int]:
    last: dict[int, int] = {}
    for seg in segments:
        with _Mapped(seg) as m:
            for _, h, _ in _batches(m):
                if h.producer_id >= 0:
                    last[h.producer_id] = h.base_offset + h.last_offset_delta
    return frozenset(last.values())


def build_offset_map(plan: CleanPlan, offset_map: OffsetMap, stats: CleanerStats, throttler: _Throttler) -> None:
    """Step 1 of the module docstring: fill ``offset_map`` from the dirty section."""
    start, upper = plan.first_dirty_offset, plan.upper_bound
    dirty = tuple(s for s in plan.segments if s.next_base_offset > start and s.base_offset < upper)
    txns = CleanedTransactionMetadata(_aborted_in(plan, start, upper))
    for seg in dirty:
        with _Mapped(seg) as m:
            for _, h, batch in _batches(m):
                if h.base_offset >= upper:
                    return
                last = h.base_offset + h.last_offset_delta
                if h.attributes & CONTROL_FLAG_MASK:
                    txns.on_control_batch_read(h, control_type_of(batch, h))
                elif not txns.on_batch_read(h) and last >= start:
                    stats.map_records_read += h.records_count
                    if map_batch_keys(records_of(batch, h), h, start, offset_map):
                        return
                if last >= start:
                    offset_map.update_latest_offset(last)
            stats.map_bytes_read += m.size
            throttler.maybe_throttle(m.size)


def group_segments(segments: tuple[SegmentRef, ...], max_size: int) -> list[tuple[SegmentRef, ...]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose sizes add up to at most
    ``max_size`` and whose offsets fit 32-bit offsets relative to the group's base."""
    groups: list[tuple[SegmentRef, ...]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        i += 1
        while (
            i < len(segments)
            and size + segments[i].size <= max_size
            and segments[i].next_base_offset - 1 - group[0].base_offset <= _INT32_MAX
        ):
            size += segments[i].size
            group.append(segments[i])
            i += 1
        groups.append(tuple(group))
    return groups


class _CleanedWriter:
    """Writes one cleaned segment's four ``.cleaned`` files."""

    def __init__(self, directory: str, base: int, plan: CleanPlan) -> None:
        self.base = base
        paths = cleaned_paths(directory, base)
        self.paths = paths
        for p in paths.values():
            p.unlink(missing_ok=True)
        self._fd = -1
        self._index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        try:
            self._fd = os.open(paths["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self._index = OffsetIndex(paths["index"], base, plan.max_index_bytes)
            self._time_index = TimeIndex(paths["timeindex"], base, plan.max_index_bytes)
        except BaseException:
            self.abort()
            raise
        self._interval = plan.index_interval_bytes
        self._since = 0
        self.position = 0
        self._max_ts = -1
        self._offset_of_max = -1
        self._pending: list[bytes | memoryview] = []
        self._pending_bytes = 0

    def append(self, data: bytes | memoryview, last_offset: int, max_ts: int) -> None:
        assert self._index is not None and self._time_index is not None
        if max_ts > self._max_ts:
            self._max_ts, self._offset_of_max = max_ts, last_offset
        if self._since > self._interval:
            if not self._index.is_full:
                self._index.append(last_offset, self.position)
            if not self._time_index.is_full and self._max_ts >= 0:
                self._time_index.maybe_append(self._max_ts, self._offset_of_max)
            self._since = 0
        n = len(data)
        self._since += n
        self.position += n
        self._pending.append(data)
        self._pending_bytes += n
        if self._pending_bytes >= 1 << 20:
            self._flush_pending()

    def _flush_pending(self) -> None:
        views = [memoryview(d) for d in self._pending]
        while views:
            written = os.writev(self._fd, views[:512])
            while views and written >= views[0].nbytes:
                written -= views[0].nbytes
                views.pop(0)
            if written:
                views[0] = views[0][written:]
        self._pending.clear()
        self._pending_bytes = 0

    def finish(self, aborted: list[AbortedTxn], last_modified_ns: int) -> None:
        """Write what is pending, the final time-index entry and the ``.txnindex``; fsync all."""
        self._flush_pending()
        assert self._index is not None and self._time_index is not None
        if self._max_ts >= 0:
            self._time_index.maybe_append(self._max_ts, self._offset_of_max, skip_full_check=True)
        for idx in (self._index, self._time_index):
            idx.trim_to_valid_size()
            idx.flush()
            idx.close()
        if aborted:
            with open(self.paths["txnindex"], "wb") as f:
                f.write(b"".join(t.encode() for t in aborted))
                f.flush()
                os.fsync(f.fileno())
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        os.utime(self.paths["log"], ns=(last_modified_ns, last_modified_ns))

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for idx in (self._index, self._time_index):
            if idx is not None and not idx.closed:
                idx.close()
        for p in self.paths.values():
            p.unlink(missing_ok=True)


def _clean_group(
    plan: CleanPlan,
    group: tuple[SegmentRef, ...],
    offset_map: OffsetMap,
    retain: frozenset[int],
    txns: CleanedTransactionMetadata,
    stats: CleanerStats,
    throttler: _Throttler,
) -> CleanedGroup:
    """Step 3 of the module docstring for one group (``txns`` spans the groups of the clean)."""
    base = group[0].base_offset
    writer = _CleanedWriter(plan.directory, base, plan)
    try:
        txns.add_aborted(_aborted_in(plan, base, group[-1].next_base_offset))
        txns.cleaned_index = []
        now, retention = plan.now_ms, plan.delete_retention_ms
        last_modified = 0
        last_written = -1
        last_header: BatchHeader | None = None
        for seg in group:
            last_modified = max(last_modified, os.stat(seg.log_path).st_mtime_ns)
            with _Mapped(seg) as m:
                for _, h, batch in _batches(m):
                    last = h.base_offset + h.last_offset_delta
                    last_header = h
                    retain_empty = h.producer_id >= 0 and last in retain
                    if h.attributes & CONTROL_FLAG_MASK:
                        can_discard = txns.on_control_batch_read(h, control_type_of(batch, h))
                        discard = can_discard and h.has_delete_horizon_ms and h.base_timestamp <= now
                        marker_of_empty = can_discard
                    else:
                        discard = txns.on_batch_read(h)
                        marker_of_empty = False
                    out = filter_batch(
                        batch,
                        h,
                        offset_map,
                        discard_batch=discard,
                        retain_empty=retain_empty,
                        marker_of_empty_txn=marker_of_empty,
                        now_ms=now,
                        delete_retention_ms=retention,
                    )
                    stats.records_read += out.records_read
                    stats.records_retained += out.records_retained
                    if out.data is not None:
                        writer.append(out.data, last, out.max_timestamp)
                        stats.bytes_written += len(out.data)
                        last_written = last
                stats.bytes_read += m.size
                throttler.maybe_throttle(m.size)
        if last_header is not None and last_written != last_header.base_offset + last_header.last_offset_delta:
            filler = build_empty_batch(last_header, keep_producer=False)
            writer.append(filler, last_header.base_offset + last_header.last_offset_delta, -1)
            stats.bytes_written += len(filler)
        writer.finish(txns.cleaned_index, last_modified)
    except BaseException:
        writer.abort()
        raise
    return CleanedGroup(base, group, last_modified)


def run_clean(plan: CleanPlan) -> CleanResult:
    """Build the map and write the ``.cleaned`` segments of ``plan`` (module docstring). On any
    error every ``.cleaned`` file of this clean is removed and the error propagates."""
    started = time.monotonic()
    stats = CleanerStats(first_dirty_offset=plan.first_dirty_offset)
    throttler = _Throttler(plan.io_max_bytes_per_second)
    offset_map = OffsetMap(plan.map_capacity_bytes)
    build_offset_map(plan, offset_map, stats, throttler)
    end = offset_map.latest_offset + 1
    stats.map_entries = len(offset_map)
    stats.map_utilization = offset_map.utilization
    stats.end_offset = end
    to_clean = tuple(s for s in plan.segments if s.base_offset < end)
    retain = plan.retain_offsets if plan.retain_offsets is not None else _producer_last_batches(plan.segments)
    groups: list[CleanedGroup] = []
    txns = CleanedTransactionMetadata([])
    try:
        for group in group_segments(to_clean, plan.max_segment_bytes):
            groups.append(_clean_group(plan, group, offset_map, retain, txns, stats, throttler))
    except BaseException:
        for g in groups:
            remove_suffixed(plan.directory, g.base_offset, CLEANED_SUFFIX)
        raise
    crash_point("cleaned")
    stats.elapsed_s = time.monotonic() - started
    return CleanResult(groups, end, stats)
