"""Preparing an append: check a produce payload's batches and assign their offsets, without copying.

A payload is one or more v2 record batches back to back (``records`` of a Produce partition).
Preparing it yields a :class:`PreparedAppend`: the chunks to hand to ``pwritev`` in order, and the
bookkeeping the segment and the caller need. For each batch the chunks are a 16-byte prefix and a
view of the rest of the batch in the caller's buffer::

    prefix   baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32   (new, 16 bytes)
    view     records[pos + 16 : pos + LOG_OVERHEAD + batchLength]               (as received)

Both rewritten fields lie outside the batch CRC (it covers ``attributes`` onwards), so the batch
stays valid and the producer's bytes are written as they arrived: no copy of the payload in
Python. A topic with ``message.timestamp.type=LogAppendTime`` is the exception: its batches'
``maxTimestamp`` and attributes change, so each batch is copied once and its CRC recomputed.

The caller must keep ``records`` unchanged until the chunks are written (they are views of it).
Pure functions: no I/O, no state; any thread may call them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from odradek.errors import InvalidRecordError, RecordTooLargeError
from odradek.protocol.records import (
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    set_log_append_time,
    stamp_base_offset,
    validate_batches,
)
from odradek.storage.config import LogConfig
from odradek.storage.log_validator import validate_records
from odradek.storage.segment import BatchMeta
from odradek.storage.topic_partition import TopicPartition

__all__ = ["PreparedAppend", "check_follower_batches", "check_leader_batches", "prepare_leader_append"]

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class PreparedAppend:
    """What one append writes (``chunks``, ``size`` bytes in all) and what it appends.

    ``metas`` holds ``(position in the payload, last offset, max timestamp, size)`` per batch, as
    :meth:`odradek.storage.segment.LogSegment.commit_append` indexes them; ``headers`` the
    batches' headers as checked, in the same order (their base offsets as received: a leader's
    offsets are in ``metas``). ``log_append_time`` is the broker time stamped into the batches,
    or -1.
    """

    chunks: list[Buffer]
    size: int
    metas: list[BatchMeta]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    records_count: int
    headers: Sequence[BatchHeader] = ()


def check_leader_batches(
    records: Buffer,
    config: LogConfig,
    origin: Literal["client", "coordinator"],
    now_ms: Callable[[], int],
    tp: TopicPartition,
) -> list[BatchHeader]:
    """Validate a payload produced to a leader; return its batch headers (empty payload: []).

    Per batch: header and CRC valid (CorruptRecordError/InvalidRecordError from
    ``validate_batches``), at most ``max.message.bytes`` (RecordTooLargeError), at least one
    record, and no control batch from a client (InvalidRecordError). A client's records are then
    checked by :func:`odradek.storage.log_validator.validate_records` (keys on compacted topics,
    timestamps; RecordValidationError), which decodes them only when a rule of ``config`` can
    fail. The coordinators' own batches skip that step.
    """
    max_message_bytes = config.max_message_bytes
    headers = validate_batches(records)
    pos = 0
    for h in headers:
        size = h.batch_length + LOG_OVERHEAD
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {size} bytes at position {pos} is larger than max.message.bytes={max_message_bytes}"
            )
        if h.records_count == 0:
            raise InvalidRecordError(f"record batch at position {pos} has no records")
        if h.attributes & CONTROL_FLAG_MASK and origin == "client":
            raise InvalidRecordError(f"clients may not write control batches (position {pos})")
        pos += size
    if origin == "client":
        validate_records(records, headers, config, now_ms, tp)
    return headers


def prepare_leader_append(
    records: Buffer,
    headers: Sequence[BatchHeader],
    base_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> PreparedAppend:
    """Assign offsets from ``base_offset`` to the checked batches ``headers`` of ``records``.

    ``log_append_time_ms`` (LogAppendTime topics) also stamps that time into every batch.
    ``headers`` must not be empty.
    """
    view = memoryview(records).cast("B")
    chunks: list[Buffer] = []
    metas: list[BatchMeta] = []
    offset = base_offset
    max_ts, offset_of_max, count, pos = -1, -1, 0, 0
    for h in headers:
        size = h.batch_length + LOG_OVERHEAD
        last = offset + h.last_offset_delta
        if log_append_time_ms is None:
            chunks.append(_PREFIX.pack(offset, h.batch_length, leader_epoch))
            chunks.append(view[pos + _PREFIX.size : pos + size])
            ts = h.max_timestamp
        else:
            copy = bytearray(view[pos : pos + size])
            stamp_base_offset(copy, 0, offset, leader_epoch)
            set_log_append_time(copy, 0, log_append_time_ms)
            chunks.append(copy)
            ts = log_append_time_ms
        if ts > max_ts:
            max_ts, offset_of_max = ts, last
        metas.append((pos, last, ts, size))
        count += h.records_count
        offset = last + 1
        pos += size
    return PreparedAppend(
        chunks=chunks,
        size=pos,
        metas=metas,
        first_offset=base_offset,
        last_offset=offset - 1,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        log_append_time=-1 if log_append_time_ms is None else log_append_time_ms,
        records_count=count,
        headers=headers,
    )


def check_follower_batches(
    records: Buffer, log_end_offset: int, max_message_bytes: int, tp: TopicPartition
) -> PreparedAppend | None:
    """Validate batches that already carry their offsets (replication); None for an empty payload.

    The first base offset must be >= ``log_end_offset`` and offsets must increase from batch to
    batch (InvalidRecordError otherwise); headers, CRCs and sizes are checked as for a leader.
    The payload is written as given (one chunk).
    """
    headers = validate_batches(records, stored=True)
    if not headers:
        return None
    expected = log_end_offset
    metas: list[BatchMeta] = []
    max_ts, offset_of_max, count, pos = -1, -1, 0, 0
    for h in headers:
        size = h.batch_length + LOG_OVERHEAD
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {size} bytes at position {pos} is larger than max.message.bytes={max_message_bytes}"
            )
        if h.base_offset < expected:
            raise InvalidRecordError(
                f"out of order offsets appending to {tp}: batch at position {pos} starts at "
                f"{h.base_offset}, expected at least {expected}"
            )
        last = h.base_offset + h.last_offset_delta
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, last
        metas.append((pos, last, h.max_timestamp, size))
        count += h.records_count
        expected = last + 1
        pos += size
    first_offset = headers[0].base_offset
    if expected - 1 - first_offset > _INT32_MAX:
        raise InvalidRecordError(f"offsets {first_offset}..{expected - 1} span more than one segment can hold")
    return PreparedAppend(
        chunks=[records],
        size=pos,
        metas=metas,
        first_offset=first_offset,
        last_offset=expected - 1,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        log_append_time=-1,
        records_count=count,
        headers=headers,
    )
