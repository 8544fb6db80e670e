"""The segments of one partition's log (Kafka's ``LocalLog``): a directory of segment files.

Directory ``<log.dirs>/<topic>-<partition>/`` holding segments named by base offset (see
:mod:`odradek.storage.segment`). The last segment is the *active* one: appends go there, and it is
rolled (``maybe_roll``) when it would exceed ``segment.bytes``, is older than ``segment.ms``, or
has a full index (``segment.index.bytes``).

:class:`LocalLog` knows offsets and bytes only: it writes prepared appends
(:mod:`odradek.storage.append`) and reads, rolls, retains, truncates and flushes segments. The
partition's log, :class:`odradek.storage.log.Log` (Kafka's ``UnifiedLog``), extends it with the
appends themselves, the producer state, the transaction state, the leader epoch cache and the
producer snapshots; nothing outside storage uses a bare :class:`LocalLog`.

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``. The log end offset is
the next offset to assign; the high watermark is set by the replication layer (a single broker
sets it to the log end offset after each append) and is persisted only through the
``replication-offset-checkpoint`` written by ``LogManager.checkpoint``. The recovery point is the
offset below which everything has been fsynced.

Hot paths never touch records: an append validates batch headers and CRCs and writes the
producer's bytes with one ``pwritev``, new base offsets and leader epoch in front of each batch
(:mod:`odradek.storage.append`); a read locates the batch through the segment and offset index
and returns a byte range of whole stored batches.

Crash policy: see :mod:`odradek.storage.log_loader` (recovery at open) and ``flush``. Flushing
follows ``flush.messages``/``flush.ms`` (default: never fsync explicitly, leave it to the OS);
segments are fsynced after a roll when ``flush_pending_rolls`` runs (the log manager's periodic
flush), which advances the recovery point.

Threading: not thread-safe. Every method must be called from the broker's asyncio event-loop
thread. While :meth:`odradek.storage.log.Log.append_as_leader_async` has an I/O thread write a
payload (``append_lock`` held, ``_write_in_progress`` set), the other methods see the log as it
was until the commit, and retention leaves the active segment alone.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.errors import KafkaStorageError, OffsetOutOfRangeError
from odradek.storage.append import PreparedAppend
from odradek.storage.checkpoint import fsync_dir
from odradek.storage.config import LogConfig
from odradek.storage.log_loader import load_segments
from odradek.storage.log_segments import (
    find_offset_by_timestamp,
    flush_segments,
    latest_timestamp,
    legacy_offsets_before,
    read_across,
    remove_segments,
    replace_segments,
    truncate_segments,
)
from odradek.storage.results import FetchDataInfo, LogAppendInfo
from odradek.storage.retention import SegmentPredicate, below_log_start_offset, deletable_segments, retention_passes
from odradek.storage.segment import LogSegment
from odradek.storage.topic_partition import TopicPartition, parse_topic_partition_dir

__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "LocalLog", "wall_clock_ms"]

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3

logger = logging.getLogger("odradek.storage.log")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LocalLog:
    """A partition's segments: write, read, roll, retention, truncation, flush. See the module docstring.

    Opening runs the loader (recovery). ``log_start_offset``, ``recovery_point`` and
    ``high_watermark`` come from the log dir's checkpoint files (the log manager passes them);
    ``had_clean_shutdown`` skips recovery of unflushed segments. ``time_ms`` is the clock (ms).
    """

    def __init__(
        self,
        directory: str | Path,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        time_ms: Callable[[], int] | None = None,
        topic_partition: TopicPartition | None = None,
    ) -> None:
        self._dir = Path(directory)
        tp = topic_partition or parse_topic_partition_dir(self._dir.name)
        if tp is None:
            raise ValueError(f"{self._dir.name!r} is not a partition directory name (<topic>-<partition>)")
        self._tp = tp
        self._config = config
        self._time_ms = time_ms or wall_clock_ms
        self._ident = f"[Log partition={tp}, dir={self._dir.parent}]"
        created = not self._dir.exists()
        self._dir.mkdir(parents=True, exist_ok=True)
        loaded = load_segments(
            self._dir,
            config,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            time_ms=self._time_ms,
            ident=self._ident,
        )
        self._segments: list[LogSegment] = loaded.segments
        self._base_offsets: list[int] = [s.base_offset for s in self._segments]
        self._log_end_offset = loaded.next_offset
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = loaded.recovery_point
        self._recovered_from: int | None = None if had_clean_shutdown else loaded.recovery_point
        """Without a clean shutdown: the offset from which the loader recovered the segments."""
        self._high_watermark = self._log_start_offset
        if high_watermark is not None:
            self.high_watermark = high_watermark
        self._last_flush_ms = self._time_ms()
        self._pending_flush_offset: int | None = None
        self._dir_dirty = created
        """Entries of the partition directory not yet fsynced (a new segment's files)."""
        self._parent_dirty = created
        """A new partition directory whose entry in the log dir is not yet fsynced: done by the
        first :meth:`flush`, not at creation (a broker creating 3,000 partitions spent 3.4 s of its
        event loop fsyncing the log dir once each)."""
        self._closed = False
        self._append_lock = asyncio.Lock()
        self._write_in_progress = False
        self._truncation_point: int | None = None
        logger.debug(
            "%s Loaded %d segment(s): start offset %d, end offset %d",
            self._ident,
            len(self._segments),
            self._log_start_offset,
            self._log_end_offset,
        )
        self._after_load()

    def _after_load(self) -> None:
        """Runs at the end of ``__init__``, once the segments are loaded: :class:`~odradek.storage.log.Log`
        loads the state it keeps beside them here."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._tp}, start={self._log_start_offset}, end={self._log_end_offset})"

    # --- properties ---------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set the high watermark, clamped to ``[log_start_offset, log_end_offset]``."""
        self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def last_flush_time_ms(self) -> int:
        return self._last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    @property
    def append_lock(self) -> asyncio.Lock:
        """Held while an asynchronous append is written; holding it keeps appends out (other
        appends fail with KafkaStorageError or wait), e.g. while the log is copied elsewhere."""
        return self._append_lock

    @property
    def closed(self) -> bool:
        return self._closed

    # --- writing prepared appends ---------------------------------------------------------------

    def _empty_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, -1, -1, -1, self._log_start_offset, 0, 0)

    def _segment_for(self, p: PreparedAppend) -> tuple[LogSegment, int]:
        """The segment ``p`` goes to (rolling first if needed) and the position it starts at."""
        segment = self.maybe_roll(p.size, p.max_timestamp, p.last_offset, p.first_offset)
        return segment, segment.begin_append()

    def _commit(self, segment: LogSegment, position: int, p: PreparedAppend) -> LogAppendInfo:
        """Commit ``p``, written at ``position`` of ``segment``, and move the log end offset."""
        segment.commit_append(position, p.size, p.metas)
        self._log_end_offset = p.last_offset + 1
        if self.unflushed_messages >= self._config.flush_messages:
            self.flush()
        return LogAppendInfo(
            first_offset=p.first_offset,
            last_offset=p.last_offset,
            max_timestamp=p.max_timestamp,
            offset_of_max_timestamp=p.offset_of_max_timestamp,
            log_append_time=p.log_append_time,
            log_start_offset=self._log_start_offset,
            records_count=p.records_count,
            valid_bytes=p.size,
        )

    # --- rolling ------------------------------------------------------------------------------

    def maybe_roll(
        self, messages_size: int, max_timestamp_in_messages: int, max_offset_in_messages: int, first_offset: int
    ) -> LogSegment:
        """The segment the next append goes to, rolling a new one first if the active one must roll."""
        active = self._segments[-1]
        cfg = self._config
        reason = active.should_roll(
            max_segment_bytes=cfg.segment_bytes,
            max_segment_ms=cfg.segment_ms,
            messages_size=messages_size,
            max_timestamp_in_messages=max_timestamp_in_messages,
            max_offset_in_messages=max_offset_in_messages,
            now_ms=self._time_ms(),
        )
        if reason is None:
            return active
        logger.info("%s Rolling new log segment: %s", self._ident, reason)
        return self.roll(first_offset)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log_end_offset)``.

        The old active segment gets its final time-index entry and trimmed indexes; it is fsynced
        later by :meth:`flush_pending_rolls`. An empty active segment is replaced, not kept.
        """
        self._check_open()
        new_base = max(expected_next_offset or 0, self._log_end_offset)
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            self._segments.pop()
            self._base_offsets.pop()
            active.delete()
        else:
            active.on_become_inactive()
        segment = self._new_segment(new_base)
        self._segments.append(segment)
        self._base_offsets.append(new_base)
        self._pending_flush_offset = new_base
        self._dir_dirty = True
        return segment

    def _new_segment(self, base_offset: int) -> LogSegment:
        segment = self._open_segment(base_offset, create=True)
        segment.make_active()
        return segment

    def _open_segment(self, base_offset: int, *, create: bool = False) -> LogSegment:
        return LogSegment(
            self._dir,
            base_offset,
            index_interval_bytes=self._config.index_interval_bytes,
            max_index_size=self._config.segment_index_bytes,
            time_ms=self._time_ms,
            create=create,
        )

    # --- read ---------------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None = None, min_one_message: bool = True
    ) -> FetchDataInfo:
        """Whole stored batches from the one holding ``fetch_offset``, up to ``max_bytes``.

        Only batches whose last offset is below ``max_offset`` (exclusive; e.g. the high watermark)
        are returned. With ``min_one_message`` the first batch comes back even if larger than
        ``max_bytes``. Reads from one segment (the next one when this one has nothing at or after
        ``fetch_offset``). Empty result when ``fetch_offset`` equals the log end offset or is
        >= ``max_offset``. Raises OffsetOutOfRangeError when ``fetch_offset`` is below the log start
        offset or above the log end offset.
        """
        self._check_open()
        start, end = self._log_start_offset, self._log_end_offset
        if fetch_offset < start or fetch_offset > end:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition {self._tp}, "
                f"but we only have log segments in the range {start} to {end}."
            )
        if fetch_offset == end or (max_offset is not None and fetch_offset >= max_offset):
            return FetchDataInfo(fetch_offset)
        return read_across(
            self._segments, self._base_offsets, end, fetch_offset, max(max_bytes, 0), max_offset, min_one_message
        )

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp`` (ListOffsets).

        Also accepts Kafka's special values: -2 -> ``(log_start_offset, -1)``, -1 ->
        ``(log_end_offset, -1)``, -3 -> :meth:`latest_timestamp`. None when no record qualifies.
        Decodes only the batch that holds the answer.
        """
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self._log_end_offset, -1
        if timestamp == MAX_TIMESTAMP:
            return self.latest_timestamp()
        return find_offset_by_timestamp(self._segments, self._base_offsets, timestamp, self._log_start_offset)

    def legacy_fetch_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0's offsets: segment starts before ``timestamp`` (by file mtime), latest
        first (see :func:`~odradek.storage.log_segments.legacy_offsets_before`)."""
        self._check_open()
        return legacy_offsets_before(
            self._segments,
            self._log_start_offset,
            self._log_end_offset,
            timestamp,
            max_num_offsets,
            self._time_ms(),
        )

    def latest_timestamp(self) -> tuple[int, int] | None:
        """``(offset, max_timestamp)`` of the first record with the largest timestamp (MAX_TIMESTAMP);
        None for an empty log or one without timestamps."""
        self._check_open()
        return latest_timestamp(self._segments)

    # --- retention ----------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Delete whole segments by retention; return how many were deleted.

        Deletes, oldest first and only segments wholly below the high watermark: those below the
        log start offset; with ``cleanup.policy`` including ``delete``, those whose largest
        timestamp is more than ``retention.ms`` old, and the oldest while the log minus that
        segment is still at least ``retention.bytes``. If every segment goes, a new empty active
        segment is rolled first (Kafka), so the log keeps its end offset. The log start offset
        moves up to the first remaining segment's base offset.
        """
        self._check_open()
        now = self._time_ms() if now_ms is None else now_ms
        deleted = self._delete_segments_where(below_log_start_offset(self._log_start_offset), "log start offset")
        for predicate, reason in retention_passes(self._config, now, lambda: self.size_in_bytes):
            deleted += self._delete_segments_where(predicate, reason)
        return deleted

    def delete_records(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (DeleteRecords; -1 = the high watermark).

        Raises OffsetOutOfRangeError when ``offset`` is negative (other than -1) or above the high
        watermark. Segments wholly below the new start are deleted. Returns the log start offset
        (never lowered).
        """
        self._check_open()
        target = self._high_watermark if offset == -1 else offset
        if target < 0 or target > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot delete records of {self._tp} up to offset {offset}: "
                f"it must be between 0 and the high watermark {self._high_watermark}"
            )
        if target > self._log_start_offset:
            logger.info("%s Incrementing log start offset to %d", self._ident, target)
            self._log_start_offset = target
            self._recovery_point = max(self._recovery_point, min(target, self._log_end_offset))
            self._delete_segments_where(below_log_start_offset(target), "log start offset")
        return self._log_start_offset

    def _delete_segments_where(self, predicate: SegmentPredicate, reason: str) -> int:
        deletable = deletable_segments(
            self._segments, predicate, high_watermark=self._high_watermark, log_end_offset=self._log_end_offset
        )
        if self._write_in_progress and deletable and deletable[-1] is self._segments[-1]:
            deletable = deletable[:-1]  # the active segment is being written to: next time
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self.roll()
        remove_segments(self._segments, self._base_offsets, deletable, reason, self._ident)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._high_watermark = max(self._high_watermark, self._log_start_offset)
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        return len(deletable)

    # --- compaction ---------------------------------------------------------------------------

    def replace_segments(self, base_offset: int, old: Sequence[LogSegment]) -> LogSegment:
        """Swap in the cleaned segment ``base_offset`` (its ``.cleaned`` files, written by the log
        cleaner) for ``old``, consecutive segments of this log, not the active one, the first at
        ``base_offset``; return the new segment (:func:`~odradek.storage.log_segments.replace_segments`:
        checks, crash-safe order, what an OSError means). Offsets, the log start and end offsets,
        the high watermark and the recovery point do not change. The old segments are closed:
        reads already handed out by them fail.
        """
        self._check_open()
        return replace_segments(
            self._dir,
            self._segments,
            self._base_offsets,
            base_offset,
            old,
            open_segment=self._open_segment,
            tp=self._tp,
            ident=self._ident,
        )

    def take_truncation_point(self) -> int | None:
        """The lowest offset this log was truncated to since the last call (None: no truncation);
        the log cleaner lowers its checkpoint to it (Kafka's ``maybeTruncateCheckpoint``)."""
        point, self._truncation_point = self._truncation_point, None
        return point

    def _note_truncation(self, offset: int) -> None:
        if self._truncation_point is None or offset < self._truncation_point:
            self._truncation_point = offset

    # --- truncation ---------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset >= ``offset`` (replication); True if anything went.

        Cuts at batch boundaries: if ``offset`` is inside a batch the whole batch goes and the log
        end offset becomes that batch's base offset. Offsets below the first segment empty the
        log and restart it at ``offset``. ``offset`` >= log end offset does nothing.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate {self._tp} to a negative offset {offset}")
        if offset >= self._log_end_offset:
            return False
        logger.info("%s Truncating to offset %d", self._ident, offset)
        self._note_truncation(offset)
        if offset < self._base_offsets[0]:
            self.truncate_fully_and_start_at(offset)
            return True
        end = truncate_segments(self._segments, self._base_offsets, offset)
        self._log_end_offset = end
        self._log_start_offset = min(self._log_start_offset, end)
        self._high_watermark = min(self._high_watermark, end)
        self._recovery_point = min(self._recovery_point, end)
        self._pending_flush_offset = None
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and restart the log empty at ``new_offset``."""
        self._check_open()
        logger.info("%s Truncating fully and starting at offset %d", self._ident, new_offset)
        self._note_truncation(new_offset)
        for seg in self._segments:
            seg.delete()
        self._segments = [self._new_segment(new_offset)]
        self._base_offsets = [new_offset]
        self._log_end_offset = self._log_start_offset = self._high_watermark = new_offset
        self._recovery_point = new_offset
        self._pending_flush_offset = None
        self._dir_dirty = True

    # --- flush, config, lifecycle -------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding offsets in ``[recovery_point, offset)`` (default: all) and
        move the recovery point to ``offset``."""
        self._check_open()
        up_to = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
        if up_to > self._recovery_point:
            flush_segments(self._segments, self._base_offsets, self._recovery_point, up_to)
            self._recovery_point = up_to
        if self._dir_dirty:
            fsync_dir(self._dir)
            self._dir_dirty = False
        if self._parent_dirty:
            fsync_dir(self._dir.parent)
            self._parent_dirty = False
        self._last_flush_ms = self._time_ms()

    def flush_pending_rolls(self) -> bool:
        """fsync the segments rolled since the last call (Kafka's post-roll flush); True if any."""
        if self._pending_flush_offset is None or self._closed:
            return False
        offset, self._pending_flush_offset = self._pending_flush_offset, None
        self.flush(offset)
        return True

    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (``segment.index.bytes`` applies to new segments)."""
        self._config = config
        for seg in self._segments:
            seg.index_interval_bytes = config.index_interval_bytes

    def close(self) -> None:
        """Close every segment (final time-index entries, trimmed indexes). No fsync: flush first."""
        if self._closed:
            return
        self._closed = True
        for seg in self._segments:
            seg.close()

    def delete(self) -> None:
        """Close the log and remove its directory."""
        if not self._closed:
            self._closed = True
            for seg in self._segments:
                seg.delete()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log of {self._tp} is closed")
