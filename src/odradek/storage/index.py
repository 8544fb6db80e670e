"""Sparse, memory-mapped segment indexes: :class:`OffsetIndex` (``.index``) and :class:`TimeIndex`
(``.timeindex``), on an :class:`AbstractIndex` base (Kafka's classes of the same names).

File formats (big-endian, fixed-size entries, no header)::

    .index      [relativeOffset int32][position int32]            8 bytes per entry
    .timeindex  [timestamp int64][relativeOffset int32]           12 bytes per entry

``relativeOffset`` is the offset minus the segment's base offset (the number in the file name).
An offset-index entry maps the *last* offset of a batch to the byte position where that batch
starts in the ``.log`` file; a time-index entry says "the largest timestamp seen up to and
including this offset is this timestamp". Entries are strictly increasing (offsets and positions;
timestamps), and only every ``index.interval.bytes`` of log get an entry, so a lookup finds the
largest entry <= the target and the reader scans the log forward from there.

While its segment is active an index file is preallocated to ``segment.index.bytes`` rounded down
to a whole number of entries and mapped with ``mmap``; the number of valid entries is kept in
memory. When the segment is rolled or closed the file is trimmed to its valid entries. After a
crash an untrimmed file ends with zero entries, which are ignored when it is opened (a dropped
entry only makes a lookup scan further: it never gives a wrong answer).

Crash policy: index files are never trusted blindly. :meth:`AbstractIndex.sanity_check` rejects a
file whose size is not a multiple of the entry size or whose entries are not increasing; the log
loader then deletes and rebuilds it from the ``.log`` file.

Not thread-safe: used from the broker's event-loop thread only (through ``LogSegment``).
"""

from __future__ import annotations

import mmap
import operator
import os
import struct
from pathlib import Path
from typing import ClassVar, NamedTuple

__all__ = ["AbstractIndex", "CorruptIndexError", "OffsetIndex", "OffsetPosition", "TimeIndex", "TimestampOffset"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT32_MAX = 2**31 - 1


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the loader rebuilds it from the log."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class AbstractIndex:
    """A file of fixed-size entries, memory-mapped, with binary search (Kafka's ``AbstractIndex``).

    ``max_index_size`` is the preallocation for a new (or empty) writable file; an existing file
    keeps its size until :meth:`resize`. ``writable=False`` maps read-only (tools). The index holds
    no descriptor of its own: the file is opened to map or resize it and closed at once (Python's
    mapping keeps a duplicate, so a partition costs the broker three descriptors, not five: 5,000
    partitions passed a 20,000-descriptor limit before).
    """

    ENTRY_SIZE: ClassVar[int] = 8

    def __init__(
        self, path: str | os.PathLike[str], base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._writable = writable
        es = self.ENTRY_SIZE
        self._max_index_size = max_index_size
        fd = os.open(self.path, (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY, 0o644)
        try:
            length = os.fstat(fd).st_size
            newly_created = length == 0
            if writable and newly_created and max_index_size > 0:
                length = max_index_size // es * es
                os.ftruncate(fd, length)
            self._length = length
            self._length_is_exact = length % es == 0
            self._mm: mmap.mmap | None = self._map(fd, length)
        finally:
            os.close(fd)  # the mapping keeps its own duplicate of the descriptor
        self._open = True
        self._max_entries = length // es
        self._entries = 0 if newly_created else self._count_entries()

    # --- mapping ------------------------------------------------------------------------------

    def _map(self, fd: int, length: int) -> mmap.mmap | None:
        if length < self.ENTRY_SIZE:
            return None
        access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
        return mmap.mmap(fd, length, access=access)

    def _count_entries(self) -> int:
        """Entries in an existing file: all of them, minus trailing all-zero entries (crash leftovers)."""
        if self._mm is None:
            return 0
        es = self.ENTRY_SIZE
        used = len(self._mm[: self._max_entries * es].rstrip(b"\x00"))
        return (used + es - 1) // es

    # --- properties ---------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def size_in_bytes(self) -> int:
        """Bytes of valid entries."""
        return self._entries * self.ENTRY_SIZE

    @property
    def length(self) -> int:
        """Current file length (preallocated while active)."""
        return self._length

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    # --- sizing -------------------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries; False if unchanged."""
        rounded = max(new_size, 0) // self.ENTRY_SIZE * self.ENTRY_SIZE
        if rounded == self._length and self._length_is_exact:
            return False
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, rounded)
            self._length = rounded
            self._length_is_exact = True
            self._mm = self._map(fd, rounded)
        finally:
            os.close(fd)
        self._max_entries = rounded // self.ENTRY_SIZE
        self._entries = min(self._entries, self._max_entries)
        return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its valid entries (done when the segment stops being active)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Drop every entry and preallocate again (before a rebuild)."""
        self._truncate_to_entries(0)
        self.resize(self._max_index_size if self._max_index_size > 0 else self._length)

    def _truncate_to_entries(self, n: int) -> None:
        if n < self._entries and self._mm is not None:
            es = self.ENTRY_SIZE
            self._mm[n * es : self._entries * es] = bytes((self._entries - n) * es)
        self._entries = min(n, self._entries)

    def _grow_one_entry(self) -> None:
        self.resize((self._entries + 1) * self.ENTRY_SIZE)

    # --- lifecycle ----------------------------------------------------------------------------

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        """Trim (if writable) and release the mapping and the file."""
        if not self._open:
            return
        try:
            if self._writable:
                self.trim_to_valid_size()
        finally:
            self._close_handles()

    def _close_handles(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._open = False

    def delete(self) -> None:
        """Close without trimming and remove the file."""
        self._close_handles()
        self.path.unlink(missing_ok=True)

    @property
    def closed(self) -> bool:
        return not self._open

    # --- search -------------------------------------------------------------------------------

    def _largest_lower_bound_slot(self, key_offset: int, unpack: struct.Struct, target: int) -> int:
        """Slot of the largest entry whose key (at ``key_offset`` in the entry) is <= target; -1 if none."""
        mm = self._mm
        n = self._entries
        if n == 0 or mm is None:
            return -1
        es = self.ENTRY_SIZE
        read = unpack.unpack_from
        if read(mm, key_offset)[0] > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if read(mm, mid * es + key_offset)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _smallest_upper_bound_slot(self, key_offset: int, unpack: struct.Struct, target: int) -> int:
        """Slot of the first entry whose key is >= target; ``entries`` if none."""
        mm = self._mm
        lo, hi = 0, self._entries
        if mm is None:
            return 0
        es = self.ENTRY_SIZE
        read = unpack.unpack_from
        while lo < hi:
            mid = (lo + hi) >> 1
            if read(mm, mid * es + key_offset)[0] < target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _raw_entries(self) -> bytes:
        return b"" if self._mm is None else self._mm[: self._entries * self.ENTRY_SIZE]

    def _check_relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > _INT32_MAX:
            raise ValueError(f"offset {offset} cannot be stored relative to base offset {self.base_offset}")
        return relative

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the file cannot be a valid index of this kind."""
        if not self._length_is_exact:
            raise CorruptIndexError(
                f"index file {self.path.name} has size {self._length}, "
                f"not a multiple of the entry size {self.ENTRY_SIZE}"
            )


class OffsetIndex(AbstractIndex):
    """``.index``: last offset of a batch -> byte position of that batch in the ``.log`` file."""

    ENTRY_SIZE = 8

    def entry(self, n: int) -> OffsetPosition:
        if not 0 <= n < self._entries or self._mm is None:
            raise IndexError(f"entry {n} out of range [0, {self._entries})")
        rel, pos = _OFFSET_ENTRY.unpack_from(self._mm, n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when empty."""
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(self._entries - 1)

    @property
    def last_offset(self) -> int:
        return self.last_entry.offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= ``target_offset``; ``(base_offset, 0)`` when there is none."""
        slot = self._largest_lower_bound_slot(0, _INT32, target_offset - self.base_offset)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        """Add an entry. Raises ValueError when full or not greater than the last entry."""
        relative = self._check_relative_offset(offset)
        n = self._entries
        if n >= self._max_entries or self._mm is None:
            raise ValueError(f"attempt to append to a full index {self.path.name} ({n} entries)")
        if n > 0:
            last_rel, last_pos = _OFFSET_ENTRY.unpack_from(self._mm, (n - 1) * 8)
            if relative <= last_rel or position <= last_pos:
                raise ValueError(
                    f"index entry ({offset}, {position}) is not after the last entry "
                    f"({self.base_offset + last_rel}, {last_pos}) in {self.path.name}"
                )
        _OFFSET_ENTRY.pack_into(self._mm, n * 8, relative, position)
        self._entries = n + 1

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._truncate_to_entries(self._smallest_upper_bound_slot(0, _INT32, offset - self.base_offset))

    def truncate_to_position(self, position: int) -> None:
        """Remove every entry whose position is >= ``position``."""
        self._truncate_to_entries(self._smallest_upper_bound_slot(4, _INT32, position))

    def all_entries(self) -> list[OffsetPosition]:
        base = self.base_offset
        return [OffsetPosition(base + rel, pos) for rel, pos in _OFFSET_ENTRY.iter_unpack(self._raw_entries())]

    def sanity_check(self) -> None:
        super().sanity_check()
        pairs = list(_OFFSET_ENTRY.iter_unpack(self._raw_entries()))
        if not pairs:
            return
        offsets = [p[0] for p in pairs]
        positions = [p[1] for p in pairs]
        if offsets[0] < 0 or positions[0] < 0:
            raise CorruptIndexError(f"index file {self.path.name} starts with a negative entry {pairs[0]}")
        if not all(map(operator.lt, offsets, offsets[1:])):
            raise CorruptIndexError(f"offsets in index file {self.path.name} are not strictly increasing")
        if not all(map(operator.lt, positions, positions[1:])):
            raise CorruptIndexError(f"positions in index file {self.path.name} are not strictly increasing")


class TimeIndex(AbstractIndex):
    """``.timeindex``: largest timestamp so far -> the offset where it was reached."""

    ENTRY_SIZE = 12

    def entry(self, n: int) -> TimestampOffset:
        if not 0 <= n < self._entries or self._mm is None:
            raise IndexError(f"entry {n} out of range [0, {self._entries})")
        ts, rel = _TIME_ENTRY.unpack_from(self._mm, n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        if self._entries == 0:
            return TimestampOffset(-1, self.base_offset)
        return self.entry(self._entries - 1)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= ``target_timestamp``; ``(-1, base_offset)`` when none."""
        slot = self._largest_lower_bound_slot(0, _INT64, target_timestamp)
        if slot < 0:
            return TimestampOffset(-1, self.base_offset)
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Add ``(timestamp, offset)`` if ``timestamp`` is larger than the last entry's.

        ``skip_full_check`` grows a full file by one entry (the final entry written when a segment
        is rolled or closed). Raises ValueError when full, or when ``offset`` is below the last
        entry's offset. Returns True when an entry was added.
        """
        n = self._entries
        last_ts = -1
        last_rel = -1
        if n > 0 and self._mm is not None:
            last_ts, last_rel = _TIME_ENTRY.unpack_from(self._mm, (n - 1) * 12)
            if timestamp <= last_ts:
                return False
        relative = self._check_relative_offset(offset)
        if relative < last_rel:
            raise ValueError(
                f"time index entry ({timestamp}, {offset}) has an offset below the last entry's "
                f"({self.base_offset + last_rel}) in {self.path.name}"
            )
        if n >= self._max_entries or self._mm is None:
            if not skip_full_check:
                raise ValueError(f"attempt to append to a full time index {self.path.name} ({n} entries)")
            self._grow_one_entry()
        assert self._mm is not None
        _TIME_ENTRY.pack_into(self._mm, n * 12, timestamp, relative)
        self._entries = n + 1
        return True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        self._truncate_to_entries(self._smallest_upper_bound_slot(8, _INT32, offset - self.base_offset))

    def all_entries(self) -> list[TimestampOffset]:
        base = self.base_offset
        return [TimestampOffset(ts, base + rel) for ts, rel in _TIME_ENTRY.iter_unpack(self._raw_entries())]

    def sanity_check(self) -> None:
        super().sanity_check()
        pairs = list(_TIME_ENTRY.iter_unpack(self._raw_entries()))
        if not pairs:
            return
        stamps = [p[0] for p in pairs]
        offsets = [p[1] for p in pairs]
        if offsets[0] < 0:
            raise CorruptIndexError(f"time index file {self.path.name} has a negative relative offset")
        if not all(map(operator.lt, stamps, stamps[1:])):
            raise CorruptIndexError(f"timestamps in time index file {self.path.name} are not strictly increasing")
        if not all(map(operator.le, offsets, offsets[1:])):
            raise CorruptIndexError(f"offsets in time index file {self.path.name} decrease")
