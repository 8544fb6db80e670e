"""OffsetIndex and TimeIndex: on-disk entry format, preallocation, lookups, truncation, sanity."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from odradek.storage.index import CorruptIndexError, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset


def test_offset_index_entries_are_8_bytes_big_endian(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_index_size=1000)
    assert path.stat().st_size == 1000  # preallocated, already a multiple of 8
    assert index.max_entries == 125
    index.append(105, 0)
    index.append(110, 4096)
    index.append(2**31 - 1 + 100, 8192)
    index.close()
    data = path.read_bytes()
    assert len(data) == 3 * 8
    assert struct.unpack(">iiiiii", data) == (5, 0, 10, 4096, 2**31 - 1, 8192)


def test_preallocation_rounds_down_to_whole_entries(tmp_path: Path) -> None:
    OffsetIndex(tmp_path / "a.index", 0, max_index_size=1003).close()
    index = OffsetIndex(tmp_path / "b.index", 0, max_index_size=1003)
    assert index.length == 1000
    t = TimeIndex(tmp_path / "c.timeindex", 0, max_index_size=1003)
    assert t.length == 996 and t.max_entries == 83
    index.close()
    t.close()


def test_time_index_entries_are_12_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000007.timeindex"
    index = TimeIndex(path, 7, max_index_size=120)
    assert index.maybe_append(1_700_000_000_000, 9)
    assert not index.maybe_append(1_700_000_000_000, 10)  # not larger: skipped
    assert index.maybe_append(1_700_000_000_050, 12)
    index.close()
    data = path.read_bytes()
    assert len(data) == 24
    assert struct.unpack(">qiqi", data) == (1_700_000_000_000, 2, 1_700_000_000_050, 5)


def test_offset_lookup_is_largest_entry_not_above_target(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 50, max_index_size=8 * 100)
    entries = [(50 + 3 * i + 2, 100 * i) for i in range(60)]
    for off, pos in entries:
        index.append(off, pos)
    assert index.lookup(10) == OffsetPosition(50, 0)  # below everything: base offset, position 0
    assert index.lookup(51) == OffsetPosition(50, 0)
    for target in range(50, 300):
        expected = max((e for e in entries if e[0] <= target), default=(50, 0))
        assert index.lookup(target) == OffsetPosition(*expected)
    index.close()


def test_time_lookup(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=12 * 10)
    for i in range(5):
        index.maybe_append(1000 + 10 * i, 3 * i)
    assert index.lookup(999) == TimestampOffset(-1, 0)
    assert index.lookup(1000) == TimestampOffset(1000, 0)
    assert index.lookup(1025) == TimestampOffset(1020, 6)
    assert index.lookup(10**15) == TimestampOffset(1040, 12)
    index.close()


def test_append_rules(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, max_index_size=16)
    index.append(5, 100)
    with pytest.raises(ValueError):
        index.append(5, 200)  # offset not increasing
    with pytest.raises(ValueError):
        index.append(6, 100)  # position not increasing
    index.append(6, 200)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(7, 300)
    with pytest.raises(ValueError):
        OffsetIndex(tmp_path / "1.index", 10, max_index_size=16).append(5, 0)
    time_index = TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=12)
    time_index.maybe_append(10, 1)
    with pytest.raises(ValueError, match="full"):
        time_index.maybe_append(20, 2)
    assert time_index.maybe_append(20, 2, skip_full_check=True)  # grows for the final entry
    assert time_index.entries == 2
    index.close()
    time_index.close()


def test_truncate_to(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, max_index_size=800)
    for i in range(10):
        index.append(10 * i + 9, 1000 * i)
    index.truncate_to(50)
    assert index.entries == 5 and index.last_entry == OffsetPosition(49, 4000)
    index.truncate_to(49)
    assert index.entries == 4
    index.truncate_to_position(2000)
    assert index.entries == 2
    index.append(100, 5000)
    assert index.all_entries() == [OffsetPosition(9, 0), OffsetPosition(19, 1000), OffsetPosition(100, 5000)]
    t = TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=240)
    for i in range(10):
        t.maybe_append(100 + i, 10 * i)
    t.truncate_to(35)
    assert t.last_entry == TimestampOffset(103, 30)
    index.close()
    t.close()


def test_reopen_ignores_trailing_zero_entries_after_crash(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, max_index_size=800)
    index.append(0, 0)
    index.append(4, 256)
    index.flush()
    index._close_handles()  # a crash: the file stays preallocated, never trimmed
    assert path.stat().st_size == 800
    reopened = OffsetIndex(path, 0, max_index_size=800)
    assert reopened.entries == 2 and reopened.last_entry == OffsetPosition(4, 256)
    reopened.sanity_check()
    reopened.close()
    assert path.stat().st_size == 16


def test_sanity_check_rejects_bad_files(tmp_path: Path) -> None:
    odd = tmp_path / "odd.index"
    odd.write_bytes(struct.pack(">ii", 1, 0) + b"\x01\x02\x03")
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(odd, 0).sanity_check()
    backwards = tmp_path / "back.index"
    backwards.write_bytes(struct.pack(">iiii", 5, 0, 3, 100))
    with pytest.raises(CorruptIndexError, match="offsets"):
        OffsetIndex(backwards, 0).sanity_check()
    positions = tmp_path / "pos.index"
    positions.write_bytes(struct.pack(">iiii", 1, 100, 3, 50))
    with pytest.raises(CorruptIndexError, match="positions"):
        OffsetIndex(positions, 0).sanity_check()
    times = tmp_path / "t.timeindex"
    times.write_bytes(struct.pack(">qiqi", 100, 1, 90, 2))
    with pytest.raises(CorruptIndexError, match="timestamps"):
        TimeIndex(times, 0).sanity_check()
    good = tmp_path / "good.timeindex"
    good.write_bytes(struct.pack(">qiqi", 100, 1, 190, 2))
    TimeIndex(good, 0).sanity_check()


def test_an_index_costs_one_descriptor_its_mapping_and_resizes_still_work(tmp_path: Path) -> None:
    def open_fds() -> int:
        """Descriptors open on files under ``tmp_path`` (other tests' threads may open others meanwhile)."""
        count = 0
        for fd in Path("/proc/self/fd").iterdir():
            try:
                count += os.readlink(fd).startswith(str(tmp_path))
            except OSError:  # closed meanwhile
                continue
        return count

    before = open_fds()
    indexes = [OffsetIndex(tmp_path / f"{i:020d}.index", i * 100, max_index_size=4096) for i in range(20)]
    assert open_fds() - before == 20  # the mapping's own duplicate only, none held by the index
    index = indexes[0]
    index.append(5, 100)
    index.trim_to_valid_size()
    assert index.length == 8 and (tmp_path / f"{0:020d}.index").stat().st_size == 8
    index.resize(4096)
    index.append(9, 300)
    assert index.lookup(9) == OffsetPosition(9, 300)
    for i in indexes:
        i.close()
    assert open_fds() == before and index.closed
