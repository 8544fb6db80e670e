"""The log cleaner when a swap fails halfway (the log dir goes offline, as Kafka's
LogDirFailureChannel), and when tombstones' delete horizons pass on a log with nothing dirty
(Kafka 3.9 selects logs by dirty ratio and max compaction lag only)."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest
from tests.unit.cleaner_support import T0, append, compacted_log, latest, records

from odradek.storage import Log
from odradek.storage.cleaner import CleanerConfig, LogCleaner, LogCleanerManager
from odradek.storage.cleaner import swap as swap_module


def _three_segment_log(path: Path) -> tuple[Log, dict[bytes | None, tuple[int, bytes | None]]]:
    log = compacted_log(path)
    for n in range(2):
        for i in range(30):
            append(log, [(b"k%d" % (i % 5), b"v%d-%d" % (n, i))], timestamp_ms=T0 + i)
        log.roll()
    append(log, [(b"active", b"x")])
    return log, latest(log)


def test_an_io_error_halfway_through_a_swap_takes_the_log_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, expected = _three_segment_log(tmp_path)
    assert log.num_segments == 3
    real = swap_module.rename_segment_files
    deleted: list[int] = []

    def failing(directory: str | os.PathLike[str], base: int, old: str, new: str) -> None:
        if new == swap_module.DELETED_SUFFIX:
            if deleted:  # the first old segment is already .deleted: fail on the second
                raise OSError(errno.EIO, "Input/output error")
            deleted.append(base)
        real(directory, base, old, new)

    monkeypatch.setattr(swap_module, "rename_segment_files", failing)
    failures: list[tuple[Path, str]] = []
    cleaner = LogCleaner(
        CleanerConfig(),
        lambda: [log],
        in_process=True,
        time_ms=lambda: T0,
        log_dir_failure=lambda d, msg: failures.append((d, msg)),
    )
    assert not asyncio.run(cleaner.clean_filthiest_log())
    assert len(failures) == 1 and failures[0][0] == tmp_path
    assert "Failed to clean up log for compacted-0" in failures[0][1] and "Input/output error" in failures[0][1]
    assert cleaner.cleans == 0 and cleaner.uncleanable_partitions_count == 1
    names = sorted(p.name for p in log.dir.iterdir())
    assert any(n.endswith(".log.swap") for n in names) and any(n.endswith(".log.deleted") for n in names)
    monkeypatch.undo()
    log.close()  # what LogManager.fail_dir does; the files stay for the next start
    reopened = compacted_log(tmp_path)  # recovery completes the swap
    names = [p.name for p in reopened.dir.iterdir()]
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert latest(reopened) == expected
    assert reopened.num_segments == 2 and reopened.log_end_offset == 61
    assert len(records(reopened)) == 6  # cleaned: the last value of each of the 5 keys, and the active one
    reopened.close()


def test_a_log_whose_tombstones_expired_is_cleaned_again_only_once_it_is_dirty(tmp_path: Path) -> None:
    """Kafka 3.9's grabFilthiestCompactedLog: a log qualifies by min.cleanable.dirty.ratio or
    max.compaction.lag.ms only; a passed delete horizon alone does not make it cleanable, and the
    tombstone goes at the next clean that dirty data triggers."""
    day = 86_400_000
    log = compacted_log(tmp_path, min_cleanable_dirty_ratio=0.5)
    for i in range(20):
        append(log, [(b"k%d" % (i % 4), b"v%d" % i)], timestamp_ms=T0 + i)
    append(log, [(b"k0", None)], timestamp_ms=T0 + 20)  # a tombstone
    log.roll()
    now = [T0]
    cleaner = LogCleaner(CleanerConfig(), lambda: [log], in_process=True, time_ms=lambda: now[0])
    assert asyncio.run(cleaner.clean_filthiest_log())  # first clean: the tombstone gets its horizon
    assert latest(log)[b"k0"][1] is None
    horizon = list(log.segments[0].scan_batches())[-1][1]  # the tombstone's batch
    assert horizon.has_delete_horizon_ms and horizon.base_timestamp == T0 + day
    now[0] = T0 + 2 * day  # the horizon has passed; nothing new was written
    manager = LogCleanerManager(lambda: [log])
    assert manager.grab_filthiest_log(now[0]) is None
    assert not asyncio.run(cleaner.clean_filthiest_log())
    assert b"k0" in latest(log)
    for i in range(8):  # new dirty data: the ratio passes 0.5
        append(log, [(b"k%d" % (1 + i % 3), b"w%d" % i)], timestamp_ms=now[0])
    log.roll()
    assert asyncio.run(cleaner.clean_filthiest_log())
    assert b"k0" not in latest(log) and sorted(k for k in latest(log) if k) == [b"k1", b"k2", b"k3"]
