"""LogManager: directories, checkpoints, retention and flush across logs, deletion."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from odradek.errors import InvalidTopicError, KafkaStorageError
from odradek.protocol.records import Record, build_batch
from odradek.storage import LogManager, TopicPartition
from odradek.storage.checkpoint import OffsetCheckpointFile

from .storage_support import Clock, log_config


def batch(n: int = 1, ts: int = 1_700_000_000_000) -> bytes:
    return build_batch([Record(b"k", b"v" * 50, timestamp_ms=ts)] * n)


def test_logs_spread_over_dirs_and_reload(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, log_config())
    lm.load_logs()
    tps = [TopicPartition("t", p) for p in range(4)] + [TopicPartition("my-topic.v2", 0)]
    for tp in tps:
        lm.get_or_create_log(tp).append_as_leader(batch(tp.partition + 1))
    assert lm.get_or_create_log(tps[0]) is lm.get_log(tps[0])
    assert {log.dir.parent for log in lm.all_logs()} == set(dirs)
    assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.is_dir()) != []
    (tmp_path / "a" / "not-a-partition").mkdir()
    (tmp_path / "b" / "lost+found").mkdir()
    lm.shutdown()
    lm2 = LogManager(dirs, log_config())
    lm2.load_logs()
    assert sorted(log.topic_partition for log in lm2.all_logs()) == sorted(tps)
    assert lm2.get_log(TopicPartition("t", 3)) is not None
    assert lm2.get_log(TopicPartition("t", 3)).log_end_offset == 4  # type: ignore[union-attr]
    assert TopicPartition("my-topic.v2", 0) in lm2 and len(lm2) == 5
    lm2.shutdown()


def test_checkpoint_files_use_kafka_format(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], log_config())
    lm.load_logs()
    log = lm.get_or_create_log(TopicPartition("orders", 2))
    log.append_as_leader(batch(5))
    log.high_watermark = 4
    log.flush()
    lm.checkpoint()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\norders 2 4\n"
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 2 5\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\norders 2 0\n"
    assert not list(tmp_path.glob("*.tmp"))
    lm.shutdown()


def test_checkpoint_file_read_and_malformed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ckpt = OffsetCheckpointFile(tmp_path / "x")
    assert ckpt.read() == {}
    ckpt.write({TopicPartition("a-b", 1): 7, TopicPartition("c", 0): 0})
    assert ckpt.read() == {TopicPartition("a-b", 1): 7, TopicPartition("c", 0): 0}
    (tmp_path / "x").write_text("0\n3\na 1 2\n")
    assert ckpt.read() == {}
    assert "Malformed" in caplog.text


def test_log_start_offset_and_high_watermark_survive_restart(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], log_config(segment_bytes=400))
    lm.load_logs()
    tp = TopicPartition("orders", 0)
    log = lm.get_or_create_log(tp)
    for _ in range(10):
        log.append_as_leader(batch())
    log.high_watermark = 8
    log.delete_records(5)
    lm.shutdown()
    lm2 = LogManager([tmp_path], log_config(segment_bytes=400))
    lm2.load_logs()
    log2 = lm2.get_log(tp)
    assert log2 is not None
    assert (log2.log_start_offset, log2.high_watermark, log2.log_end_offset) == (5, 8, 10)
    lm2.shutdown()


def test_cleanup_and_flush_dirty_logs(tmp_path: Path) -> None:
    clock = Clock()
    lm = LogManager([tmp_path], log_config(retention_ms=1000, flush_ms=5000), time_ms=clock)
    lm.load_logs()
    logs = [lm.get_or_create_log(TopicPartition("t", p)) for p in range(2)]
    for log in logs:
        for _ in range(3):
            log.append_as_leader(batch(ts=clock.now))
            log.roll()
        log.high_watermark = log.log_end_offset
    assert lm.flush_dirty_logs(clock.now) == 2  # the rolled segments
    assert all(log.recovery_point == 3 for log in logs)
    logs[0].append_as_leader(batch(ts=clock.now))
    assert lm.flush_dirty_logs(clock.now + 1000) == 0
    assert lm.flush_dirty_logs(clock.now + 6000) == 2
    assert logs[0].recovery_point == 4
    assert lm.cleanup_logs(clock.now + 2000) == 6
    assert [log.log_start_offset for log in logs] == [3, 3]
    lm.shutdown()


def test_flush_messages(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], log_config(flush_messages=3))
    log = lm.get_or_create_log(TopicPartition("t", 0))
    log.append_as_leader(batch(2))
    assert log.recovery_point == 0
    log.append_as_leader(batch(1))
    assert log.recovery_point == 3
    lm.shutdown()


def test_delete_log(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], log_config())
    tp = TopicPartition("gone", 0)
    log = lm.get_or_create_log(tp)
    log.append_as_leader(batch())
    assert lm.delete_log(tp)
    assert not lm.delete_log(tp)
    assert not (tmp_path / "gone-0").exists()
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    (tmp_path / "old-1.abc-delete").mkdir()
    lm2 = LogManager([tmp_path], log_config())
    lm2.load_logs()
    assert not (tmp_path / "old-1.abc-delete").exists() and len(lm2) == 0
    lm.shutdown()
    lm2.shutdown()


def test_topic_names_are_validated(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], log_config())
    for bad in ("../etc", "a/b", "", ".", "x" * 250, "sp ace"):
        with pytest.raises(InvalidTopicError):
            lm.get_or_create_log(TopicPartition(bad, 0))
    with pytest.raises(InvalidTopicError):
        lm.get_or_create_log(TopicPartition("ok", -1))
    lm.shutdown()


def test_duplicate_partition_dirs_are_refused(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d / "t-0").mkdir(parents=True)
    lm = LogManager([tmp_path / "a", tmp_path / "b"], log_config())
    with pytest.raises(KafkaStorageError, match="Duplicate"):
        lm.load_logs()


def test_a_failed_dir_goes_offline_and_the_others_keep_working(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, log_config())
    lm.load_logs()
    failures: list[tuple[Path, list[TopicPartition]]] = []
    lm.on_dir_failure = lambda d, tps: failures.append((d, tps))
    tps = [TopicPartition("t", p) for p in range(4)]
    for tp in tps:
        lm.get_or_create_log(tp).append_as_leader(batch())
    in_b = sorted(tp for tp in tps if lm.dir_of(tp) == dirs[1])
    (dirs[1]).rename(tmp_path / "b.moved")
    (dirs[1]).write_text("not a directory")
    lm.checkpoint()  # fails in b only
    assert lm.offline_dirs == {dirs[1]} and lm.online_dirs == [dirs[0]]
    assert failures == [(dirs[1], in_b)]
    assert all(lm.get_log(tp) is None for tp in in_b) and len(lm) == 4 - len(in_b)
    lm.checkpoint()  # again: nothing more to report
    assert len(failures) == 1
    new = lm.get_or_create_log(TopicPartition("new", 0))  # only the online dir takes new logs
    assert new.dir.parent == dirs[0]
    lm.shutdown()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()


def test_an_unusable_dir_at_start_is_offline_and_all_unusable_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    lm = LogManager([tmp_path / "file", tmp_path / "ok"], log_config())
    lm.load_logs()
    assert lm.offline_dirs == {tmp_path / "file"} and lm.online_dirs == [tmp_path / "ok"]
    lm.shutdown()
    with pytest.raises(KafkaStorageError, match="none of the log directories"):
        LogManager([tmp_path / "file"], log_config())


def test_a_log_copied_to_another_dir_replaces_the_original(tmp_path: Path) -> None:
    import shutil

    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, log_config())
    lm.load_logs()
    tp = TopicPartition("t", 0)
    log = lm.get_or_create_log(tp)
    log.append_as_leader(batch(5))
    source = log.dir
    other = next(d for d in dirs if d != source.parent)
    future = lm.future_dir(tp, other)
    assert future.name.startswith("t-0.") and future.name.endswith("-future")
    log.flush()
    shutil.copytree(source, future)
    moved = lm.replace_log(tp, future)
    assert moved.dir == other / "t-0" and moved.log_end_offset == 5 and lm.get_log(tp) is moved
    assert not source.exists() and log.closed
    assert moved.append_as_leader(batch()).first_offset == 5
    (dirs[0] / "t-9.0123-future").mkdir()  # a copy a crash interrupted
    lm.shutdown()
    lm2 = LogManager(dirs, log_config())
    lm2.load_logs()
    assert not (dirs[0] / "t-9.0123-future").exists() and lm2.get_log(tp).log_end_offset == 6  # type: ignore[union-attr]
    lm2.shutdown()


def test_create_logs_builds_many_on_threads_spread_over_dirs_and_leaves_the_odd_ones(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, log_config())
    lm.load_logs()
    wanted = {TopicPartition("t", p): log_config() for p in range(150)}
    wanted[TopicPartition("bad name", 0)] = log_config()  # left to get_or_create_log's precise error
    lm.preferred_dirs[TopicPartition("t", 149)] = dirs[1]  # a preferred dir: left to get_or_create_log

    async def run() -> int:
        with ThreadPoolExecutor(4) as pool:
            task = asyncio.create_task(lm.create_logs(wanted, pool))
            await asyncio.sleep(0)  # the creation is under way: those partitions are refused meanwhile
            with pytest.raises(KafkaStorageError, match="being created"):
                lm.get_or_create_log(TopicPartition("t", 0))
            return await task

    assert asyncio.run(run()) == 149
    assert TopicPartition("bad name", 0) not in lm and TopicPartition("t", 149) not in lm
    per_dir = sorted(sum(1 for log in lm.all_logs() if log.dir.parent == d) for d in dirs)
    assert per_dir == [74, 75]
    log = lm.get_or_create_log(TopicPartition("t", 7))
    log.append_as_leader(build_batch([Record(b"k", b"v")]))
    assert log.log_end_offset == 1
    with pytest.raises(InvalidTopicError):
        lm.get_or_create_log(TopicPartition("bad name", 0))
    lm.shutdown()
    reloaded = LogManager(dirs, log_config())
    reloaded.load_logs()
    assert len(reloaded.all_logs()) == 149
    reloaded.shutdown()
