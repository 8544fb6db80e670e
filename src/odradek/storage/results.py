"""Results of log operations: :class:`LogAppendInfo`, :class:`FetchDataInfo`, :class:`FileSlice`.

Plain data; built and consumed on the broker's event-loop thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["FetchDataInfo", "FileSlice", "LogAppendInfo"]


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did (Kafka's ``LogAppendInfo``).

    ``first_offset``/``last_offset`` are the offsets given to the first and last records;
    ``max_timestamp`` is the largest batch ``maxTimestamp`` and ``offset_of_max_timestamp`` the last
    offset of the batch that has it; ``log_append_time`` is the broker time stamped into the batches
    for ``message.timestamp.type=LogAppendTime`` topics, else -1. An empty payload gives
    ``first_offset = last_offset = -1`` and ``records_count = valid_bytes = 0``.

    What the partition log decided about the batches: ``duplicate`` when the payload was an
    idempotent producer's retry of a batch already in the log (nothing was appended; the offsets
    are the original append's, the other fields -1 or 0, as Kafka answers a duplicate);
    ``transactional`` / ``control`` when at least one appended batch is transactional / a
    control batch (a transaction marker).
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    records_count: int
    valid_bytes: int
    duplicate: bool = False
    transactional: bool = False
    control: bool = False


class _SliceSource(Protocol):
    def read_at(self, position: int, size: int) -> bytes: ...


@dataclass(slots=True)
class FileSlice:
    """A byte range of one segment's ``.log`` file, ready for ``os.sendfile``/``loop.sendfile``.

    ``fd`` belongs to the segment: it is valid until that segment is closed or deleted (retention,
    truncation, ``Log.close``/``delete``), which only happens on the event-loop thread through the
    ``Log``. A caller that sends the range after yielding to the loop should ``dup_fd()`` first:
    a duplicated descriptor keeps the file readable even after it is deleted.
    """

    path: str
    fd: int
    position: int
    size: int
    _source: _SliceSource = field(repr=False)

    def read_bytes(self) -> bytes:
        """The range's bytes (one ``pread``). Raises KafkaStorageError if the segment was closed."""
        return self._source.read_at(self.position, self.size)

    def dup_fd(self) -> int:
        """A new descriptor on the same file; the caller closes it."""
        return os.dup(self.fd)


@dataclass(slots=True)
class FetchDataInfo:
    """The result of ``Log.read``: whole stored batches starting with the one holding ``fetch_offset``.

    ``file_slice`` is None and ``records_bytes()`` is ``b""`` when there is nothing to return;
    ``first_batch_offset`` is then None, else the base offset of the first batch returned (it can
    be below ``fetch_offset``: a batch is never split).
    """

    fetch_offset: int
    first_batch_offset: int | None = None
    file_slice: FileSlice | None = None
    _bytes: bytes | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return self.file_slice.size if self.file_slice is not None else 0

    @property
    def is_empty(self) -> bool:
        return self.file_slice is None or self.file_slice.size == 0

    def records_bytes(self) -> bytes:
        """The batches as bytes (read once, then cached)."""
        if self._bytes is None:
            self._bytes = self.file_slice.read_bytes() if self.file_slice is not None else b""
        return self._bytes

    @property
    def records(self) -> bytes:
        """Alias of :meth:`records_bytes`."""
        return self.records_bytes()
