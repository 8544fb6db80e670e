"""Log append and read: offsets, file names, indexes against a full scan, read limits, timestamps."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from odradek.errors import InvalidRecordError, OffsetOutOfRangeError, RecordTooLargeError
from odradek.protocol.records import (
    LOG_APPEND_TIME,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_all_records,
    iter_batches,
    validate_batches,
)
from odradek.storage import Log, LogConfig, TopicPartition
from odradek.storage.cleaner import CleanerConfig, clean_log

from .storage_support import Clock, log_config


def make_log(path: Path, clock: Clock | None = None, **props: Any) -> Log:
    return Log(path / "orders-3", log_config(**props), time_ms=clock or Clock())


def batch(n: int = 1, value_size: int = 10, ts: int = 1_700_000_000_000, **kw: Any) -> bytes:
    return build_batch([Record(b"k", b"v" * value_size, timestamp_ms=ts + i) for i in range(n)], **kw)


def scan_all(log: Log) -> list[tuple[int, int]]:
    """(base_offset, last_offset) of every batch, read straight from the files."""
    out = []
    for seg in log.segments:
        data = seg.log_path.read_bytes()
        out += [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]
    return out


def test_offsets_leader_epoch_and_file_names(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    assert log.topic_partition == TopicPartition("orders", 3)
    info = log.append_as_leader(batch(3) + batch(2), leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 4, 5)
    assert info.valid_bytes == len(batch(3)) + len(batch(2))
    assert info.log_append_time == -1 and info.log_start_offset == 0
    assert info.max_timestamp == 1_700_000_000_002 and info.offset_of_max_timestamp == 2
    info = log.append_as_leader(batch(4))
    assert (info.first_offset, info.last_offset) == (5, 8)
    assert log.log_end_offset == 9
    names = sorted(os.listdir(log.dir))
    assert names == ["00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    stored = (log.dir / "00000000000000000000.log").read_bytes()
    headers = validate_batches(stored)  # still valid: only fields outside the CRC were stamped
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 7), (3, 7), (5, 0)]
    assert [r.offset for r in iter_all_records(stored)] == list(range(9))
    log.roll()
    assert (log.dir / "00000000000000000009.log").exists()
    assert log.size_in_bytes == len(stored)
    log.close()


def test_empty_payload_and_invalid_batches_append_nothing(tmp_path: Path) -> None:
    log = make_log(tmp_path, max_message_bytes=500)
    assert log.append_as_leader(b"").first_offset == -1
    good = batch(1)
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes=500"):
        log.append_as_leader(good + batch(1, value_size=600))
    with pytest.raises(InvalidRecordError, match="control"):
        log.append_as_leader(build_batch([Record(b"\0\0\0\1", b"")], is_control=True))
    with pytest.raises(InvalidRecordError, match="no records"):
        log.append_as_leader(build_batch([]))
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.append_as_leader(build_batch([Record(b"\0\0\0\1", b"")], is_control=True), origin="coordinator")
    assert log.log_end_offset == 1
    log.close()


def test_log_append_time(tmp_path: Path) -> None:
    clock = Clock(1_800_000_000_000)
    log = make_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(3, ts=5))
    assert info.log_append_time == 1_800_000_000_000 == info.max_timestamp
    data = log.read(0, 10_000).records_bytes()
    (h,) = validate_batches(data)
    assert h.timestamp_type == LOG_APPEND_TIME
    assert {r.timestamp_ms for r in decode_records(data)} == {1_800_000_000_000}
    log.close()


def test_index_lookup_matches_full_scan_for_every_offset(tmp_path: Path) -> None:
    rng = random.Random(7)
    log = make_log(tmp_path, index_interval_bytes=300, segment_bytes=20_000)
    for _ in range(400):
        log.append_as_leader(batch(rng.randint(1, 8), value_size=rng.randint(0, 200)))
    assert log.num_segments > 3
    batches = scan_all(log)
    assert batches[-1][1] == log.log_end_offset - 1
    assert sum(s.offset_index.entries for s in log.segments) > 50
    for offset in range(log.log_end_offset):
        expected = next(b for b in batches if b[1] >= offset)
        info = log.read(offset, 1)
        h = BatchHeader.parse(info.records_bytes())
        assert (h.base_offset, h.last_offset) == expected
        assert info.first_batch_offset == expected[0]
        seg = log.segments[max(i for i, s in enumerate(log.segments) if s.base_offset <= offset)]
        found = seg.translate_offset(offset)
        assert found is not None and (found[1].base_offset, found[1].last_offset) == expected
        assert seg.log_path.read_bytes()[found[0] : found[0] + 8] == struct.pack(">q", expected[0])
    log.close()


def test_index_entries_follow_interval_rule(tmp_path: Path) -> None:
    log = make_log(tmp_path, index_interval_bytes=250)
    sizes = []
    for i in range(30):
        raw = batch(2, value_size=i * 7)
        sizes.append(len(raw))
        log.append_as_leader(raw)
    expected = []
    since, pos, offset = 0, 0, 0
    for size in sizes:
        if since > 250:
            expected.append((offset + 1, pos))
            since = 0
        since += size
        pos += size
        offset += 2
    assert [tuple(e) for e in log.active_segment.offset_index.all_entries()] == expected
    log.close()


def test_read_limits(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    sizes = []
    for i in range(10):
        raw = batch(3, value_size=100 + i)
        sizes.append(len(raw))
        log.append_as_leader(raw)
    # max_bytes covers whole batches only
    info = log.read(0, sizes[0] + sizes[1] + 10)
    assert [h.base_offset for _, h in iter_batches(info.records_bytes())] == [0, 3]
    assert info.size == sizes[0] + sizes[1]
    # offset in the middle of a batch returns the whole batch
    info = log.read(4, 10_000)
    assert info.first_batch_offset == 3 and info.fetch_offset == 4
    assert info.size == sum(sizes[1:])
    # min_one_message returns one batch bigger than max_bytes; without it nothing
    assert log.read(0, 5).size == sizes[0]
    assert log.read(0, 5, min_one_message=False).is_empty
    assert log.read(0, 0).size == sizes[0]
    # max_offset is exclusive (e.g. the high watermark)
    info = log.read(0, 10_000, max_offset=9)
    assert [h.base_offset for _, h in iter_batches(info.records_bytes())] == [0, 3, 6]
    assert log.read(9, 10_000, max_offset=9).is_empty
    assert log.read(7, 10_000, max_offset=8).is_empty  # the batch holding 7 ends at 8 >= max_offset
    # at the log end: empty; beyond or below the log: out of range
    assert log.read(30, 100).records_bytes() == b""
    with pytest.raises(OffsetOutOfRangeError, match="range 0 to 30"):
        log.read(31, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_file_slice_and_bytes_agree(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch(2, value_size=50))
    info = log.read(2, 10_000)
    fs = info.file_slice
    assert fs is not None and fs.path.endswith("00000000000000000000.log")
    assert os.pread(fs.fd, fs.size, fs.position) == info.records_bytes() == fs.read_bytes()
    fd = fs.dup_fd()
    try:
        assert os.pread(fd, fs.size, fs.position) == info.records
    finally:
        os.close(fd)
    log.close()


def test_read_crosses_to_next_segment_and_respects_segment(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1000)
    for _ in range(30):
        log.append_as_leader(batch(1, value_size=100))
    assert log.num_segments > 2
    second = log.segments[1]
    info = log.read(second.base_offset, 10**6)
    assert info.size == second.size  # one segment per read
    log.close()


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    info = log.append_as_follower(batch(2, base_offset=0, partition_leader_epoch=4) + batch(3, base_offset=2))
    assert (info.first_offset, info.last_offset) == (0, 4)
    info = log.append_as_follower(batch(1, base_offset=10))  # a gap is fine (compacted leader)
    assert log.log_end_offset == 11
    with pytest.raises(InvalidRecordError, match="out of order"):
        log.append_as_follower(batch(1, base_offset=10))
    with pytest.raises(InvalidRecordError, match="out of order"):
        log.append_as_follower(batch(2, base_offset=20) + batch(1, base_offset=21))
    assert log.log_end_offset == 11
    assert BatchHeader.parse(log.read(0, 10).records_bytes()).partition_leader_epoch == 4
    assert log.read(5, 1000).first_batch_offset == 10
    log.close()


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = make_log(tmp_path, index_interval_bytes=100, segment_bytes=2000)
    expected = []  # (offset, timestamp) for every record
    offset = 0
    for i in range(100):
        ts = [10_000 + 10 * i + j for j in (3, 0, 7)]  # unordered inside the batch
        log.append_as_leader(build_batch([Record(b"k", b"v" * 20, timestamp_ms=t) for t in ts]))
        expected += [(offset + j, t) for j, t in enumerate(ts)]
        offset += 3
    assert log.num_segments > 2
    for target in [0, 10_000, 10_001, 10_004, 10_500, 10_995, 10_997, 10_998]:
        want = next(((o, t) for o, t in expected if t >= target), None)
        assert log.fetch_offset_by_timestamp(target) == want
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (300, -1)
    assert log.latest_timestamp() == (299, 10_997)
    assert log.fetch_offset_by_timestamp(-3) == (299, 10_997)
    log.high_watermark = log.log_end_offset
    log.delete_records(150)
    assert log.fetch_offset_by_timestamp(0) == (150, 10_503)
    log.close()


def test_latest_timestamp_empty_log(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    assert log.latest_timestamp() is None
    assert log.fetch_offset_by_timestamp(0) is None
    log.close()


def test_high_watermark_is_clamped(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(batch(5))
    log.high_watermark = 100
    assert log.high_watermark == 5
    log.high_watermark = -4
    assert log.high_watermark == 0
    log.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1000, index_interval_bytes=50)
    for _ in range(40):
        log.append_as_leader(batch(2, value_size=40))
    log.high_watermark = 80
    segments_before = log.num_segments
    assert log.truncate_to(31)  # inside the batch [30, 31]: the whole batch goes
    assert log.log_end_offset == 30 and log.high_watermark == 30
    assert log.num_segments < segments_before
    assert scan_all(log)[-1] == (28, 29)
    assert not log.truncate_to(30)
    info = log.append_as_leader(batch(1))
    assert info.first_offset == 30
    for offset in range(31):
        assert log.read(offset, 1).first_batch_offset == offset - offset % 2
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0 and log.num_segments == 1
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert log.append_as_leader(batch(1)).first_offset == 500
    log.close()


def test_update_config_and_closed_log(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.update_config(LogConfig.from_props({"index.interval.bytes": "0"}))
    for _ in range(5):
        log.append_as_leader(batch(1))
    assert log.active_segment.offset_index.entries == 4  # every batch after the first
    log.close()
    with pytest.raises(Exception, match="closed"):
        log.append_as_leader(batch(1))


def test_a_follower_takes_cleaned_batches_and_recovery_keeps_them(tmp_path: Path) -> None:
    """A leader's cleaned batches (fewer records than offsets, gaps between them) replicate to a
    follower as they are, and a recovery after an unclean shutdown keeps them."""
    compacted = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": "2000"})
    leader = Log(tmp_path / "leader" / "t-0", compacted)
    for i in range(40):
        leader.append_as_leader(build_batch([Record(b"k%d" % k, b"v%d" % i) for k in range(4)]))
    leader.roll()
    leader.high_watermark = leader.log_end_offset
    clean_log(leader, now_ms=1_700_000_000_000, config=CleanerConfig())
    follower = Log(tmp_path / "follower" / "t-0", compacted)
    counts = []
    while follower.log_end_offset < leader.log_end_offset:  # the fetches of a follower, one segment each
        fetched = leader.read(follower.log_end_offset, 10**6).records_bytes()
        counts += [(h.records_count, h.last_offset_delta + 1) for _, h in iter_batches(fetched)]
        follower.append_as_follower(fetched)
    assert any(count < offsets for count, offsets in counts)
    assert follower.log_end_offset == leader.log_end_offset
    before = scan_all(follower)
    follower.close()
    reopened = Log(tmp_path / "follower" / "t-0", compacted, had_clean_shutdown=False, recovery_point=0)
    assert scan_all(reopened) == before
    reopened.close()
    leader.close()
