"""Recovery at open: torn and corrupt tails, bad and missing indexes, clean-shutdown marker."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.records import Record, build_batch, iter_batches
from odradek.storage import Log, LogConfig, LogManager, TopicPartition
from odradek.storage.leader_epoch import CHECKPOINT_FILE, LeaderEpochFileCache
from odradek.storage.log_loader import CLEAN_SHUTDOWN_FILE

TP = TopicPartition("orders", 0)


def config(**props: Any) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})


CFG = config(segment_bytes=2000, index_interval_bytes=100)


def batch(i: int) -> bytes:
    return build_batch([Record(b"k%d" % i, b"value-%d" % i * 5, timestamp_ms=1_700_000_000_000 + i)] * 2)


def filled_log(path: Path, batches: int = 60) -> Log:
    log = Log(path / "orders-0", CFG)
    for i in range(batches):
        log.append_as_leader(batch(i))
    return log


def reopen(path: Path, clean: bool = False, **kw: Any) -> Log:
    return Log(path / "orders-0", CFG, had_clean_shutdown=clean, **kw)


def assert_reads_everything(log: Log) -> None:
    for offset in range(log.log_start_offset, log.log_end_offset):
        info = log.read(offset, 1)
        first = next(iter_batches(info.records_bytes()))[1]
        assert first.base_offset <= offset <= first.last_offset


def test_clean_reopen_keeps_everything(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    end, segments = log.log_end_offset, log.num_segments
    log.close()
    with caplog.at_level(logging.INFO, logger="odradek.storage"):
        log = reopen(tmp_path, clean=True)
    assert (log.log_end_offset, log.num_segments) == (end, segments)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and _storage(r)]
    assert_reads_everything(log)
    assert log.append_as_leader(batch(99)).first_offset == end
    log.close()


def _storage(record: logging.LogRecord) -> bool:
    """The storage layer's own records (another test's background thread in the same worker may
    log meanwhile)."""
    return record.name.startswith("odradek.storage")


def test_truncated_tail_is_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    end = log.log_end_offset
    active = log.active_segment.log_path
    size = active.stat().st_size
    last_batch = len(batch(59))
    log.close()
    os.truncate(active, size - 7)  # a torn write
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        log = reopen(tmp_path)
    assert log.log_end_offset == end - 2
    assert active.stat().st_size == size - last_batch
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and _storage(r)]
    assert "orders-0" in warning and active.name in warning
    assert f"position {size - last_batch}" in warning and f"Truncated {last_batch - 7}" in warning
    assert_reads_everything(log)
    assert log.append_as_leader(batch(1)).first_offset == end - 2
    log.close()


def test_flipped_byte_in_tail_segment(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    assert log.num_segments >= 3
    seg = log.active_segment
    positions = [(p, h) for p, h in iter_batches(seg.log_path.read_bytes())]
    pos, h = positions[len(positions) // 2]
    log.close()
    with open(seg.log_path, "r+b") as f:
        f.seek(pos + 70)
        byte = f.read(1)
        f.seek(pos + 70)
        f.write(bytes([byte[0] ^ 0x10]))
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        log = reopen(tmp_path)
    assert log.log_end_offset == h.base_offset
    assert log.active_segment.size == pos
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and _storage(r)]
    assert any("CRC mismatch" in m and f"position {pos}" in m and "orders-0" in m for m in messages)
    assert_reads_everything(log)
    log.close()


def test_corruption_in_middle_segment_drops_later_segments(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    first = log.segments[0]
    later = [s.log_path for s in log.segments[1:]]
    log.close()
    with open(first.log_path, "r+b") as f:
        f.seek(300)
        f.write(b"\xff\xff\xff\xff")
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        log = reopen(tmp_path, recovery_point=0)
    assert log.num_segments == 1
    assert not any(p.exists() for p in later)
    assert any("Deleting segment" in r.getMessage() for r in caplog.records)
    assert_reads_everything(log)
    log.close()


def test_recovery_point_limits_recovery(tmp_path: Path) -> None:
    log = filled_log(tmp_path)
    second_base = log.segments[1].base_offset
    first = log.segments[0].log_path
    log.close()
    with open(first, "r+b") as f:  # damage below the recovery point: not rescanned
        f.seek(300)
        f.write(b"\xff")
    log = reopen(tmp_path, recovery_point=second_base + 1)
    assert log.segments[0].size == first.stat().st_size
    assert log.recovery_point == second_base + 1
    log.close()


def test_corrupt_index_is_rebuilt_even_after_clean_shutdown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    seg = log.segments[1]
    entries = seg.offset_index.entries
    assert entries >= 3
    log.close()
    data = bytearray(seg.index_path.read_bytes())
    data[8:16], data[16:24] = data[16:24], data[8:16]  # entries out of order
    seg.index_path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        log = reopen(tmp_path, clean=True)
    assert any("corrupt index" in r.getMessage() and seg.log_path.name in r.getMessage() for r in caplog.records)
    rebuilt = log.segments[1].offset_index
    rebuilt.sanity_check()
    assert rebuilt.entries == entries
    assert_reads_everything(log)
    log.close()


def test_index_with_odd_size_or_wrong_positions_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    seg0, seg1 = log.segments[0], log.segments[1]
    log.close()
    with open(seg0.index_path, "ab") as f:
        f.write(b"\x00\x01\x02")
    data = bytearray(seg1.index_path.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, len(data) - 8)
    struct.pack_into(">ii", data, len(data) - 8, rel, pos + 5)  # sane-looking, points mid-batch
    seg1.index_path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        log = reopen(tmp_path, clean=True)
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert seg0.log_path.name in warned and seg1.log_path.name in warned
    assert seg0.index_path.stat().st_size % 8 == 0
    assert_reads_everything(log)
    log.close()


def test_stale_but_sane_index_is_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    seg = log.segments[0]
    log.close()
    data = seg.index_path.read_bytes()
    seg.index_path.write_bytes(data[:8])  # fewer entries than it could have: still correct
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        log = reopen(tmp_path, clean=True)
    assert not caplog.records
    assert log.segments[0].offset_index.entries == 1
    assert_reads_everything(log)
    log.close()


def test_missing_indexes_are_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = filled_log(tmp_path)
    seg = log.segments[1]
    entries, tentries = seg.offset_index.entries, seg.time_index.entries
    log.close()
    seg.index_path.unlink()
    seg.time_index_path.unlink()
    with caplog.at_level(logging.INFO, logger="odradek.storage"):
        log = reopen(tmp_path, clean=True)
    assert any("missing index" in r.getMessage() for r in caplog.records)
    assert seg.index_path.exists() and seg.time_index_path.exists()
    assert log.segments[1].offset_index.entries == entries
    assert log.segments[1].time_index.entries == tentries
    assert_reads_everything(log)
    assert log.fetch_offset_by_timestamp(1_700_000_000_030) == (60, 1_700_000_000_030)
    log.close()


def test_leftover_and_orphan_files_are_removed(tmp_path: Path) -> None:
    log = filled_log(tmp_path, batches=5)
    log.close()
    d = tmp_path / "orders-0"
    for name in ("00000000000000000000.log.deleted", "00000000000000000003.log.swap", "x.cleaned"):
        (d / name).write_bytes(b"junk")
    (d / "00000000000000000999.index").write_bytes(b"\0" * 8)
    (d / "partition.metadata").write_text("keep me")
    log = reopen(tmp_path, clean=True)
    names = sorted(os.listdir(d))
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "partition.metadata",
    ]
    log.close()


def test_crash_without_close_recovers_preallocated_indexes(tmp_path: Path) -> None:
    log = filled_log(tmp_path)
    end = log.log_end_offset
    active = log.active_segment
    assert active.index_path.stat().st_size == CFG.segment_index_bytes  # preallocated, never trimmed
    # abandon the log without closing it, like a crash
    log2 = reopen(tmp_path)
    assert log2.log_end_offset == end
    assert_reads_everything(log2)
    log2.close()


def manager(root: Path, **props: Any) -> LogManager:
    return LogManager([root / "d1", root / "d2"], config(**props))


def test_clean_shutdown_marker_is_honoured(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lm = manager(tmp_path, index_interval_bytes=100)
    lm.load_logs()
    log = lm.get_or_create_log(TP)
    for i in range(20):
        log.append_as_leader(batch(i))
    log.high_watermark = log.log_end_offset
    end = log.log_end_offset
    data_path = log.active_segment.log_path
    lm.shutdown()
    marker = data_path.parent.parent / CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    size = data_path.stat().st_size
    with open(data_path, "r+b") as f:  # damage a value byte: only a CRC scan would notice
        f.seek(size - 5)
        f.write(b"\xee")
    lm2 = manager(tmp_path, index_interval_bytes=100)
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        lm2.load_logs()
    assert not marker.exists()  # removed once loaded
    log2 = lm2.get_log(TP)
    assert log2 is not None and log2.log_end_offset == end and data_path.stat().st_size == size
    assert log2.high_watermark == end
    assert not caplog.records  # trusted: no recovery after a clean shutdown
    # lm2 "crashes": no shutdown, so the next start recovers and finds the damage
    lm3 = manager(tmp_path, index_interval_bytes=100)
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        lm3.load_logs()
    log3 = lm3.get_log(TP)
    assert log3 is not None and log3.log_end_offset == end - 2
    assert any("CRC mismatch" in r.getMessage() for r in caplog.records)
    lm3.shutdown()


def _epochs_log(path: Path) -> tuple[Log, int]:
    """A log with epoch 1 from offset 0 and epoch 4 from ``mid``, flushed up to ``mid``."""
    log = Log(path / "orders-0", CFG)
    log.leader_epoch_cache.assign(1, 0)
    for i in range(20):
        log.append_as_leader(batch(i), leader_epoch=1)
    log.flush()
    mid = log.log_end_offset
    log.leader_epoch_cache.assign(4, mid)
    for i in range(20, 40):
        log.append_as_leader(batch(i), leader_epoch=4)
    return log, mid


def test_an_epoch_is_written_at_once_and_made_durable_before_the_recovery_point_moves(tmp_path: Path) -> None:
    log, mid = _epochs_log(tmp_path)
    cache = log.leader_epoch_cache
    assert cache.unsynced  # written and renamed, not fsynced: becoming leader costs no fsync
    assert LeaderEpochFileCache(log.dir).entries == [(1, 0), (4, mid)]
    log.flush()
    assert not cache.unsynced and log.recovery_point == log.log_end_offset
    log.leader_epoch_cache.assign(6, log.log_end_offset)
    log.close()  # a clean close makes it durable too
    assert not cache.unsynced


def test_recovery_assigns_the_epochs_a_crash_took_from_the_checkpoint(tmp_path: Path) -> None:
    log, mid = _epochs_log(tmp_path)
    end = log.log_end_offset
    checkpoint = log.dir / CHECKPOINT_FILE
    log.close()
    checkpoint.write_text("0\n1\n1 0\n")  # the unsynced change lost in a crash: epoch 4 gone
    log = reopen(tmp_path, recovery_point=mid)
    assert log.leader_epoch_cache.entries == [(1, 0), (4, mid)]
    assert log.leader_epoch_cache.end_offset_for(1, end) == (1, mid)
    log.close()


def test_an_unreadable_checkpoint_is_rebuilt_from_every_segment(tmp_path: Path) -> None:
    log, mid = _epochs_log(tmp_path)
    log.flush()
    checkpoint = log.dir / CHECKPOINT_FILE
    log.close()
    checkpoint.write_text("0\n2\n1 0\n")  # torn: two entries announced, one there
    log = reopen(tmp_path, clean=True, recovery_point=log.log_end_offset)
    assert log.leader_epoch_cache.entries == [(1, 0), (4, mid)]
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_an_empty_log_holds_one_descriptor_until_its_first_append(tmp_path: Path, clean: bool) -> None:
    def open_fds() -> int:
        """Descriptors open on files under ``tmp_path`` (other tests' threads may open others meanwhile)."""
        count = 0
        for fd in Path("/proc/self/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:  # closed meanwhile
                continue
            count += target.startswith(str(tmp_path))
        return count

    before = open_fds()
    logs = [Log(tmp_path / f"orders-{i}", CFG) for i in range(10)]
    created = open_fds() - before
    for log in logs:
        log.close()
    before = open_fds()
    logs = [Log(tmp_path / f"orders-{i}", CFG, had_clean_shutdown=clean) for i in range(10)]
    reopened = open_fds() - before
    log = logs[0]
    for i in range(3):  # one segment
        log.append_as_leader(batch(i))
    appended = open_fds() - before - reopened
    log.close()
    log = reopen(tmp_path.joinpath("orders-0").parent, clean=False)  # recovered from the files
    assert (created, reopened, appended) == (10, 10, 2)  # the .log each; the two index mappings once used
    assert log.log_end_offset == 6 and log.segments[0].offset_index.entries > 0
    assert_reads_everything(log)
    log.close()
    for other in logs[1:]:
        other.close()
