"""Helpers of the log cleaner tests: a compacted log written batch by batch with explicit offsets,
and the records it holds."""

from __future__ import annotations

import struct
from pathlib import Path

from tests.unit.storage_support import Clock, log_config

from odradek.protocol.records import DecodedRecord, Record, build_batch, decode_records
from odradek.storage import Log

T0 = 1_700_000_000_000


def compacted_log(tmp_path: Path, clock: Clock | None = None, *, topic: str = "compacted", **props: object) -> Log:
    cfg = {"cleanup_policy": "compact", "segment_bytes": 100_000, "min_cleanable_dirty_ratio": 0.01, **props}
    return Log(tmp_path / f"{topic}-0", log_config(**cfg), time_ms=clock or Clock(T0))


def append(
    log: Log,
    records: list[tuple[bytes | None, bytes | None]],
    *,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    timestamp_ms: int = T0,
) -> int:
    """Append one batch at the log end offset (as a follower would); its base offset."""
    base = log.log_end_offset
    batch = build_batch(
        [Record(k, v, timestamp_ms=timestamp_ms + i) for i, (k, v) in enumerate(records)],
        base_offset=base,
        compression=compression,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
        is_control=control,
        partition_leader_epoch=0,
    )
    log.append_as_follower(batch)
    log.high_watermark = log.log_end_offset
    return base


def marker(log: Log, producer_id: int, commit: bool, *, first_offset: int = -1) -> int:
    """Append a COMMIT/ABORT control batch; the log writes an ABORT's ``.txnindex`` entry, from
    ``first_offset`` (the transaction's first batch) to the marker."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    offset = append(log, [(key, value)], producer_id=producer_id, producer_epoch=0, transactional=True, control=True)
    if not commit:
        last = log.active_segment.txn_index.entries()[-1]
        assert (last.producer_id, last.first_offset, last.last_offset) == (producer_id, first_offset, offset)
    return offset


def records(log: Log) -> list[DecodedRecord]:
    out: list[DecodedRecord] = []
    for seg in log.segments:
        data = seg.read_at(0, seg.size)
        for _, h in seg.scan_batches():
            pos = _
            out += decode_records(data[pos : pos + h.batch_length + 12])
    return out


def latest(log: Log) -> dict[bytes | None, tuple[int, bytes | None]]:
    """Key -> (offset, value) of the last record of each key (a reader's table)."""
    table: dict[bytes | None, tuple[int, bytes | None]] = {}
    for r in records(log):
        table[r.key] = (r.offset, r.value)
    return table


def headers(log: Log) -> list[object]:
    return [h for seg in log.segments for _, h in seg.scan_batches()]
