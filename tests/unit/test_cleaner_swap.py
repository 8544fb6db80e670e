"""Recovery of an interrupted clean at load: ``.cleaned`` files are discarded, a ``.swap`` is
completed (it replaces exactly the segments of its range), ``.deleted`` files are removed."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.cleaner_support import T0, append, compacted_log, latest, records

from odradek.storage import Log
from odradek.storage.cleaner import CleanerConfig
from odradek.storage.cleaner.clean import apply_result, plan_clean
from odradek.storage.cleaner.segment_cleaner import CleanResult, run_clean
from odradek.storage.cleaner.swap import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, rename_segment_files


def _prepared(tmp_path: Path) -> tuple[Log, CleanResult, dict[bytes | None, tuple[int, bytes | None]]]:
    log = compacted_log(tmp_path)
    for i in range(60):
        append(log, [(b"k%d" % (i % 7), b"v%d" % i)])
        if i % 15 == 14:
            log.roll()
    append(log, [(b"tail", b"t")])
    expected = latest(log)
    plan = plan_clean(
        log, first_dirty_offset=0, upper_bound=log.active_segment.base_offset, now_ms=T0, config=CleanerConfig()
    )
    return log, run_clean(plan), expected


def _names(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir())


def test_cleaned_files_are_discarded_at_load(tmp_path: Path) -> None:
    log, result, expected = _prepared(tmp_path)
    assert [g.base_offset for g in result.groups] == [0]
    assert any(n.endswith(CLEANED_SUFFIX) for n in _names(log.dir))
    n_records = len(records(log))
    log.close()
    reopened = compacted_log(tmp_path)
    assert not any(n.endswith(CLEANED_SUFFIX) for n in _names(reopened.dir))
    assert len(records(reopened)) == n_records and latest(reopened) == expected


@pytest.mark.parametrize("old_renamed", [0, 2, 4])
def test_a_swap_is_completed_at_load(tmp_path: Path, old_renamed: int) -> None:
    log, _result, expected = _prepared(tmp_path)
    olds = [s.base_offset for s in log.segments[:-1]]
    assert olds == [0, 15, 30, 45]
    log.close()
    rename_segment_files(log.dir, 0, CLEANED_SUFFIX, SWAP_SUFFIX)
    for base in olds[:old_renamed]:  # a crash while the old segments were being renamed
        rename_segment_files(log.dir, base, "", DELETED_SUFFIX)
    (log.dir / "00000000000000000030.snapshot").write_bytes(b"producer state")
    reopened = compacted_log(tmp_path)
    assert (log.dir / "00000000000000000030.snapshot").exists()  # not a segment file
    assert [s.base_offset for s in reopened.segments] == [0, 60]
    assert not any(n.endswith((SWAP_SUFFIX, DELETED_SUFFIX)) for n in _names(reopened.dir))
    assert latest(reopened) == expected and len(records(reopened)) == len(expected)
    reopened.segments[0].sanity_check()  # indexes rebuilt


def test_apply_discards_a_clean_whose_segments_changed(tmp_path: Path) -> None:
    log, result, _expected = _prepared(tmp_path)
    plan = plan_clean(
        log, first_dirty_offset=0, upper_bound=log.active_segment.base_offset, now_ms=T0, config=CleanerConfig()
    )
    log.truncate_to(40)  # e.g. a follower truncating meanwhile
    assert not apply_result(log, plan, result)
    assert not any(n.endswith(CLEANED_SUFFIX) for n in _names(log.dir))
    assert [r.offset for r in records(log)] == list(range(40))
