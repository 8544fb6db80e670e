"""Segment rolling (size, time, full index) and retention (time, bytes, log start offset)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.errors import OffsetOutOfRangeError
from odradek.protocol.records import Record, build_batch
from odradek.storage import Log, LogConfig

from .storage_support import Clock, log_config


def make_log(path: Path, clock: Clock | None = None, **props: Any) -> Log:
    return Log(path / "events-0", log_config(**props), time_ms=clock or Clock())


def batch(n: int = 1, value_size: int = 100, ts: int = 1_700_000_000_000) -> bytes:
    return build_batch([Record(b"k", b"v" * value_size, timestamp_ms=ts) for _ in range(n)])


def test_roll_by_size(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1000, index_interval_bytes=100)
    size = len(batch())
    for _ in range(50):
        log.append_as_leader(batch())
    per_segment = 1000 // size
    assert log.num_segments == -(-50 // per_segment)
    for seg in log.segments:
        assert 0 < seg.size <= 1000
    bases = [s.base_offset for s in log.segments]
    assert bases == list(range(0, 50, per_segment))
    names = sorted(p.name for p in log.dir.glob("*.log"))
    assert names == [f"{b:020d}.log" for b in bases]
    # indexes of rolled segments are trimmed to their valid entries
    for seg in log.segments[:-1]:
        assert seg.index_path.stat().st_size == seg.offset_index.entries * 8
        assert seg.time_index_path.stat().st_size == seg.time_index.entries * 12
    assert log.active_segment.index_path.stat().st_size == 10 * 1024 * 1024 // 8 * 8  # preallocated
    log.close()


def test_oversized_batch_goes_into_its_own_segment(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=500)
    log.append_as_leader(batch(value_size=10))
    log.append_as_leader(batch(value_size=2000))
    log.append_as_leader(batch(value_size=10))
    assert [s.base_offset for s in log.segments] == [0, 1, 2]
    log.close()


def test_roll_by_time_uses_record_timestamps(tmp_path: Path) -> None:
    t0 = 1_700_000_000_000
    log = make_log(tmp_path, segment_ms=1000)
    log.append_as_leader(batch(ts=t0))
    log.append_as_leader(batch(ts=t0 + 1000))
    assert log.num_segments == 1
    log.append_as_leader(batch(ts=t0 + 1001))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_by_time_falls_back_to_clock(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock, segment_ms=1000)
    no_ts = batch(ts=-1)
    log.append_as_leader(no_ts)
    clock.now += 600
    log.append_as_leader(no_ts)
    assert log.num_segments == 1
    clock.now += 600
    log.append_as_leader(no_ts)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.active_segment.created_ms == clock.now
    log.close()


def test_roll_when_index_full(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_index_bytes=8 * 4, index_interval_bytes=0)
    for _ in range(20):
        log.append_as_leader(batch(value_size=10))
    assert log.num_segments > 3
    for seg in log.segments:
        assert seg.offset_index.entries <= 4
        assert seg.time_index.entries <= 3  # 32 bytes: 2 time entries + the final one on roll
    assert [r for r in range(20) if log.read(r, 1).first_batch_offset != r] == []
    log.close()


def test_empty_active_segment_is_not_rolled(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock, segment_ms=10)
    clock.now += 1_000_000
    log.append_as_leader(batch(ts=-1))
    assert log.num_segments == 1
    log.close()


def fill(log: Log, clock: Clock, segments: int, per_segment: int, ts_step: int) -> None:
    ts = clock.now
    for _ in range(segments):
        for _ in range(per_segment):
            log.append_as_leader(batch(ts=ts))
        ts += ts_step
        log.roll()
    log.high_watermark = log.log_end_offset


def test_retention_by_time(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock, retention_ms=10_000)
    fill(log, clock, segments=5, per_segment=3, ts_step=5_000)  # max timestamps t0, +5s, ... +20s
    log.append_as_leader(batch(ts=clock.now + 25_000))
    log.high_watermark = log.log_end_offset
    assert log.num_segments == 6
    assert log.delete_old_segments(clock.now + 20_000) == 2  # older than 10 s: t0 and t0+5s
    assert [s.base_offset for s in log.segments] == [6, 9, 12, 15]
    assert log.log_start_offset == 6
    assert not (log.dir / f"{0:020d}.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 100)
    assert log.read(6, 100).first_batch_offset == 6
    log.close()


def test_retention_deletes_everything_but_keeps_an_active_segment(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock, retention_ms=1000)
    for _ in range(4):
        log.append_as_leader(batch(ts=clock.now))
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments(clock.now + 5000) == 1
    assert log.num_segments == 1 and log.active_segment.size == 0
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    assert log.read(4, 100).is_empty
    assert log.append_as_leader(batch()).first_offset == 4
    log.close()


def test_retention_respects_high_watermark(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock, retention_ms=1000)
    fill(log, clock, segments=3, per_segment=2, ts_step=0)
    log.high_watermark = 3  # inside the second segment
    assert log.delete_old_segments(clock.now + 5000) == 1
    assert log.log_start_offset == 2
    log.close()


def test_retention_by_bytes(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock, retention_bytes=1000)
    fill(log, clock, segments=6, per_segment=2, ts_step=0)
    seg_size = log.segments[0].size
    total = log.size_in_bytes
    deleted = log.delete_old_segments(clock.now)
    assert deleted == (total - 1000) // seg_size
    assert log.size_in_bytes >= 1000
    assert log.size_in_bytes - log.segments[0].size < 1000
    assert log.log_start_offset == log.segments[0].base_offset == 2 * deleted
    log.close()


def test_no_retention_for_compacted_topics_or_unlimited(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock, retention_ms=-1, retention_bytes=-1)
    fill(log, clock, segments=3, per_segment=1, ts_step=0)
    assert log.delete_old_segments(clock.now + 10**12) == 0
    log.update_config(LogConfig.from_props({"retention.ms": "1", "cleanup.policy": "compact"}))
    assert log.delete_old_segments(clock.now + 10**12) == 0
    log.close()


def test_delete_records(tmp_path: Path) -> None:
    clock = Clock()
    log = make_log(tmp_path, clock)
    fill(log, clock, segments=4, per_segment=5, ts_step=0)  # segments at 0, 5, 10, 15
    log.high_watermark = 17
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(18)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(-5)
    assert log.delete_records(7) == 7
    assert [s.base_offset for s in log.segments] == [5, 10, 15, 20]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    assert log.read(7, 100).first_batch_offset == 7
    assert log.delete_records(3) == 7  # never lowered
    assert log.delete_records(-1) == 17  # -1: the high watermark
    assert [s.base_offset for s in log.segments] == [15, 20]
    assert log.delete_old_segments(clock.now) == 0
    log.close()
