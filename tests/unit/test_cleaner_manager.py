"""Log selection, checkpoints and uncleanable partitions of the log cleaner (Kafka's
LogCleanerManager), cleaning in-process."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from tests.unit.cleaner_support import T0, append, compacted_log, latest
from tests.unit.storage_support import Clock

from odradek.storage import Log
from odradek.storage.cleaner import CLEANER_OFFSET_CHECKPOINT, CleanerConfig, LogCleaner, LogCleanerManager
from odradek.storage.cleaner.offsets import cleanable_offsets

HOUR = 3_600_000


def dirty_log(path: Path, topic: str, duplicates: int, clock: Clock | None = None, **props: object) -> Log:
    """A compacted log ``<topic>-0`` in ``path`` of 10 keys written ``duplicates`` times each,
    rolled (all cleanable)."""
    log = compacted_log(path, clock, topic=topic, **props)
    for i in range(10 * duplicates):
        append(log, [(b"k%d" % (i % 10), b"v%d" % i)], timestamp_ms=T0 + i)
    log.roll()
    return log


def test_dirtiest_compacted_log_above_its_ratio_is_chosen(tmp_path: Path) -> None:
    a = dirty_log(tmp_path, "a", 2)
    b = dirty_log(tmp_path, "b", 5)
    plain = dirty_log(tmp_path, "c", 9, cleanup_policy="delete")
    manager = LogCleanerManager(lambda: [a, b, plain])
    chosen = manager.grab_filthiest_log(T0)
    assert chosen is not None and chosen.log is a  # both fully dirty (ratio 1.0): the first at the same ratio
    assert chosen.cleanable_ratio == 1.0 and chosen.first_dirty_offset == 0 and chosen.first_uncleanable_offset == 20
    chosen2 = manager.grab_filthiest_log(T0)
    assert chosen2 is not None and chosen2.log is b  # a is in progress
    assert manager.grab_filthiest_log(T0) is None  # the delete-only log is never offered
    manager.done_cleaning(a, 20)
    assert (a.dir.parent / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n1\na 0 20\n"
    assert manager.all_cleaner_checkpoints()[a.topic_partition] == 20


def test_a_log_below_its_dirty_ratio_is_not_chosen(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, min_cleanable_dirty_ratio=0.5)
    for i in range(30):
        append(log, [(b"k%d" % i, b"v" * 50)])
    log.roll()
    append(log, [(b"k0", b"w")])
    log.roll()
    manager = LogCleanerManager(lambda: [log])
    manager.update_checkpoint(log.dir.parent, log.topic_partition, 30)
    assert cleanable_offsets(log, 30, T0, log.high_watermark) == (30, 31, False)
    assert manager.grab_filthiest_log(T0) is None
    assert 0 < manager.dirtiest_ratio < 0.1


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=HOUR)
    for i in range(10):
        append(log, [(b"k%d" % i, b"v")], timestamp_ms=T0)
    log.roll()
    for i in range(2):
        append(log, [(b"k%d" % i, b"w")], timestamp_ms=T0 + 1)
    log.roll()
    manager = LogCleanerManager(lambda: [log])
    manager.update_checkpoint(log.dir.parent, log.topic_partition, 10)
    assert manager.grab_filthiest_log(T0 + 2) is None  # dirty ratio well below 0.99
    chosen = manager.grab_filthiest_log(T0 + HOUR + 10)
    assert chosen is not None and chosen.needs_compaction_now and chosen.first_dirty_offset == 10
    assert manager.max_compaction_delay_ms == 9


def test_checkpoint_beyond_the_log_end_is_reset(tmp_path: Path) -> None:
    log = dirty_log(tmp_path, "t", 2)
    manager = LogCleanerManager(lambda: [log])
    manager.update_checkpoint(log.dir.parent, log.topic_partition, 500)  # e.g. the log was truncated
    chosen = manager.grab_filthiest_log(T0)
    assert chosen is not None and chosen.first_dirty_offset == 0
    assert manager.all_cleaner_checkpoints()[log.topic_partition] == 0


def test_upper_bound_is_the_last_stable_offset(tmp_path: Path) -> None:
    log = dirty_log(tmp_path, "t", 3)
    manager = LogCleanerManager(lambda: [log], last_stable_offset=lambda _log: 7)
    chosen = manager.grab_filthiest_log(T0)
    assert chosen is not None and chosen.first_uncleanable_offset == 7


def test_corrupt_log_becomes_uncleanable_and_others_are_still_cleaned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = dirty_log(tmp_path, "bad", 4)
    good = dirty_log(tmp_path, "good", 2)
    path = bad.segments[0].log_path
    data = bytearray(path.read_bytes())
    data[66] ^= 0xFF
    path.write_bytes(bytes(data))
    before_bad = path.read_bytes()
    cleaner = LogCleaner(CleanerConfig(), lambda: [bad, good], in_process=True, time_ms=lambda: T0)

    async def run() -> None:
        with caplog.at_level(logging.ERROR, logger="odradek.storage.cleaner"):
            assert not await cleaner.clean_filthiest_log()  # the corrupt one, chosen first (dirtier)
        assert cleaner.uncleanable_partitions_count == 1
        assert cleaner.uncleanable_partitions_count_by_dir() == {tmp_path: 1}
        assert "Marking its partition (bad-0) as uncleanable" in caplog.text
        assert await cleaner.clean_filthiest_log()
        assert not await cleaner.clean_filthiest_log()  # nothing left: the corrupt log is skipped

    asyncio.run(run())
    assert path.read_bytes() == before_bad
    assert len(latest(good)) == 10 and good.size_in_bytes < 20 * 70
    assert cleaner.cleans == 1 and cleaner.last_stats is not None and cleaner.last_stats.records_retained == 10
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n1\ngood 0 20\n"


def test_truncation_below_the_checkpoint_lowers_it(tmp_path: Path) -> None:
    log = dirty_log(tmp_path, "t", 3)
    manager = LogCleanerManager(lambda: [log])
    manager.update_checkpoint(log.dir.parent, log.topic_partition, 30)
    log.truncate_to(12)
    for i in range(30):
        append(log, [(b"k%d" % (i % 10), b"new")])
    log.roll()
    chosen = manager.grab_filthiest_log(T0)
    assert chosen is not None and chosen.first_dirty_offset == 12
    assert manager.all_cleaner_checkpoints()[log.topic_partition] == 12
    assert log.take_truncation_point() is None


def test_an_uncleanable_log_is_tried_again_once_reloaded(tmp_path: Path) -> None:
    log = dirty_log(tmp_path, "t", 2)
    current = [log]
    manager = LogCleanerManager(lambda: current)
    manager.mark_uncleanable(log)
    assert manager.grab_filthiest_log(T0) is None and manager.uncleanable_partitions_count == 1
    log.close()
    current[0] = reloaded = compacted_log(tmp_path, topic="t")
    reloaded.high_watermark = reloaded.log_end_offset
    chosen = manager.grab_filthiest_log(T0)
    assert chosen is not None and chosen.log is reloaded and manager.uncleanable_partitions_count == 0


def test_deleting_a_log_drops_its_cleaner_checkpoint(tmp_path: Path) -> None:
    from tests.unit.storage_support import log_config

    from odradek.storage import LogManager, TopicPartition

    lm = LogManager([tmp_path], log_config(cleanup_policy="compact"))
    a, b = TopicPartition("a", 0), TopicPartition("b", 0)
    lm.get_or_create_log(a)
    lm.get_or_create_log(b)
    manager = LogCleanerManager(lm.all_logs)
    manager.update_checkpoint(tmp_path, a, 5)
    manager.update_checkpoint(tmp_path, b, 7)
    lm.delete_log(a)
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n1\nb 0 7\n"
    lm.shutdown()


def test_cleaner_config_from_broker_keys() -> None:
    from odradek.server.config import BROKER_CONFIGS

    defaults = BROKER_CONFIGS.defaults()
    config = CleanerConfig.from_props(defaults)
    assert config == CleanerConfig()
    assert config.map_capacity_bytes == int(134217728 * 0.9)
    assert config.io_bytes_per_second_per_thread == float("inf")
    tuned = CleanerConfig.from_props(
        {
            **defaults,
            "log.cleaner.threads": 2,
            "log.cleaner.dedupe.buffer.size": 1000,
            "log.cleaner.io.max.bytes.per.second": 10.0,
        }
    )
    assert (tuned.num_threads, tuned.map_capacity_bytes, tuned.io_bytes_per_second_per_thread) == (2, 450, 5.0)
    assert not CleanerConfig.from_props({"log.cleaner.threads": 0}).enable_cleaner


def test_io_max_bytes_per_second_throttles_a_clean(tmp_path: Path) -> None:
    import time

    from odradek.storage.cleaner import clean_log

    log = dirty_log(tmp_path, "t", 20)
    size = log.size_in_bytes
    rate = size / 0.3  # the map pass and the rewrite each read the log once: >= 0.6 s in all
    start = time.monotonic()
    clean_log(log, now_ms=T0, config=CleanerConfig(max_io_bytes_per_second=rate))
    assert time.monotonic() - start >= 0.5
