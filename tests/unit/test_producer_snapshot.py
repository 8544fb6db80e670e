"""Producer snapshot files (``%020d.snapshot``, Kafka's version-1 format): written at segment roll
and on request (clean shutdown), loaded on restart instead of a scan of the whole log, removed on
truncation, and skipped with a warning when corrupt."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from odradek.errors import OutOfOrderSequenceError
from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches
from odradek.replication.partition import Partition, PartitionState
from odradek.storage import Log, TopicPartition
from odradek.storage.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    latest_snapshot,
    read_snapshot,
    write_snapshot,
)

from .storage_support import log_config

TP = TopicPartition("t", 0)


def _batch(pid: int, seq: int, n: int = 10, transactional: bool = False) -> bytes:
    records = [Record(None, b"x" * 40) for _ in range(n)]
    return build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=transactional)


def _headers(data: bytes) -> list[BatchHeader]:
    return [h for _pos, h in iter_batches(data)]


def _partition(path: Path) -> Partition:
    p = Partition(TP, 1, Log(path, log_config(segment_bytes=1500)), PartitionState(-1, -1, [], []))
    p.make_leader(PartitionState(1, 0, [1], [1]), now_ms=0)
    return p


def _append(p: Partition, data: bytes) -> int:
    info = p.log.append_as_leader(data, 0)  # checked against and recorded in the producer state
    assert not info.duplicate
    return int(info.first_offset)


def _snapshot_offsets(path: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in path.glob("*.snapshot"))


def test_file_format_round_trip_and_corruption(tmp_path: Path) -> None:
    entries = [SnapshotEntry(7, 2, 41, 141, 9, 1_700_000_000_000, 3, 100), SnapshotEntry(8, 0, 4, 150, 4)]
    path = write_snapshot(tmp_path, 151, entries)
    assert path.name == "00000000000000000151.snapshot"
    data = path.read_bytes()
    assert len(data) == 2 + 4 + 4 + 2 * 46
    version, crc = struct.unpack_from(">hI", data)
    assert version == 1 and crc == crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (7, 2, 41, 141, 9, 1_700_000_000_000, 3, 100)
    assert read_snapshot(path) == entries
    assert latest_snapshot(tmp_path, 151) == (151, path) and latest_snapshot(tmp_path, 150) is None
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        read_snapshot(path)
    path.write_bytes(data[:5])
    with pytest.raises(CorruptSnapshotError, match="shorter"):
        read_snapshot(path)
    path.write_bytes(struct.pack(">h", 2) + data[2:])
    with pytest.raises(CorruptSnapshotError, match="version 2"):
        read_snapshot(path)


def test_written_at_roll_and_loaded_on_restart(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    p = _partition(directory)
    seq = 0
    for _ in range(12):  # ~5 batches per 1500-byte segment: several rolls
        _append(p, _batch(5, seq))
        seq += 10
    _append(p, _batch(6, 0, transactional=True))  # an open transaction
    bases = [s.base_offset for s in p.log.segments]
    assert len(bases) >= 3
    assert _snapshot_offsets(directory) == bases[1:][-3:]  # one per roll, the newest three kept
    reopened = _partition(directory)
    assert reopened.producer_state.check(_headers(_batch(5, seq - 10))) == (110, 119)  # the last batch: a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        reopened.producer_state.check(_headers(_batch(5, seq + 10)))
    assert reopened.txn_state.ongoing == {6: 120}
    reopened.log.take_producer_snapshot()  # clean shutdown
    assert _snapshot_offsets(directory)[-1] == reopened.log.log_end_offset == 130
    only_snapshot = _partition(directory)  # loaded from the file at the log end, nothing replayed
    assert only_snapshot.producer_state.producers.keys() == {5, 6}
    assert only_snapshot.txn_state.ongoing == {6: 120}


def test_corrupt_snapshot_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "t-0"
    p = _partition(directory)
    for i in range(8):
        _append(p, _batch(5, i * 10))
    newest = sorted(directory.glob("*.snapshot"))[-1]
    newest.write_bytes(b"\x00\x01garbage")
    with caplog.at_level(logging.WARNING):
        reopened = _partition(directory)
    assert "producer snapshot unusable" in caplog.text
    assert reopened.producer_state.check(_headers(_batch(5, 70))) == (70, 79)  # rebuilt from the log


def test_truncation_removes_later_snapshots_and_reloads(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    p = _partition(directory)
    for i in range(8):
        _append(p, _batch(5, i * 10))
    cut = p.log.segments[1].base_offset + 10
    p.truncate_to(cut)
    assert all(offset <= cut for offset in _snapshot_offsets(directory))
    assert p.producer_state.producers[5].last_seq == cut - 1
    assert p.producer_state.check(_headers(_batch(5, cut))) is None
    with pytest.raises(OutOfOrderSequenceError):  # known: cut + 7 is a gap
        p.producer_state.check(_headers(_batch(5, cut + 7)))
    p.truncate_fully_and_start_at(500)
    assert _snapshot_offsets(directory) == [] and p.producer_state.producers == {}
    assert p.producer_state.check(_headers(_batch(5, cut + 7))) is None  # forgotten: any sequence


def test_dump_log_prints_a_snapshot(tmp_path: Path) -> None:
    from odradek.storage.dump import dump_files

    path = write_snapshot(tmp_path, 20, [SnapshotEntry(7, 2, 19, 19, 9, 1000, 3, 10)])
    result = dump_files([path])
    assert result.lines[1] == (
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 3 currentTxnFirstOffset: 10 lastTimestamp: 1000 "
        "firstSequence: 10 lastSequence: 19 lastOffset: 19 offsetDelta: 9 timestamp: 1000"
    )
    path.write_bytes(b"\x00\x01\x00")
    assert dump_files([path]).failed
