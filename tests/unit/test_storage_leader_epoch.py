"""The leader epoch cache: Kafka's endOffsetFor answers, truncation, and the checkpoint file."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.storage.leader_epoch import CHECKPOINT_FILE, LeaderEpochFileCache


def cache_with(tmp_path: Path, entries: list[tuple[int, int]]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (-1, (-1, -1)),
        (0, (0, 5)),  # below the earliest epoch (1): the earliest start offset
        (1, (1, 10)),
        (2, (1, 10)),  # no entry for 2: the epoch below it, ended where 3 started
        (3, (3, 20)),
        (4, (4, 100)),  # the latest epoch: the log end offset
        (5, (-1, -1)),  # above the latest
    ],
)
def test_end_offset_for(tmp_path: Path, epoch: int, expected: tuple[int, int]) -> None:
    cache = cache_with(tmp_path, [(1, 5), (3, 10), (4, 20)])
    assert cache.end_offset_for(epoch, 100) == expected


def test_file_is_kafkas_format_and_reloads(tmp_path: Path) -> None:
    cache_with(tmp_path, [(0, 0), (3, 1042)])
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n3 1042\n"
    assert LeaderEpochFileCache(tmp_path).entries == [(0, 0), (3, 1042)]


def test_assign_ignores_the_latest_epoch_and_drops_conflicts(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(1, 0), (2, 10), (2, 15)])
    assert cache.entries == [(1, 0), (2, 10)]
    cache.assign(2, 8)  # same epoch, earlier start: the old entry was a stale leader's
    assert cache.entries == [(1, 0), (2, 8)]
    cache.assign(5, 3)  # starts before epoch 2's start: 2 conflicts
    assert cache.entries == [(1, 0), (5, 3)]


def test_truncation_from_both_ends(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(1, 0), (2, 10), (4, 20), (6, 30)])
    cache.truncate_from_end(20)
    assert cache.entries == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(2, 12)]
    cache.truncate_from_start(5)  # before the earliest entry: nothing to move
    assert cache.entries == [(2, 12)]
    assert LeaderEpochFileCache(tmp_path).entries == [(2, 12)]


def test_unreadable_file_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / CHECKPOINT_FILE).write_text("0\n3\n1 0\n")
    assert LeaderEpochFileCache(tmp_path).entries == []
    assert "ignoring unreadable" in caplog.text
