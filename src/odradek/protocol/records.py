"""Kafka's RecordBatch v2 (magic 2): header view, validation, offset stamping, encoder and decoder.

Sans-IO: functions over ``bytes``/``bytearray``/``memoryview``; no files, no sockets, no clock
except :func:`build_batch` when it is not given a timestamp. Safe to call from any thread.

Layout of one batch (big-endian), byte positions from its start::

    0  baseOffset            int64     ┐ LOG_OVERHEAD (12 bytes): outside batchLength
    8  batchLength           int32     ┘ bytes after this field
    12 partitionLeaderEpoch  int32       outside the CRC: the broker stamps it
    16 magic                 int8        2
    17 crc                   uint32      CRC-32C of bytes 21 .. end of batch
    21 attributes            int16       bits 0-2 codec, 3 timestampType, 4 transactional,
                                         5 control, 6 hasDeleteHorizonMs
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records               (compressed as one block when the codec is not 0)

Each record: ``length`` varint, ``attributes`` int8, ``timestampDelta`` varlong, ``offsetDelta``
varint, ``keyLength`` varint (-1 = null), key, ``valueLength`` varint (-1 = null), value,
``headersCount`` varint, then per header ``keyLength`` varint, key (UTF-8), ``valueLength`` varint
(-1 = null), value. Varints are zigzag-encoded as in protobuf.

The hot path (:func:`validate_batches`, :func:`stamp_base_offset`, :func:`iter_batches`) reads
only the 61-byte headers and the CRC, never the records. Malformed input raises
:class:`~odradek.errors.CorruptRecordError` (torn, truncated, CRC mismatch, undecodable records)
or :class:`~odradek.errors.InvalidRecordError` (well-framed but invalid header); no ``IndexError``
or ``struct.error`` escapes.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.protocol.records_compression import codec_name, compress, decompress

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "BATCH_HEADER_SIZE",
    "BATCH_LENGTH_OFFSET",
    "COMPRESSION_CODEC_MASK",
    "CONTROL_FLAG_MASK",
    "CRC_OFFSET",
    "CREATE_TIME",
    "CURRENT_MAGIC",
    "DELETE_HORIZON_FLAG_MASK",
    "HEADER_STRUCT",
    "LAST_OFFSET_DELTA_OFFSET",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "BatchHeader",
    "DecodedRecord",
    "Record",
    "batch_crc",
    "build_batch",
    "check_header_fields",
    "decode_records",
    "iter_all_records",
    "iter_batches",
    "put_varint",
    "read_varint",
    "set_log_append_time",
    "stamp_base_offset",
    "timestamp_type_name",
    "valid_prefix_length",
    "validate_batches",
]

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
CURRENT_MAGIC = 2
NO_TIMESTAMP = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
"""The 61-byte batch header; ``unpack_from`` gives the fields in :class:`BatchHeader` order."""
_HEADER = HEADER_STRUCT
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
_MAX_CODEC = 4
_INT32_MAX = 2**31 - 1

Buffer = bytes | bytearray | memoryview


def timestamp_type_name(timestamp_type: int) -> str:
    """``CreateTime`` (0) or ``LogAppendTime`` (1), as Kafka prints them."""
    return "LogAppendTime" if timestamp_type == LOG_APPEND_TIME else "CreateTime"


class BatchHeader(NamedTuple):
    """The 61-byte header of one v2 record batch, with Kafka's field names.

    Immutable and tuple-based (no per-instance dict): parsing is one ``struct.unpack_from``.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: Buffer, pos: int = 0) -> BatchHeader:
        """Read the header at ``pos``. Raises CorruptRecordError when fewer than 61 bytes remain."""
        try:
            return tuple.__new__(cls, _HEADER.unpack_from(buf, pos))
        except struct.error as exc:
            raise CorruptRecordError(
                f"record batch header at position {pos} is truncated: need {BATCH_HEADER_SIZE} bytes, "
                f"{max(0, len(buf) - pos)} available"
            ) from exc

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        """Bytes the whole batch takes: ``batch_length + LOG_OVERHEAD``."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression_name(self) -> str:
        return codec_name(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 (CreateTime) or 1 (LogAppendTime)."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon_ms(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at int32 max, as Kafka); -1 without a producer id."""
        if self.base_sequence < 0:
            return -1
        last = self.base_sequence + self.last_offset_delta
        return last - _INT32_MAX - 1 if last > _INT32_MAX else last


def _as_view(buf: Buffer) -> memoryview:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def batch_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of the batch at ``pos`` of ``size`` bytes (from its attributes to its end)."""
    with memoryview(buf) as view:
        return crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])


def validate_batches(buf: Buffer, *, stored: bool = False) -> list[BatchHeader]:
    """Check every batch of a produce payload; return their headers in order.

    Checks, per batch: the header and the declared length fit exactly (no partial batch at the
    end), ``batchLength >= 49``, ``magic == 2``, the CRC-32C, a known codec, ``recordsCount >= 0``,
    ``lastOffsetDelta >= 0`` and, for a non-empty batch, ``lastOffsetDelta == recordsCount - 1``
    (``>=`` for ``stored`` batches: replication of cleaned segments). Records are never decoded.
    An empty payload gives ``[]``.

    Raises CorruptRecordError (truncated, bad length, CRC mismatch) or InvalidRecordError (magic,
    codec, counts), each naming the batch's byte position.
    """
    view = _as_view(buf)
    n = view.nbytes
    pos = 0
    out: list[BatchHeader] = []
    unpack = _HEADER.unpack_from
    new = tuple.__new__
    while pos < n:
        remaining = n - pos
        if remaining < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"truncated record batch at position {pos}: {remaining} bytes left, "
                f"less than the {BATCH_HEADER_SIZE}-byte batch header"
            )
        h: BatchHeader = new(BatchHeader, unpack(view, pos))
        length = h[1]
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at position {pos} has batchLength {length}, less than the minimum {MIN_BATCH_LENGTH}"
            )
        size = length + LOG_OVERHEAD
        if size > remaining:
            raise CorruptRecordError(
                f"record batch at position {pos} declares {size} bytes but only {remaining} remain"
            )
        if h[3] != CURRENT_MAGIC:
            raise InvalidRecordError(
                f"record batch at position {pos} has magic {h[3]}; only magic 2 (v2 batches) is supported"
            )
        computed = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
        if computed != h[4]:
            raise CorruptRecordError(
                f"CRC mismatch in record batch at position {pos}: stored {h[4]}, computed {computed}"
            )
        check_header_fields(h, pos, stored=stored)
        out.append(h)
        pos += size
    return out


def check_header_fields(h: BatchHeader, pos: int, *, stored: bool = False) -> None:
    """Raise InvalidRecordError for an unknown codec or inconsistent counts (``pos`` for the message).

    A producer's batch has ``lastOffsetDelta == recordsCount - 1``; a ``stored`` batch (in a log,
    or replicated from one) may hold fewer records than its offset span, as the log cleaner
    leaves them (``recordsCount <= lastOffsetDelta + 1``).
    """
    if h[5] & COMPRESSION_CODEC_MASK > _MAX_CODEC:
        raise InvalidRecordError(
            f"record batch at position {pos} uses unknown compression codec {h[5] & COMPRESSION_CODEC_MASK}"
        )
    count = h[12]
    delta = h[6]
    if count < 0:
        raise InvalidRecordError(f"record batch at position {pos} has a negative records count {count}")
    if delta < 0:
        raise InvalidRecordError(f"record batch at position {pos} has a negative lastOffsetDelta {delta}")
    if count > 0 and (delta < count - 1 if stored else delta != count - 1):
        raise InvalidRecordError(
            f"record batch at position {pos} has lastOffsetDelta {delta} inconsistent with {count} records"
        )


def stamp_base_offset(
    buf: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int | None = None
) -> None:
    """Overwrite the base offset (and the leader epoch) of the batch at ``pos`` in place.

    Both fields lie outside the CRC, so the batch stays valid.
    """
    _INT64.pack_into(buf, pos, base_offset)
    if partition_leader_epoch is not None:
        _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch at ``pos`` as LogAppendTime with ``maxTimestamp = timestamp_ms``; fix its CRC.

    Used only for topics with ``message.timestamp.type=LogAppendTime``.
    """
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    (length,) = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, batch_crc(buf, pos, length + LOG_OVERHEAD))


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch, without checking CRCs.

    Stops silently at a truncated tail (a partial header or a batch running past the end, as a
    fetch response may end) or at a header that cannot be a v2 batch (length < 49, magic != 2).
    """
    view = _as_view(buf)
    n = view.nbytes
    pos = 0
    unpack = _HEADER.unpack_from
    new = tuple.__new__
    while n - pos >= BATCH_HEADER_SIZE:
        h: BatchHeader = new(BatchHeader, unpack(view, pos))
        length = h[1]
        if length < MIN_BATCH_LENGTH or h[3] != CURRENT_MAGIC or pos + length + LOG_OVERHEAD > n:
            return
        yield pos, h
        pos += length + LOG_OVERHEAD


def valid_prefix_length(buf: Buffer) -> tuple[int, str | None]:
    """Byte length of the longest prefix made of whole, valid batches, and why the rest is not.

    Checks what :func:`validate_batches` checks (CRC included). Returns ``(len(buf), None)`` when
    everything is valid; otherwise the position where the first invalid batch starts and a reason.
    """
    view = _as_view(buf)
    n = view.nbytes
    pos = 0
    unpack = _HEADER.unpack_from
    new = tuple.__new__
    while pos < n:
        remaining = n - pos
        if remaining < BATCH_HEADER_SIZE:
            return pos, f"truncated batch header: {remaining} bytes left, need {BATCH_HEADER_SIZE}"
        h: BatchHeader = new(BatchHeader, unpack(view, pos))
        length = h[1]
        if length < MIN_BATCH_LENGTH:
            return pos, f"batchLength {length} is less than the minimum {MIN_BATCH_LENGTH}"
        size = length + LOG_OVERHEAD
        if size > remaining:
            return pos, f"batch declares {size} bytes but only {remaining} remain"
        if h[3] != CURRENT_MAGIC:
            return pos, f"magic {h[3]} (expected 2)"
        computed = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
        if computed != h[4]:
            return pos, f"CRC mismatch: stored {h[4]}, computed {computed}"
        try:
            check_header_fields(h, pos, stored=True)
        except InvalidRecordError as exc:
            return pos, str(exc)
        pos += size
    return n, None


# ---------------------------------------------------------------------------------------------
# Encoder and decoder (not on the broker's hot path)


@dataclass(slots=True)
class Record:
    """A record to encode. ``timestamp_ms`` None takes the batch's timestamp."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp_ms: int | None = None


@dataclass(slots=True)
class DecodedRecord:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0


def put_varint(out: bytearray, value: int) -> None:
    """Append ``value`` to ``out`` as a zigzag varint."""
    z = (value << 1) ^ (value >> 63)
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        put_varint(out, len(data))
        out += data


def _encode_record(out: bytearray, record: Record, timestamp_delta: int, offset_delta: int) -> None:
    body = bytearray(b"\x00")
    put_varint(body, timestamp_delta)
    put_varint(body, offset_delta)
    _put_bytes(body, record.key)
    _put_bytes(body, record.value)
    put_varint(body, len(record.headers))
    for name, value in record.headers:
        _put_bytes(body, name.encode("utf-8"))
        _put_bytes(body, value)
    put_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_ms: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = CREATE_TIME,
) -> bytes:
    """Encode ``records`` as one v2 batch, compressed with ``compression`` (0-4).

    Records without a timestamp get ``timestamp_ms`` (the current time when None). The base
    timestamp is the first record's, ``maxTimestamp`` the largest (``timestamp_ms`` itself for
    LogAppendTime). An empty ``records`` gives an empty batch (count 0, lastOffsetDelta 0).
    """
    items = list(records)
    now = timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000
    stamps = [r.timestamp_ms if r.timestamp_ms is not None else now for r in items]
    base_ts = stamps[0] if stamps else now
    max_ts = max(stamps) if stamps else now
    if timestamp_type == LOG_APPEND_TIME:
        max_ts = now
    body = bytearray()
    for i, record in enumerate(items):
        _encode_record(body, record, stamps[i] - base_ts, i)
    payload = compress(compression, body) if compression else bytes(body)
    attributes = (compression & COMPRESSION_CODEC_MASK) | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    out = bytearray(BATCH_HEADER_SIZE + len(payload))
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        BATCH_HEADER_SIZE + len(payload) - LOG_OVERHEAD,
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        max(len(items) - 1, 0),
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    )
    out[BATCH_HEADER_SIZE:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def read_varint(data: Buffer, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """The zigzag varint of at most ``max_bytes`` bytes at ``pos`` (before ``end``): ``(value,
    next position)``. Raises CorruptRecordError when it runs past ``end`` or is too long."""
    z = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the records")
        b = data[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def _read_bytes(data: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos, end, 5)
    if length == -1:
        return None, pos
    if length < 0 or pos + length > end:
        raise CorruptRecordError(f"invalid {what} length {length}")
    return bytes(data[pos : pos + length]), pos + length


def decode_records(batch: Buffer, *, verify_crc: bool = True) -> list[DecodedRecord]:
    """Decode the records of the batch at the start of ``batch`` (bytes after it are ignored).

    Decompresses gzip/snappy (xerial or raw)/lz4/zstd. Record timestamps are the batch's
    ``maxTimestamp`` for LogAppendTime batches. Raises CorruptRecordError for a truncated batch,
    a CRC mismatch (when ``verify_crc``), undecodable compressed data or malformed records, and
    InvalidRecordError for a magic other than 2 or an unknown codec.
    """
    view = _as_view(batch)
    h = BatchHeader.parse(view, 0)
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batchLength {h.batch_length} is less than the minimum {MIN_BATCH_LENGTH}")
    size = h.batch_length + LOG_OVERHEAD
    if size > view.nbytes:
        raise CorruptRecordError(f"record batch declares {size} bytes but only {view.nbytes} are available")
    if h.magic != CURRENT_MAGIC:
        raise InvalidRecordError(f"record batch has magic {h.magic}; only magic 2 is supported")
    if verify_crc:
        computed = crc32c(view[ATTRIBUTES_OFFSET:size])
        if computed != h.crc:
            raise CorruptRecordError(f"CRC mismatch in record batch: stored {h.crc}, computed {computed}")
    codec = h.attributes & COMPRESSION_CODEC_MASK
    if codec > _MAX_CODEC:
        raise InvalidRecordError(f"record batch uses unknown compression codec {codec}")
    records = view[RECORDS_OFFSET:size]
    data = memoryview(decompress(codec, records)) if codec else records
    return _decode_body(h, data)


def _decode_body(h: BatchHeader, data: memoryview) -> list[DecodedRecord]:
    end = data.nbytes
    pos = 0
    log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    out: list[DecodedRecord] = []
    if h.records_count < 0:
        raise InvalidRecordError(f"negative records count {h.records_count}")
    for index in range(h.records_count):
        length, pos = read_varint(data, pos, end, 5)
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"record {index} declares length {length} beyond the batch")
        record_end = pos + length
        if pos >= record_end:
            raise CorruptRecordError(f"record {index} is empty")
        attributes = data[pos]
        pos += 1
        ts_delta, pos = read_varint(data, pos, record_end, 10)
        offset_delta, pos = read_varint(data, pos, record_end, 5)
        key, pos = _read_bytes(data, pos, record_end, "key")
        value, pos = _read_bytes(data, pos, record_end, "value")
        n_headers, pos = read_varint(data, pos, record_end, 5)
        if n_headers < 0 or n_headers > record_end - pos:
            raise CorruptRecordError(f"record {index} has an invalid header count {n_headers}")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(n_headers):
            raw_name, pos = _read_bytes(data, pos, record_end, "header key")
            if raw_name is None:
                raise CorruptRecordError(f"record {index} has a null header key")
            try:
                name = raw_name.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptRecordError(f"record {index} has a header key that is not UTF-8") from exc
            header_value, pos = _read_bytes(data, pos, record_end, "header value")
            headers.append((name, header_value))
        if pos != record_end:
            raise CorruptRecordError(
                f"record {index} declares {length} bytes but its fields end {record_end - pos} bytes early"
            )
        timestamp = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(DecodedRecord(h.base_offset + offset_delta, timestamp, key, value, headers, attributes))
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last of {h.records_count} records")
    return out


def iter_all_records(buf: Buffer, *, verify_crc: bool = True) -> Iterator[DecodedRecord]:
    """Decode the records of every complete batch in ``buf`` (a truncated tail is ignored)."""
    view = _as_view(buf)
    for pos, h in iter_batches(view):
        yield from decode_records(view[pos : pos + h.batch_length + LOG_OVERHEAD], verify_crc=verify_crc)
