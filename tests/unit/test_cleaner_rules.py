"""Record rules of the log cleaner on real segment files (in-process ``clean_log``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.cleaner_support import T0, append, compacted_log, headers, latest, marker, records
from tests.unit.storage_support import Clock

from odradek.errors import CorruptRecordError
from odradek.protocol.records import DELETE_HORIZON_FLAG_MASK, BatchHeader, decode_records
from odradek.storage import Log
from odradek.storage.cleaner import CleanerConfig, clean_log
from odradek.storage.cleaner.offset_map import ENTRY_COST_BYTES, OffsetMap

CFG = CleanerConfig()
DAY = 86_400_000


def roll(log: Log) -> None:
    log.roll()


def hdrs(log: Log) -> list[BatchHeader]:
    return [h for h in headers(log) if isinstance(h, BatchHeader)]


def test_offset_map_is_bounded_by_its_byte_budget_and_compares_keys_bytewise() -> None:
    m = OffsetMap(2 * (ENTRY_COST_BYTES + 1))
    assert m.put(b"a", 1) and m.put(b"b", 2)
    assert not m.put(b"c", 3)  # full: a third key does not fit
    assert m.put(b"a", 7)  # an existing key is always updated
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c"), m.get(b"a\x00")) == (7, 2, -1, -1)
    assert len(m) == 2 and m.latest_offset == 7 and m.utilization == 1.0
    with pytest.raises(ValueError):
        OffsetMap(10)


def test_last_value_of_every_key_survives_at_its_offset(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    for i in range(30):
        append(log, [(b"k%d" % (i % 5), b"v%d" % i), (b"x\x00" if i % 2 else b"x", b"w%d" % i)])
    roll(log)
    before = latest(log)
    stats = clean_log(log, now_ms=T0, config=CFG)
    after = latest(log)
    assert after == before  # same last value, same offset, for every key
    assert len(records(log)) == len(before) == 7  # k0..k4, b"x", b"x\x00": keys compared byte for byte
    assert stats.records_read == 60 and stats.records_retained == 7 and stats.end_offset == 60
    assert log.log_end_offset == 60 and log.log_start_offset == 0
    log.close()
    reopened = compacted_log(tmp_path)
    assert latest(reopened) == before


def test_active_segment_and_offsets_beyond_the_upper_bound_are_not_cleaned(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    for i in range(4):
        append(log, [(b"k", b"old%d" % i)])
    roll(log)
    for i in range(4):
        append(log, [(b"k", b"new%d" % i)])  # active segment
    clean_log(log, now_ms=T0, config=CFG)
    assert [r.value for r in records(log)] == [b"old3", b"new0", b"new1", b"new2", b"new3"]
    # an upper bound (e.g. the last stable offset) below the active segment stops the clean there
    log2 = compacted_log(tmp_path / "b")
    for i in range(6):
        append(log2, [(b"k", b"%d" % i)])
        if i in (1, 3):
            roll(log2)
    roll(log2)
    clean_log(log2, now_ms=T0, config=CFG, upper_bound_offset=4)
    assert [r.offset for r in records(log2)] == [3, 4, 5]  # 0-3 cleaned against the map of 0-3


def test_unchanged_batch_is_copied_byte_for_byte(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    append(log, [(b"a", b"1"), (b"b", b"2")])
    append(log, [(b"a", b"3")])
    roll(log)
    second = log.segments[0].read_at(0, log.segments[0].size)
    first_size = hdrs(log)[0].batch_length + 12
    original_second = second[first_size:]
    clean_log(log, now_ms=T0, config=CFG)
    data = log.segments[0].read_at(0, log.segments[0].size)
    h = BatchHeader.parse(data)
    assert h.records_count == 1 and h.base_offset == 0 and h.last_offset_delta == 1  # offsets kept
    assert data[h.batch_length + 12 :] == original_second


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_rewritten_with_their_codec(tmp_path: Path, codec: int) -> None:
    log = compacted_log(tmp_path)
    append(log, [(b"a", b"1" * 100), (b"b", b"2" * 100), (b"c", b"3")], compression=codec)
    append(log, [(b"a", b"4")], compression=codec)
    roll(log)
    clean_log(log, now_ms=T0, config=CFG)
    first = hdrs(log)[0]
    assert first.compression == codec and first.records_count == 2
    assert latest(log) == {b"a": (3, b"4"), b"b": (1, b"2" * 100), b"c": (2, b"3")}


def test_tombstones_get_a_delete_horizon_then_go(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, delete_retention_ms=DAY)
    append(log, [(b"a", b"1"), (b"b", b"2")])
    append(log, [(b"a", None)], timestamp_ms=T0 + 5)
    roll(log)
    clean_log(log, now_ms=T0 + 10, config=CFG)
    tomb = hdrs(log)[-1]
    assert tomb.attributes & DELETE_HORIZON_FLAG_MASK and tomb.base_timestamp == T0 + 10 + DAY
    (rec,) = decode_records(log.segments[0].read_at(0, log.segments[0].size)[-(tomb.batch_length + 12) :])
    assert (rec.key, rec.value, rec.timestamp_ms, rec.offset) == (b"a", None, T0 + 5, 2)  # timestamp kept
    assert latest(log)[b"a"] == (2, None)
    clean_log(log, now_ms=T0 + 10 + DAY - 1, config=CFG)
    assert latest(log)[b"a"] == (2, None)  # before the horizon: kept
    clean_log(log, now_ms=T0 + 10 + DAY, config=CFG)
    assert b"a" not in latest(log) and latest(log)[b"b"] == (1, b"2")


def test_aborted_transaction_records_and_markers_go(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, delete_retention_ms=0)
    append(log, [(b"k", b"committed-before")])
    first = append(log, [(b"k", b"aborted")], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    abort_at = marker(log, 7, commit=False, first_offset=first)
    append(log, [(b"j", b"after")], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
    commit_at = marker(log, 8, commit=True)
    append(log, [(b"z", b"last")])
    roll(log)
    clean_log(log, now_ms=T0, config=CFG, retain_offsets=())
    values = {r.key: r.value for r in records(log) if r.key is not None and not r.key.startswith(b"\x00\x00")}
    assert values == {b"k": b"committed-before", b"j": b"after", b"z": b"last"}
    kept = {h.base_offset for h in hdrs(log) if h.is_control}
    assert abort_at in kept and commit_at in kept  # the aborted data was still there: markers stay
    assert [t.last_offset for t in log.segments[0].txn_index.entries()] == [abort_at]  # rewritten txnindex
    clean_log(log, now_ms=T0 + 1, config=CFG, retain_offsets=())
    # second pass: the abort's data is gone, its marker gets a horizon (0 ms) and goes on the next pass
    clean_log(log, now_ms=T0 + 2, config=CFG, retain_offsets=())
    kept = {h.base_offset for h in hdrs(log) if h.is_control}
    assert abort_at not in kept and commit_at in kept  # the commit's data ("j") is still there
    assert log.segments[0].txn_index.entries() == []


def test_transactions_spanning_segment_groups(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, segment_bytes=200, delete_retention_ms=0)  # one segment per group
    aborted = append(log, [(b"a", b"aborted")], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    append(log, [(b"c", b"committed")], producer_id=8, producer_epoch=0, base_sequence=0, transactional=True)
    log.roll()
    append(log, [(b"k", b"plain")])
    log.roll()
    abort_at = marker(log, 7, commit=False, first_offset=aborted)
    commit_at = marker(log, 8, commit=True)
    log.roll()
    append(log, [(b"z", b"active")])
    clean_log(log, now_ms=T0, config=CFG, retain_offsets=())
    assert {r.key: r.value for r in records(log) if r.key in (b"a", b"k", b"c")} == {b"k": b"plain", b"c": b"committed"}
    kept = {h.base_offset for h in hdrs(log) if h.is_control}
    assert kept == {abort_at, commit_at}  # both saw their transaction's data in an earlier group
    assert [t.last_offset for s in log.segments for t in s.txn_index.entries()] == [abort_at]


def test_last_batch_of_a_producer_is_kept_empty(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    append(log, [(b"a", b"1")], producer_id=5, producer_epoch=2, base_sequence=0)
    last = append(log, [(b"a", b"2"), (b"b", b"3")], producer_id=5, producer_epoch=2, base_sequence=1)
    append(log, [(b"a", b"4"), (b"b", b"5")])
    roll(log)
    clean_log(log, now_ms=T0, config=CFG, retain_offsets={last + 1})
    hs = hdrs(log)
    kept = [h for h in hs if h.producer_id == 5]
    assert len(kept) == 1
    (h,) = kept
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (last, 1, 0)
    assert (h.producer_epoch, h.base_sequence) == (2, 1)
    # derived from the log when not given: the same batch is kept
    log2 = compacted_log(tmp_path / "b")
    append(log2, [(b"a", b"1")], producer_id=5, producer_epoch=2, base_sequence=0)
    append(log2, [(b"a", b"2")], producer_id=5, producer_epoch=2, base_sequence=1)
    append(log2, [(b"a", b"4")])
    roll(log2)
    clean_log(log2, now_ms=T0, config=CFG)
    assert [(h.base_offset, h.records_count) for h in hdrs(log2) if h.producer_id == 5] == [(1, 0)]


def test_indexes_are_rebuilt_for_the_cleaned_segment(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, index_interval_bytes=100)
    for i in range(200):
        append(log, [(b"k%03d" % (i % 50), b"v" * 50)], timestamp_ms=T0 + i)
    roll(log)
    clean_log(log, now_ms=T0, config=CFG)
    seg = log.segments[0]
    seg.sanity_check()
    assert seg.offset_index.entries > 5
    for target in (150, 175, 199):
        info = log.read(target, 1000)
        assert info.records_bytes()
        assert BatchHeader.parse(info.records_bytes()).base_offset == target
    assert log.fetch_offset_by_timestamp(T0 + 160) == (160, T0 + 160)
    assert seg.max_timestamp_so_far == T0 + 199


def test_a_full_map_cleans_up_to_the_offset_it_covers(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, segment_bytes=400)
    for i in range(40):
        append(log, [(b"key-%02d" % i, b"v")])
    for i in range(40):
        append(log, [(b"key-%02d" % i, b"w")])
    roll(log)
    small = CleanerConfig(dedupe_buffer_size=10 * (ENTRY_COST_BYTES + 6), io_buffer_load_factor=1.0)
    stats = clean_log(log, now_ms=T0, config=small)
    assert stats.map_entries == 10 and stats.end_offset == 10
    assert len(records(log)) == 80  # the first ten keys are unique so far: nothing removable yet
    stats = clean_log(log, now_ms=T0, config=small, first_dirty_offset=40)
    assert stats.end_offset == 50
    assert [r.offset for r in records(log)][:12] == list(range(10, 40))[:12]


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    clock = Clock(T0)
    log = compacted_log(tmp_path, clock, min_compaction_lag_ms=1000)
    append(log, [(b"k", b"1")], timestamp_ms=T0)
    roll(log)
    append(log, [(b"k", b"2")], timestamp_ms=T0 + 900)
    roll(log)
    assert clean_log(log, now_ms=T0 + 950, config=CFG).end_offset == 0  # both younger than the lag
    stats = clean_log(log, now_ms=T0 + 1500, config=CFG)
    assert stats.end_offset == 1  # the second segment is younger than the lag
    assert [r.value for r in records(log)] == [b"1", b"2"]
    clean_log(log, now_ms=T0 + 2000, config=CFG)
    assert [r.value for r in records(log)] == [b"2"]


def test_a_corrupt_segment_fails_the_clean_and_leaves_the_log(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    append(log, [(b"a", b"1")])
    append(log, [(b"a", b"2")])
    roll(log)
    path = log.segments[0].log_path
    data = bytearray(path.read_bytes())
    data[66] ^= 0xFF  # inside the first batch's records (under its CRC)
    path.write_bytes(bytes(data))
    before = sorted(p.name for p in path.parent.iterdir())
    with pytest.raises(CorruptRecordError):
        clean_log(log, now_ms=T0, config=CFG)
    assert sorted(p.name for p in path.parent.iterdir()) == before  # no .cleaned left
    assert path.read_bytes() == bytes(data)


def test_compact_and_delete_policy_cleans_and_keeps_retention(tmp_path: Path) -> None:
    clock = Clock(T0)
    log = compacted_log(tmp_path, clock, cleanup_policy="compact,delete", retention_ms=1000)
    assert log.config.compacted
    for i in range(6):
        append(log, [(b"k%d" % (i % 2), b"v%d" % i)], timestamp_ms=T0 + i)
        if i == 2:
            log.roll()
    log.roll()
    clean_log(log, now_ms=T0, config=CFG)
    assert latest(log) == {b"k0": (4, b"v4"), b"k1": (5, b"v5")}
    assert log.delete_old_segments(now_ms=T0 + 5000) > 0  # retention.ms still applies
    assert records(log) == []
