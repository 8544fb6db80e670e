"""One log segment: a ``.log`` file of record batches plus its ``.index`` and ``.timeindex``
(Kafka's ``LogSegment``).

Files, named by the segment's base offset zero-padded to 20 digits (e.g. ``00000000000000000100``):

* ``<base>.log``: v2 record batches back to back, exactly as appended (base offsets and leader
  epochs stamped by the leader). Every offset in the segment is >= the base offset and every
  relative offset fits in an int32.
* ``<base>.index`` / ``<base>.timeindex``: sparse indexes (see :mod:`odradek.storage.index`).
* ``<base>.txnindex``: transactions aborted in the segment, when there are any
  (:mod:`odradek.storage.txn_index`).
  An entry is added for a batch when more than ``index.interval.bytes`` bytes were appended since
  the previous entry (Kafka's rule, evaluated per batch; a full index just stops growing).

The ``.log`` file itself is a :class:`~odradek.storage.file_records.FileRecords`. The segment
never decodes records on its append and read paths: it reads batch headers only
(:meth:`scan_batches`), except :meth:`find_offset_by_timestamp` which decodes the one batch
holding the answer.

Crash policy: appends are one ``pwritev`` at the known end; if it fails the file is cut back to
the previous size. A torn tail left by a crash is found by :meth:`recover` (CRC-checked scan),
which cuts it off and rebuilds both indexes. Indexes of a segment that is not active are opened
lazily and trimmed to their valid size when the segment is rolled or closed.

Not thread-safe: called from the broker's event-loop thread only, through ``Log`` (an I/O thread
may run ``self.log.write_at`` for an append the log then commits here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from odradek.protocol.records import LOG_OVERHEAD, BatchHeader, decode_records
from odradek.storage.file_records import FileRecords
from odradek.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from odradek.storage.results import FetchDataInfo, FileSlice
from odradek.storage.txn_index import TXN_INDEX_FILE_SUFFIX, TransactionIndex

__all__ = [
    "INDEX_FILE_SUFFIX",
    "LOG_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "BatchMeta",
    "LogSegment",
    "filename_prefix_from_offset",
    "offset_from_file_name",
]

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"

_INT32_MAX = 2**31 - 1

BatchMeta = tuple[int, int, int, int]
"""Per appended batch: (position within the appended bytes, last offset, max timestamp, size)."""


def filename_prefix_from_offset(offset: int) -> str:
    """``100`` -> ``00000000000000000100``."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int | None:
    """Base offset of ``00000000000000000100.log`` (any suffix); None if the name is not one."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


class LogSegment:
    """A segment of a partition log; see the module docstring for files and policies.

    ``create=True`` starts a new, empty segment (any old files with this base offset are
    replaced); otherwise the existing ``.log`` is opened and the indexes are opened on first use.
    ``time_ms`` is the clock (ms) used for the segment's creation time.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        time_ms: Callable[[], int],
        create: bool = False,
    ) -> None:
        self.dir = Path(directory)
        self.base_offset = base_offset
        prefix = filename_prefix_from_offset(base_offset)
        self.log_path = self.dir / (prefix + LOG_FILE_SUFFIX)
        self.index_path = self.dir / (prefix + INDEX_FILE_SUFFIX)
        self.time_index_path = self.dir / (prefix + TIME_INDEX_FILE_SUFFIX)
        self.txn_index = TransactionIndex(self.dir / (prefix + TXN_INDEX_FILE_SUFFIX))
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self._time_ms = time_ms
        if create:
            self.index_path.unlink(missing_ok=True)
            self.time_index_path.unlink(missing_ok=True)
        self.log = FileRecords(self.log_path, create=create)
        self._index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._created_ms = time_ms()
        self._max_ts_loaded = create
        self._max_timestamp = -1
        self._offset_of_max_timestamp = -1

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.log.size})"

    # --- properties ---------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the ``.log`` file."""
        return self.log.size

    @property
    def closed(self) -> bool:
        return self.log.closed

    @property
    def fd(self) -> int:
        return self.log.fd

    @property
    def offset_index(self) -> OffsetIndex:
        if self._index is None:
            self._index = OffsetIndex(self.index_path, self.base_offset, self.max_index_size)
        return self._index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(self.time_index_path, self.base_offset, self.max_index_size)
        return self._time_index

    @property
    def created_ms(self) -> int:
        return self._created_ms

    @property
    def max_timestamp_so_far(self) -> int:
        """Largest batch ``maxTimestamp`` in the segment; -1 when none (empty or no timestamps)."""
        self._ensure_max_timestamp()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        """Last offset of the batch holding :attr:`max_timestamp_so_far`; -1 when none."""
        self._ensure_max_timestamp()
        return self._offset_of_max_timestamp

    @property
    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms

    @property
    def largest_timestamp(self) -> int:
        """Kafka's retention timestamp: the max timestamp, or the file's mtime when there is none."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    def indexes_exist(self) -> bool:
        return self.index_path.exists() and self.time_index_path.exists()

    def nothing_indexed(self) -> bool:
        """Whether the segment is empty and its indexes are neither open nor hold a byte on disk:
        then there is nothing to check, rebuild or preallocate until the first append or lookup
        opens them (:class:`~odradek.storage.index.AbstractIndex` preallocates a new file)."""
        return (
            self._index is None
            and self._time_index is None
            and self.log.size == 0
            and _empty_or_absent(self.index_path)
            and _empty_or_absent(self.time_index_path)
        )

    # --- reading the log file ---------------------------------------------------------------

    def read_at(self, position: int, size: int) -> bytes:
        """``size`` bytes of the ``.log`` file at ``position`` (fewer at its end)."""
        return self.log.read_at(position, size)

    def scan_batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of the whole batches from ``start``; headers only, no CRC check."""
        return self.log.scan_batches(start, end)

    def read_header_at(self, position: int) -> BatchHeader | None:
        """The batch header at ``position``, or None when there is no plausible one."""
        return self.log.read_header_at(position)

    # --- append -------------------------------------------------------------------------------

    def begin_append(self) -> int:
        """The position the next append starts at (loads the segment's max timestamp first)."""
        self._ensure_max_timestamp()
        return self.log.size

    def commit_append(self, position: int, size: int, batches: Sequence[BatchMeta]) -> None:
        """Commit ``size`` bytes that ``self.log.write_at`` wrote at :meth:`begin_append`'s position.

        ``batches`` describes each batch in order (positions relative to ``position``); the caller
        guarantees offsets are increasing, above the previous content, and fit as relative
        offsets. Raises KafkaStorageError, indexing nothing, when the file changed since the write
        started.
        """
        self.log.commit_append(position, size)
        if not batches:
            return
        if position == 0:
            self._rolling_based_timestamp = max(b[2] for b in batches)
        index = self.offset_index
        time_index = self.time_index
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        max_ts = self._max_timestamp
        offset_of_max = self._offset_of_max_timestamp
        for rel_pos, last_offset, batch_max_ts, batch_size in batches:
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
                offset_of_max = last_offset
            if since > interval:
                if not index.is_full:
                    index.append(last_offset, position + rel_pos)
                if not time_index.is_full and max_ts >= 0:
                    time_index.maybe_append(max_ts, offset_of_max)
                since = 0
            since += batch_size
        self._bytes_since_last_index_entry = since
        self._max_timestamp = max_ts
        self._offset_of_max_timestamp = offset_of_max

    # --- read ---------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``; None if none."""
        mapping = self.offset_index.lookup(offset)
        for pos, h in self.scan_batches(max(mapping.position, starting_position)):
            if h.base_offset + h.last_offset_delta >= offset:
                return pos, h
        return None

    def read(
        self, start_offset: int, max_size: int, max_offset: int | None = None, min_one_message: bool = True
    ) -> FetchDataInfo | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes.

        None when no batch of this segment reaches ``start_offset``. Batches whose last offset is
        >= ``max_offset`` (exclusive bound) are not returned. With ``min_one_message`` the first
        batch is returned even if larger than ``max_size``; otherwise the result is empty then.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start_pos, first = found
        empty = FetchDataInfo(start_offset)
        if max_offset is not None and first.last_offset >= max_offset:
            return empty
        first_size = first.batch_length + LOG_OVERHEAD
        if first_size > max_size and not min_one_message:
            return empty
        end = start_pos + first_size
        size = self.log.size
        if max_offset is None and size - start_pos <= max_size:
            end = size
        elif end - start_pos < max_size:
            for pos, h in self.scan_batches(end):
                if max_offset is not None and h.base_offset + h.last_offset_delta >= max_offset:
                    break
                next_end = pos + h.batch_length + LOG_OVERHEAD
                if next_end - start_pos > max_size:
                    break
                end = next_end
        return FetchDataInfo(
            start_offset,
            first.base_offset,
            FileSlice(str(self.log_path), self.log.fd, start_pos, end - start_pos, self.log),
        )

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        if self.log.size == 0:
            return self.base_offset  # no index needed (an idle empty partition opens none)
        last = self.offset_index.last_entry
        next_offset = self.base_offset
        for _, h in self.scan_batches(last.position):
            next_offset = h.base_offset + h.last_offset_delta + 1
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """First ``(offset, timestamp)`` with timestamp >= ``timestamp`` and offset >= ``starting_offset``.

        Uses the time index, scans batch headers for the first batch whose ``maxTimestamp`` is
        large enough, then decodes only that batch. None when no record qualifies.
        """
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for pos, h in self.scan_batches(position):
            if h.max_timestamp < timestamp or h.base_offset + h.last_offset_delta < starting_offset:
                continue
            for record in decode_records(self.read_at(pos, h.batch_length + LOG_OVERHEAD)):
                if record.timestamp_ms >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp_ms
        return None

    def find_max_timestamp_record(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record holding the segment's max timestamp."""
        max_ts = self.max_timestamp_so_far
        if max_ts < 0:
            return None
        found = self.translate_offset(self._offset_of_max_timestamp)
        if found is None:
            return None
        pos, h = found
        for record in decode_records(self.read_at(pos, h.batch_length + LOG_OVERHEAD)):
            if record.timestamp_ms == max_ts:
                return record.offset, max_ts
        return h.base_offset + h.last_offset_delta, max_ts

    # --- timestamps and rolling ---------------------------------------------------------------

    def _ensure_max_timestamp(self) -> None:
        """Kafka's readLargestTimestamp: last time-index entry, then the batches after it."""
        if self._max_ts_loaded:
            return
        self._max_ts_loaded = True
        tindex = self.time_index
        max_ts, offset_of_max = -1, -1
        start = 0
        if tindex.entries:
            last = tindex.last_entry
            max_ts, offset_of_max = last.timestamp, last.offset
            start = self.offset_index.lookup(last.offset).position
        for _, h in self.scan_batches(start):
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                offset_of_max = h.base_offset + h.last_offset_delta
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Age used by ``segment.ms``: by the first batch's timestamp if it has one, else wall time."""
        if self._rolling_based_timestamp is None and self.log.size > 0:
            h = self.read_header_at(0)
            self._rolling_based_timestamp = h.max_timestamp if h is not None else -1
        rbt = self._rolling_based_timestamp
        if rbt is not None and rbt >= 0:
            return message_timestamp - rbt
        return now_ms - self._created_ms

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> str | None:
        """Why the segment must be rolled before this append, or None (Kafka's shouldRoll).

        Reasons: it would exceed ``segment.bytes``; it is older than ``segment.ms``; an index is
        full; the new offsets do not fit relative to the base offset. An empty segment only rolls
        for the last reason.
        """
        if max_offset_in_messages - self.base_offset > _INT32_MAX or max_offset_in_messages < self.base_offset:
            return f"offset {max_offset_in_messages} does not fit relative to base offset {self.base_offset}"
        size = self.log.size
        if size == 0:
            return None
        if size > max_segment_bytes - messages_size:
            return f"log size {size} + {messages_size} would exceed segment.bytes {max_segment_bytes}"
        if self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > max_segment_ms:
            return f"segment older than segment.ms {max_segment_ms}"
        if self.offset_index.is_full:
            return f"offset index full ({self.offset_index.entries} entries)"
        if self.time_index.is_full:
            return f"time index full ({self.time_index.entries} entries)"
        return None

    # --- recovery and truncation --------------------------------------------------------------

    def sanity_check(self) -> int:
        """Check both index files against the log; return the segment's next offset.

        Raises CorruptIndexError when an index is malformed or disagrees with the log (entries not
        increasing, size not a multiple of the entry size, last entry beyond the log or not at the
        batch it names, time-index offsets beyond the log).
        """
        index = self.offset_index
        index.sanity_check()
        for n in {0, index.entries - 1} if index.entries else ():
            entry = index.entry(n)
            if entry.position >= self.log.size:
                raise CorruptIndexError(
                    f"index file {self.index_path.name} entry {entry} points beyond the log ({self.log.size} bytes)"
                )
            h = self.read_header_at(entry.position)
            if h is None or h.base_offset + h.last_offset_delta != entry.offset:
                found = "no batch" if h is None else f"a batch ending at offset {h.last_offset}"
                raise CorruptIndexError(f"index file {self.index_path.name} entry {entry} points at {found} in the log")
        next_offset = self.read_next_offset()
        tindex = self.time_index
        tindex.sanity_check()
        if tindex.entries and tindex.last_entry.offset >= next_offset:
            raise CorruptIndexError(
                f"time index file {self.time_index_path.name} names offset {tindex.last_entry.offset} "
                f"beyond the log's last offset {next_offset - 1}"
            )
        return next_offset

    def recover(self) -> tuple[int, str | None]:
        """Rebuild both indexes from a CRC-checked scan of the log; cut off an invalid tail.

        Returns ``(bytes_truncated, reason)``; reason is None when the whole file was valid.
        A batch is invalid when its header is torn, its length or magic is wrong, its CRC does not
        match, its counts are inconsistent, or its offsets go backwards or do not fit the segment.
        An empty segment with nothing indexed opens no index (:meth:`nothing_indexed`).
        """
        if self.nothing_indexed():
            return 0, None
        index = self.offset_index
        tindex = self.time_index
        index.reset()
        tindex.reset()
        interval = self.index_interval_bytes
        since = 0
        max_ts, offset_of_max = -1, -1
        expected_min = self.base_offset
        scan = self.log.checked_batches()
        valid_end: int | None = None
        reason: str | None = None
        for pos, h in scan:
            last_offset = h.base_offset + h.last_offset_delta
            if h.base_offset < expected_min:
                valid_end, reason = pos, f"batch base offset {h.base_offset} is below the expected {expected_min}"
                break
            if last_offset - self.base_offset > _INT32_MAX:
                valid_end = pos
                reason = f"offset {last_offset} does not fit relative to base offset {self.base_offset}"
                break
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, last_offset
            if since > interval:
                if not index.is_full:
                    index.append(last_offset, pos)
                if not tindex.is_full and max_ts >= 0:
                    tindex.maybe_append(max_ts, offset_of_max)
                since = 0
            since += h.batch_length + LOG_OVERHEAD
            expected_min = last_offset + 1
        if valid_end is None:
            valid_end, reason = scan.valid_bytes, scan.reason
        truncated = self.log.truncate_to(valid_end)
        self._bytes_since_last_index_entry = since
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max
        self._max_ts_loaded = True
        self._rolling_based_timestamp = None
        return truncated, reason

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after it; return the bytes removed.

        Truncation is at a batch boundary: when ``offset`` is inside a batch, the whole batch goes.
        The indexes are cut accordingly and preallocated again (the segment becomes active).
        """
        found = self.translate_offset(offset)
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        if found is None:
            return 0
        pos, h = found
        self.offset_index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        self.txn_index.truncate_to(h.base_offset)
        truncated = self.log.truncate_to(pos)
        if pos == 0:
            self._created_ms = self._time_ms()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_ts_loaded = False
        self._ensure_max_timestamp()
        return truncated

    def make_active(self) -> None:
        """Preallocate the indexes again so the segment can take appends. An empty segment whose
        index files are empty or absent (a new log, or one closed cleanly before any append) opens
        nothing: its first append or lookup opens and preallocates them, so an idle empty
        partition holds one file descriptor (its ``.log``), not three."""
        if self.nothing_indexed():
            return
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)

    def on_become_inactive(self) -> None:
        """Roll bookkeeping: add the final time-index entry, trim both index files and release
        their mappings (reopened on the next lookup)."""
        self._ensure_max_timestamp()
        if self._max_timestamp >= 0:
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self.release_indexes()

    def release_indexes(self) -> None:
        """Close the index mappings (they are reopened on next use)."""
        if self._index is not None:
            self._index.close()
            self._index = None
        if self._time_index is not None:
            self._time_index.close()
            self._time_index = None

    def delete_index_files(self) -> None:
        """Remove both index files (before a rebuild)."""
        for idx in (self._index, self._time_index):
            if idx is not None:
                idx.delete()
        self._index = None
        self._time_index = None
        self.index_path.unlink(missing_ok=True)
        self.time_index_path.unlink(missing_ok=True)

    # --- lifecycle ----------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the log and msync the indexes."""
        self.log.flush()
        if self._index is not None:
            self._index.flush()
        if self._time_index is not None:
            self._time_index.flush()

    def close(self) -> None:
        """Write the final time-index entry, trim and close the indexes, close the log file."""
        if self.log.closed:
            return
        try:
            if self._max_ts_loaded and self._max_timestamp >= 0 and self._time_index is not None:
                self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, True)
            self.release_indexes()
        finally:
            self.log.close()

    def delete(self) -> None:
        """Close and remove the segment's files."""
        for idx in (self._index, self._time_index):
            if idx is not None:
                idx.delete()
        self._index = None
        self._time_index = None
        self.log.delete()
        self.index_path.unlink(missing_ok=True)
        self.time_index_path.unlink(missing_ok=True)
        self.txn_index.delete()


def _empty_or_absent(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True
