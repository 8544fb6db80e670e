"""Per-record checks of a produced payload (Kafka's ``LogValidator.validateRecord``, KIP-467).

A record breaks a rule when:

- the topic is compacted (``cleanup.policy`` includes ``compact``) and the record has no key:
  INVALID_RECORD, ``Compacted topic cannot accept message without key in topic partition <tp>.``;
- the topic uses CreateTime, the record's timestamp is not -1 (no timestamp), and it lies more than
  ``message.timestamp.before.max.ms`` before or ``message.timestamp.after.max.ms`` after the
  broker's clock (each falls back to the deprecated ``message.timestamp.difference.max.ms`` while
  at its default): INVALID_TIMESTAMP, ``Timestamp <ts> of message with offset <offset> is out of
  range. The timestamp should be within [<now - before>, <now + after>]``;
- otherwise, the producer marked the batch LogAppendTime (a LogAppendTime topic, or a CreateTime
  topic with a batch ``maxTimestamp`` of -1): INVALID_TIMESTAMP, ``Invalid timestamp type in
  message DefaultRecord(...). Producer should not set timestamp type to LogAppendTime.``

Every record of a batch is checked; if any fails the whole payload is refused with
:class:`~odradek.errors.RecordValidationError` (INVALID_TIMESTAMP when any error is a timestamp
error, else INVALID_RECORD, with Kafka's message) carrying ``(batch_index, message)`` per rejected
record, and nothing is appended. Arithmetic on timestamps wraps at 64 bits, as Java's does, so
the bounds printed with the default limits are Kafka's too.

Records are decoded only when a rule can fail: compacted topics, finite timestamp limits, or a
batch the producer marked LogAppendTime. Otherwise only the batch headers already parsed are
looked at, so the hot path of an ordinary topic never touches the records. Compressed records are
decompressed into a buffer of at most ``MAX_EXPANSION`` x ``max.message.bytes`` bytes (beyond it:
MESSAGE_TOO_LARGE), so a small compressed batch cannot make the broker allocate without bound.
Malformed records raise CorruptRecordError. Pure functions: any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from odradek.errors import CorruptRecordError, ErrorCode, RecordValidationError
from odradek.protocol.records import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Buffer,
    read_varint,
)
from odradek.protocol.records_compression import decompress_bounded
from odradek.storage.config import LONG_MAX, LogConfig
from odradek.storage.topic_partition import TopicPartition

__all__ = ["MAX_EXPANSION", "validate_records"]

MAX_EXPANSION = 32
"""The records of one compressed batch may decompress to at most this many times
``max.message.bytes`` (32 MiB at the default)."""

_M64 = (1 << 64) - 1


def _i64(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer (Java ``long`` arithmetic)."""
    value &= _M64
    return value - (1 << 64) if value >> 63 else value


def validate_records(
    records: Buffer,
    headers: Sequence[BatchHeader],
    config: LogConfig,
    now_ms: Callable[[], int],
    tp: TopicPartition,
) -> None:
    """Check every record of the checked batches ``headers`` of ``records`` against ``config``.

    ``now_ms`` is called once, and only when a timestamp has to be checked. Raises
    RecordValidationError for the first batch with rejected records (nothing appended),
    CorruptRecordError for records that do not decode, RecordTooLargeError for compressed
    records beyond the decompression bound. An empty ``headers`` checks nothing.
    """
    compacted = config.compacted
    log_append = config.message_timestamp_type == "LogAppendTime"
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    check_range = not log_append and (before != LONG_MAX or after != LONG_MAX)
    view = memoryview(records).cast("B")
    pos = 0
    now: int | None = None
    for h in headers:
        size = h.batch_length + LOG_OVERHEAD
        marked_append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
        if compacted or check_range or (marked_append_time and (log_append or h.max_timestamp == NO_TIMESTAMP)):
            if now is None:
                now = now_ms()
            limit = MAX_EXPANSION * max(config.max_message_bytes, size)
            _check_batch(view[pos : pos + size], h, tp, compacted, log_append, before, after, now, limit)
        pos += size


def _check_batch(
    batch: memoryview,
    h: BatchHeader,
    tp: TopicPartition,
    compacted: bool,
    log_append: bool,
    before: int,
    after: int,
    now: int,
    limit: int,
) -> None:
    codec = h.attributes & COMPRESSION_CODEC_MASK
    body = batch[RECORDS_OFFSET:]
    data = decompress_bounded(codec, body, limit) if codec else body
    marked_append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    errors: list[tuple[int, str | None]] = []
    any_timestamp_error = False
    for index, offset_delta, timestamp_delta, key_size, value_size in _scan(data, h.records_count):
        offset = _i64(h.base_offset + offset_delta)
        timestamp = h.max_timestamp if marked_append_time else _i64(h.base_timestamp + timestamp_delta)
        if compacted and key_size < 0:
            errors.append((index, f"Compacted topic cannot accept message without key in topic partition {tp}."))
        elif not log_append and timestamp != NO_TIMESTAMP:
            difference = _i64(now - timestamp)
            if difference > before or _i64(-difference) > after:
                any_timestamp_error = True
                errors.append(
                    (
                        index,
                        f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp "
                        f"should be within [{_i64(now - before)}, {_i64(now + after)}]",
                    )
                )
        elif marked_append_time:
            any_timestamp_error = True
            record = (
                f"DefaultRecord(offset={offset}, timestamp={timestamp}, key={max(key_size, 0)} bytes, "
                f"value={max(value_size, 0)} bytes)"
            )
            errors.append(
                (
                    index,
                    f"Invalid timestamp type in message {record}. Producer should not set timestamp type to "
                    "LogAppendTime.",
                )
            )
    if not errors:
        return
    if any_timestamp_error:
        raise RecordValidationError(
            "One or more records have been rejected due to invalid timestamp", ErrorCode.invalid_timestamp, errors
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        ErrorCode.invalid_record,
        errors,
    )


def _skip(data: memoryview, pos: int, end: int, what: str, index: int) -> tuple[int, int]:
    """Skip a varint-length-prefixed field: (its length, -1 for null; position after it)."""
    size, pos = read_varint(data, pos, end, 5)
    if size < -1 or pos + max(size, 0) > end:
        raise CorruptRecordError(f"record {index} has an invalid {what} length {size}")
    return size, pos + max(size, 0)


def _scan(data: memoryview, count: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Yield ``(index, offset_delta, timestamp_delta, key_size, value_size)`` per record (sizes -1
    for null), reading lengths only: keys, values and headers are skipped, never copied.

    Raises CorruptRecordError when the records do not fill the data exactly as ``count`` says.
    """
    end = data.nbytes
    pos = 0
    for index in range(count):
        length, pos = read_varint(data, pos, end, 5)
        record_end = pos + length
        if length <= 0 or record_end > end:
            raise CorruptRecordError(f"record {index} declares length {length} beyond the batch")
        pos += 1  # attributes
        timestamp_delta, pos = read_varint(data, pos, record_end, 10)
        offset_delta, pos = read_varint(data, pos, record_end, 5)
        key_size, pos = _skip(data, pos, record_end, "key", index)
        value_size, pos = _skip(data, pos, record_end, "value", index)
        headers, pos = read_varint(data, pos, record_end, 5)
        if headers < 0 or headers > record_end - pos:
            raise CorruptRecordError(f"record {index} has an invalid header count {headers}")
        for _ in range(headers):
            name_size, pos = _skip(data, pos, record_end, "header key", index)
            if name_size < 0:
                raise CorruptRecordError(f"record {index} has a null header key")
            _value, pos = _skip(data, pos, record_end, "header value", index)
        if pos != record_end:
            raise CorruptRecordError(
                f"record {index} declares {length} bytes but its fields end {record_end - pos} bytes early"
            )
        yield index, offset_delta, timestamp_delta, key_size, value_size
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last of {count} records")
