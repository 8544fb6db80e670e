"""Record rules of a clean, per batch (Kafka's ``LogCleaner.cleanInto`` filter over
``MemoryRecords.filterTo``, and ``CleanedTransactionMetadata``).

For each stored v2 batch of a segment being cleaned:

* **Batch retention.** A data batch of an aborted transaction is discarded (its ``.txnindex``
  entry says so, see :class:`CleanedTransactionMetadata`). A control batch (transaction marker)
  is discardable once no batch of its transaction is left in the log; it is then stamped with a
  delete horizon, and removed by a clean that runs after the horizon. The batch holding the last
  offset of an active producer (``retain_offsets``) is kept even when all its records go, as an
  empty batch (Kafka's ``RETAIN_EMPTY``), so the producer's sequence and epoch survive.
* **Record retention** (data batches): a record is kept when its offset is past the map's latest
  offset (not covered by this clean), or when it is the latest record of its key (keys compared
  byte for byte) and it has a value or is a tombstone whose batch has no delete horizon yet or a
  horizon still in the future. Records without a key are dropped (compacted topics refuse them).
* **Rewriting.** A batch whose records all stay and that needs no horizon is copied as its bytes.
  Otherwise it is re-encoded with the same base offset, last offset delta, producer fields,
  leader epoch, attributes and codec (recompressed with :func:`compress`): records keep their
  offsets (their bytes are reused; only the timestamp delta is rewritten when the base timestamp
  changes) and the max timestamp is recomputed. KIP-534: a batch that keeps a tombstone, or a
  marker of an emptied transaction, gets attribute bit 0x40 and ``delete horizon = now +
  delete.retention.ms`` in its base timestamp field, record timestamps then being deltas from it.

Record layout parsed here: ``length`` varint, ``attributes`` int8, ``timestampDelta`` varlong,
``offsetDelta`` varint, ``keyLength`` varint, key, ``valueLength`` varint, value, headers.

Pure functions over bytes, safe in any thread or process; used by :mod:`.segment_cleaner`.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from crc32c import crc32c

from odradek.errors import CorruptRecordError
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    CURRENT_MAGIC,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    put_varint,
    read_varint,
)
from odradek.protocol.records_compression import compress, decompress
from odradek.storage.cleaner.offset_map import ENTRY_COST_BYTES, OffsetMap
from odradek.storage.txn_index import AbortedTxn

__all__ = [
    "ABORT",
    "COMMIT",
    "BatchOutcome",
    "CleanedTransactionMetadata",
    "build_empty_batch",
    "control_type_of",
    "filter_batch",
    "map_batch_keys",
    "records_of",
]

ABORT, COMMIT = 0, 1
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A varint of up to 10 bytes at ``pos`` (the slow path of the inlined one-byte case)."""
    return read_varint(data, pos, len(data), 10)


def records_of(batch: bytes | memoryview, h: BatchHeader) -> bytes:
    """The (decompressed) records area of one stored batch."""
    body = batch[BATCH_HEADER_SIZE : h.batch_length + LOG_OVERHEAD]
    codec = h.attributes & COMPRESSION_CODEC_MASK
    return decompress(codec, body) if codec else bytes(body)


def control_type_of(batch: bytes | memoryview, h: BatchHeader) -> int:
    """The marker type of a control batch (ABORT 0, COMMIT 1, others as stored; -1 unreadable)."""
    if h.records_count < 1:
        return -1
    data = records_of(batch, h)
    try:
        _, p = _varint(data, 0)
        p += 1
        _, p = _varint(data, p)
        _, p = _varint(data, p)
        klen, p = _varint(data, p)
    except CorruptRecordError:
        return -1
    if klen < _CONTROL_KEY.size or p + klen > len(data):
        return -1
    return int(_CONTROL_KEY.unpack_from(data, p)[1])


@dataclass(slots=True)
class _AbortedMeta:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


@dataclass
class CleanedTransactionMetadata:
    """Transactions met while reading a range of the log in offset order (Kafka's
    ``CleanedTransactionMetadata``). ``aborted`` are the ``.txnindex`` entries of the range;
    :attr:`cleaned_index` collects the entries the cleaned segment's ``.txnindex`` keeps."""

    aborted: list[AbortedTxn]
    cleaned_index: list[AbortedTxn] = field(default_factory=list)
    _pending: deque[AbortedTxn] = field(init=False)
    _ongoing_committed: set[int] = field(default_factory=set)
    _ongoing_aborted: dict[int, _AbortedMeta] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._pending = deque(sorted(self.aborted, key=lambda t: t.first_offset))
        self._known: set[AbortedTxn] = set(self.aborted)

    def add_aborted(self, txns: list[AbortedTxn]) -> None:
        """More ``.txnindex`` entries (the next group of a clean: one metadata spans the groups, so
        a marker in one group knows the batches of its transaction seen in an earlier one)."""
        merged = [t for t in txns if t not in self._known]
        self._known.update(merged)
        if merged:
            self._pending = deque(sorted([*self._pending, *merged], key=lambda t: t.first_offset))

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._ongoing_aborted[txn.producer_id] = _AbortedMeta(txn)

    def on_control_batch_read(self, h: BatchHeader, control_type: int) -> bool:
        """Whether the marker can be discarded (no batch of its transaction seen in this pass)."""
        self._consume_up_to(h.base_offset + h.last_offset_delta)
        pid = h.producer_id
        if control_type == ABORT:
            meta = self._ongoing_aborted.pop(pid, None)
            if meta is not None and meta.last_observed_batch_offset is not None:
                self.cleaned_index.append(meta.txn)
                return False
            return True
        if control_type == COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, h: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction."""
        self._consume_up_to(h.base_offset + h.last_offset_delta)
        if not h.attributes & TRANSACTIONAL_FLAG_MASK:
            return False
        meta = self._ongoing_aborted.get(h.producer_id)
        if meta is not None:
            meta.last_observed_batch_offset = h.base_offset + h.last_offset_delta
            return True
        self._ongoing_committed.add(h.producer_id)
        return False


# The record scan inlines the one- and two-byte varint cases on purpose and skips the
# timestamp delta (decoded only for records that are rewritten): a call per field would halve
# the cleaner's throughput on small records (bench/cleaner.py).


def _scan_records(data: bytes, count: int) -> Iterator[tuple[int, int, int, int, bytes | None, int]]:
    """Per record: ``(start, position after timestampDelta, end, offsetDelta, key, position of
    valueLength)``; start/end bound the record after its length varint. IndexError when the
    records run past ``data``."""
    pos = 0
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            z = (b & 0x7F) | (data[pos + 1] << 7)
            length = (z >> 1) ^ -(z & 1)
            pos += 2
        else:
            length, pos = _varint(data, pos)
        start = pos
        pos += length
        p = start + 1
        while data[p] >= 0x80:
            p += 1
        p += 1
        after_ts = p
        b = data[p]
        if b < 0x80:
            od = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            z = (b & 0x7F) | (data[p + 1] << 7)
            od = (z >> 1) ^ -(z & 1)
            p += 2
        else:
            od, p = _varint(data, p)
        b = data[p]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            klen, p = _varint(data, p)
        if klen < 0:
            yield start, after_ts, pos, od, None, p
        else:
            yield start, after_ts, pos, od, data[p : p + klen], p + klen
    if pos != len(data):
        raise CorruptRecordError(f"{len(data) - pos} bytes after the last of {count} records")


def map_batch_keys(data: bytes, h: BatchHeader, start_offset: int, offset_map: OffsetMap) -> bool:
    """Put the keys of one data batch's records (``data``: its records area) at or after
    ``start_offset`` into ``offset_map``; True when the map became full (the rest not mapped)."""
    m = offset_map._map
    used = offset_map._used
    capacity = offset_map.capacity_bytes
    base = h.base_offset
    latest = offset_map.latest_offset
    full = False
    try:
        for _, _, _, od, key, _ in _scan_records(data, h.records_count):
            offset = base + od
            if key is None or offset < start_offset:
                continue
            if key not in m:
                cost = ENTRY_COST_BYTES + len(key)
                if used + cost > capacity:
                    full = True
                    break
                used += cost
            m[key] = offset
            latest = offset
    except IndexError as exc:
        raise CorruptRecordError(f"records of the batch at offset {base} run past its end") from exc
    offset_map._used = used
    if latest > offset_map.latest_offset:
        offset_map.latest_offset = latest
    return full


@dataclass(slots=True)
class BatchOutcome:
    """What a batch became: ``data`` to write (None: dropped), records read and kept, the max
    timestamp and whether the original bytes were kept."""

    data: bytes | memoryview | None
    records_read: int
    records_retained: int
    max_timestamp: int
    copied: bool


def build_empty_batch(h: BatchHeader, *, keep_producer: bool = True) -> bytes:
    """An empty batch with ``h``'s offsets (Kafka's ``writeEmptyHeader``): no records, no codec,
    base and max timestamp = ``h``'s max timestamp; producer fields kept or cleared."""
    attributes = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    pid, epoch, seq = (h.producer_id, h.producer_epoch, h.base_sequence) if keep_producer else (-1, -1, -1)
    if not keep_producer:
        attributes &= TIMESTAMP_TYPE_MASK
    return _finish(
        bytearray(BATCH_HEADER_SIZE),
        h,
        attributes,
        h.max_timestamp,
        h.max_timestamp,
        0,
        (pid, epoch, seq),
    )


def _finish(
    out: bytearray,
    h: BatchHeader,
    attributes: int,
    base_ts: int,
    max_ts: int,
    count: int,
    producer: tuple[int, int, int] | None = None,
) -> bytes:
    pid, epoch, seq = producer if producer is not None else (h.producer_id, h.producer_epoch, h.base_sequence)
    HEADER_STRUCT.pack_into(
        out,
        0,
        h.base_offset,
        len(out) - LOG_OVERHEAD,
        h.partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        h.last_offset_delta,
        base_ts,
        max_ts,
        pid,
        epoch,
        seq,
        count,
    )
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def filter_batch(
    batch: bytes | memoryview,
    h: BatchHeader,
    offset_map: OffsetMap,
    *,
    discard_batch: bool,
    retain_empty: bool,
    marker_of_empty_txn: bool,
    now_ms: int,
    delete_retention_ms: int,
) -> BatchOutcome:
    """Apply the record rules (module docstring) to one stored batch.

    ``discard_batch``: every record goes (aborted data, or a marker past its horizon);
    ``retain_empty``: the batch holds an active producer's last offset; ``marker_of_empty_txn``:
    a control batch whose transaction has no batch left (it needs a horizon).
    """
    count = h.records_count
    is_control = bool(h.attributes & CONTROL_FLAG_MASK)
    has_horizon = bool(h.attributes & DELETE_HORIZON_FLAG_MASK)
    if discard_batch:
        if retain_empty:
            return BatchOutcome(build_empty_batch(h), count, 0, h.max_timestamp, False)
        return BatchOutcome(None, count, 0, -1, False)
    data = records_of(batch, h)
    log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    base_ts = h.base_timestamp
    latest = offset_map.latest_offset
    m = offset_map._map
    deletes_expired = has_horizon and now_ms >= h.base_timestamp
    spans: list[tuple[int, int, int]] = []  # kept records: (start, position after timestampDelta, end)
    keeps_tombstone = False
    base = h.base_offset
    try:
        for start, after_ts, nxt, od, key, vpos in _scan_records(data, count):
            offset = base + od
            if not is_control and offset <= latest:
                if key is None or offset < m.get(key, -1):
                    continue
                if data[vpos] == 1:  # valueLength -1: a tombstone
                    if deletes_expired:
                        continue
                    keeps_tombstone = True
            spans.append((start, after_ts, nxt))
    except IndexError as exc:
        raise CorruptRecordError(f"records of the batch at offset {base} run past its end") from exc
    needs_horizon = not has_horizon and (keeps_tombstone or (is_control and marker_of_empty_txn))
    kept = len(spans)
    if kept == count and not needs_horizon:
        return BatchOutcome(batch, count, kept, h.max_timestamp, True)
    if kept == 0:
        if retain_empty:
            return BatchOutcome(build_empty_batch(h), count, 0, h.max_timestamp, False)
        return BatchOutcome(None, count, 0, -1, False)
    attributes = h.attributes
    new_base_ts = base_ts
    if needs_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
        new_base_ts = now_ms + delete_retention_ms
    body = bytearray()
    max_ts = -1
    for start, after_ts, end in spans:
        ts = base_ts + _varint(data, start + 1)[0]
        if ts > max_ts:
            max_ts = ts
        if new_base_ts == base_ts:
            put_varint(body, end - start)
            body += data[start:end]
        else:
            rec = bytearray(data[start : start + 1])
            put_varint(rec, ts - new_base_ts)
            rec += data[after_ts:end]
            put_varint(body, len(rec))
            body += rec
    codec = attributes & COMPRESSION_CODEC_MASK
    payload = compress(codec, body) if codec else body
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    batch_max = h.max_timestamp if log_append else max_ts
    return BatchOutcome(_finish(out, h, attributes, new_base_ts, batch_max, kept), count, kept, batch_max, False)
