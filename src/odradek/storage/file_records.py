"""The ``.log`` file of a segment (Kafka's ``FileRecords``): record batches back to back.

Owns one file descriptor and the file's logical size (:attr:`FileRecords.size`: what readers may
see). An append is two steps: :meth:`FileRecords.write_at` puts the bytes at the logical end with
``pwritev`` (cut back if it fails), then :meth:`FileRecords.commit_append` moves the logical size
over them. Reads are ``pread``. Batch headers are scanned
without decoding records (:meth:`FileRecords.scan_batches`); :meth:`FileRecords.checked_batches`
adds the CRC-32C check used by recovery.

Threading: every method runs on the broker's event-loop thread, through ``LogSegment``, except
:meth:`FileRecords.write_at`, which an I/O thread may run while the loop goes on (one write at a
time per file; the log serializes its appends). It holds the file's I/O lock, which
``truncate_to``, ``close`` and ``delete`` also take, so the descriptor cannot be closed or the
file cut under a write. Bytes written but not committed are invisible to readers; a commit that
finds the file changed meanwhile (truncated or closed) cuts them off and fails, and ``close``
trims them too, so they never outlive the append that wrote them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from crc32c import crc32c

from odradek.errors import InvalidRecordError, KafkaStorageError
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CURRENT_MAGIC,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    check_header_fields,
)

__all__ = ["CheckedBatches", "FileRecords"]

_SCAN_BLOCK = 16 * 1024
_CHECK_CHUNK = 8 * 1024 * 1024
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024)


class FileRecords:
    """An append-only file of v2 batches. ``create=True`` starts it empty (replacing any file)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        self.path = Path(path)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC if create else os.O_RDWR
        self._fd = os.open(self.path, flags, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._io_lock = threading.Lock()

    @property
    def size(self) -> int:
        return self._size

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def last_modified_ms(self) -> int:
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    def _check_open(self) -> None:
        if self._fd < 0:
            raise KafkaStorageError(f"log file {self.path} is closed")

    def write_at(self, chunks: Sequence[bytes | bytearray | memoryview], position: int) -> int:
        """Write ``chunks`` back to back at ``position`` (the logical end); return the byte count.

        Any thread. Nothing becomes visible until :meth:`commit_append`. Raises KafkaStorageError
        when the file is closed or on I/O failure (after cutting the file back to ``position``).
        """
        with self._io_lock:
            self._check_open()
            views = [memoryview(c).cast("B") for c in chunks]
            total = sum(v.nbytes for v in views)
            try:
                _pwritev_all(self._fd, views, position)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, position)
                except OSError:
                    pass
                raise KafkaStorageError(f"error appending to {self.path}: {exc}") from exc
            return total

    def commit_append(self, position: int, size: int) -> None:
        """Make ``size`` bytes written at ``position`` by :meth:`write_at` part of the file.

        Raises KafkaStorageError, and cuts the written bytes off, when the file was closed or its
        logical end moved (truncated) since the write started.
        """
        if self._size != position or self._fd < 0:
            with self._io_lock:
                if self._fd >= 0:
                    try:
                        os.ftruncate(self._fd, self._size)
                    except OSError:
                        pass
            raise KafkaStorageError(
                f"{self.path} was {'closed' if self._fd < 0 else 'truncated'} while {size} bytes were appended "
                f"at position {position}; the append is discarded"
            )
        self._size = position + size

    def read_at(self, position: int, size: int) -> bytes:
        """``size`` bytes at ``position`` (fewer at the end of the file)."""
        self._check_open()
        try:
            data = os.pread(self._fd, size, position)
            if len(data) < size and position + len(data) < self._size:
                parts = [data]
                got = len(data)
                while got < size:
                    more = os.pread(self._fd, size - got, position + got)
                    if not more:
                        break
                    parts.append(more)
                    got += len(more)
                data = b"".join(parts)
            return data
        except OSError as exc:
            raise KafkaStorageError(f"error reading {self.path}: {exc}") from exc

    def scan_batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of the whole batches in ``[start, end)`` (default: to the end).

        Reads headers only, in 16 KiB blocks (or one header at a time after large batches). Stops
        without error at a truncated or invalid header; no CRC check.
        """
        self._check_open()
        limit = self._size if end is None else min(end, self._size)
        fd = self._fd
        pos = start
        buf = b""
        buf_start = 0
        read_size = _SCAN_BLOCK
        new = tuple.__new__
        unpack = HEADER_STRUCT.unpack_from
        while limit - pos >= BATCH_HEADER_SIZE:
            off = pos - buf_start
            if off < 0 or off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(read_size, limit - pos), pos)
                buf_start = pos
                off = 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            h: BatchHeader = new(BatchHeader, unpack(buf, off))
            size = h[1] + LOG_OVERHEAD
            if h[1] < MIN_BATCH_LENGTH or h[3] != CURRENT_MAGIC or pos + size > limit:
                return
            yield pos, h
            pos += size
            read_size = BATCH_HEADER_SIZE if size > _SCAN_BLOCK else _SCAN_BLOCK

    def read_header_at(self, position: int) -> BatchHeader | None:
        """The batch header at ``position``, or None when there is no plausible one."""
        for pos, h in self.scan_batches(position):
            return h if pos == position else None
        return None

    def checked_batches(self) -> CheckedBatches:
        """Iterate the batches from the start, CRC-checked, until the first invalid one."""
        self._check_open()
        return CheckedBatches(self._fd, os.fstat(self._fd).st_size)

    def truncate_to(self, position: int) -> int:
        """Cut the file at ``position``; return the bytes removed. Waits for a write in progress."""
        with self._io_lock:
            self._check_open()
            removed = os.fstat(self._fd).st_size - position
            try:
                os.ftruncate(self._fd, position)
            except OSError as exc:
                raise KafkaStorageError(f"error truncating {self.path}: {exc}") from exc
            self._size = position
            return max(removed, 0)

    def flush(self) -> None:
        self._check_open()
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise KafkaStorageError(f"error flushing {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the file, first cutting off bytes written but never committed. Waits for a write."""
        with self._io_lock:
            if self._fd < 0:
                return
            try:
                if os.fstat(self._fd).st_size > self._size:
                    os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def _pwritev_all(fd: int, views: list[memoryview], position: int) -> None:
    """``pwritev`` every byte of ``views`` at ``position``, in groups of at most IOV_MAX buffers."""
    pending = [v for v in views if v.nbytes]
    while pending:
        group = pending[:_IOV_MAX]
        written = os.pwritev(fd, group, position)
        if written <= 0:
            raise OSError(f"pwritev wrote nothing at position {position}")
        position += written
        done = 0
        while done < len(group) and written >= group[done].nbytes:
            written -= group[done].nbytes
            done += 1
        pending = pending[done:]
        if written:
            pending[0] = pending[0][written:]


class CheckedBatches:
    """CRC-checked iteration over a log file, reading in 8 MiB chunks.

    Yields ``(position, header)`` for each valid batch; when it stops, :attr:`valid_bytes` is the
    length of the valid prefix and :attr:`reason` says why the rest is invalid (None if it is not).
    """

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self._size = size
        self.valid_bytes = 0
        self.reason: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        size = self._size
        chunk = b""
        chunk_start = 0
        pos = 0
        while pos < size:
            remaining = size - pos
            self.valid_bytes = pos
            if remaining < BATCH_HEADER_SIZE:
                self.reason = f"truncated batch header ({remaining} bytes)"
                return
            off = pos - chunk_start
            if off + BATCH_HEADER_SIZE > len(chunk):
                chunk = os.pread(self._fd, min(_CHECK_CHUNK, remaining), pos)
                chunk_start, off = pos, 0
            h = BatchHeader.parse(chunk, off)
            length = h.batch_length
            bsize = length + LOG_OVERHEAD
            if length < MIN_BATCH_LENGTH:
                self.reason = f"batchLength {length} is less than the minimum {MIN_BATCH_LENGTH}"
                return
            if bsize > remaining:
                self.reason = f"batch declares {bsize} bytes but only {remaining} remain"
                return
            if h.magic != CURRENT_MAGIC:
                self.reason = f"magic {h.magic} (expected 2)"
                return
            if off + bsize > len(chunk):
                chunk = os.pread(self._fd, max(min(_CHECK_CHUNK, remaining), bsize), pos)
                chunk_start, off = pos, 0
            with memoryview(chunk) as view:
                computed = crc32c(view[off + ATTRIBUTES_OFFSET : off + bsize])
            if computed != h.crc:
                self.reason = f"CRC mismatch: stored {h.crc}, computed {computed}"
                return
            try:
                check_header_fields(h, pos, stored=True)
            except InvalidRecordError as exc:
                self.reason = str(exc)
                return
            yield pos, h
            pos += bsize
        self.valid_bytes = pos
