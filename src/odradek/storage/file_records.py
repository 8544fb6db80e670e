"""The ``.log`` file of a segment (Kafka's ``FileRecords``): record batches back to back.

Owns one file descriptor and the file's logical size. Appends are a single ``pwrite`` at the known
end (cut back to the previous size if it fails); reads are ``pread``. Batch headers are scanned
without decoding records (:meth:`FileRecords.scan_batches`); :meth:`FileRecords.checked_batches`
adds the CRC-32C check used by recovery.

Not thread-safe: used from the broker's event-loop thread, through ``LogSegment``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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


class FileRecords:
    """An append-only file of v2 batches. ``create=True`` starts it empty (replacing any file)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        self.path = Path(path)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC if create else os.O_RDWR
        self._fd = os.open(self.path, flags, 0o644)
        self._size = os.fstat(self._fd).st_size

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

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at the end; return the position it was written at.

        Raises KafkaStorageError on I/O failure, after cutting the file back to its previous size.
        """
        self._check_open()
        position = self._size
        with memoryview(data) as view:
            total = view.nbytes
            written = 0
            try:
                while written < total:
                    written += os.pwrite(self._fd, view[written:], position + written)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, position)
                except OSError:
                    pass
                raise KafkaStorageError(f"error appending to {self.path}: {exc}") from exc
        self._size = position + total
        return position

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
        """Cut the file at ``position``; return the bytes removed."""
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
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


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
                check_header_fields(h, pos)
            except InvalidRecordError as exc:
                self.reason = str(exc)
                return
            yield pos, h
            pos += bsize
        self.valid_bytes = pos
