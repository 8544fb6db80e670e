"""Partition rules on a real log: high watermark = min ISR log end offset (never moving back), ISR
shrink and expand (counted and reported once written), the min ISR check and acks=all completion,
follower appends and truncation with the leader epoch cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.errors import ErrorCode, NotEnoughReplicasError
from odradek.replication.partition import ISR_EXPANDS, ISR_SHRINKS, Partition, PartitionState
from odradek.storage import Log, TopicPartition

from .replication_fakes import TP, IsrWrites, batch
from .storage_support import log_config


def leader(tmp_path: Path, isr: list[int], writes: IsrWrites | None = None, min_isr: int = 1) -> Partition:
    log = Log(tmp_path / "t-0", log_config(min_insync_replicas=min_isr))
    p = Partition(TP, 1, log, PartitionState(-1, -1, [], []), replica_lag_time_max_ms=1000, isr_writer=writes)
    p.make_leader(PartitionState(1, 5, isr, [1, 2, 3]), now_ms=0)
    return p


def test_high_watermark_is_the_smallest_isr_log_end_offset(tmp_path: Path) -> None:
    async def run() -> None:
        p = leader(tmp_path, [1, 2, 3])
        p.log.append_as_leader(batch(10), 5)
        assert not p.maybe_increment_high_watermark()  # followers' offsets unknown
        p.update_follower_fetch_state(2, 10, now_ms=1)
        assert p.high_watermark == 0
        p.update_follower_fetch_state(3, 4, now_ms=1)
        assert p.high_watermark == 4
        p.update_follower_fetch_state(3, 10, now_ms=2)
        assert p.high_watermark == 10

    asyncio.run(run())


def test_acks_all_waits_for_the_isr(tmp_path: Path) -> None:
    async def run() -> None:
        p = leader(tmp_path, [1, 2], min_isr=2)
        p.log.append_as_leader(batch(3), 5)
        waiter = p.wait_for_offset(3)
        p.update_follower_fetch_state(2, 2, now_ms=1)
        await asyncio.sleep(0)
        assert not waiter.done()
        p.update_follower_fetch_state(2, 3, now_ms=2)
        assert await waiter == ErrorCode.none
        stale = p.wait_for_offset(100)
        p.make_follower(PartitionState(2, 6, [2], [1, 2, 3]))
        assert await stale == ErrorCode.not_leader_or_follower

    asyncio.run(run())


def test_lagging_follower_leaves_the_isr_and_the_high_watermark_moves(tmp_path: Path) -> None:
    async def run() -> None:
        writes = IsrWrites()
        p = leader(tmp_path, [1, 2, 3], writes, min_isr=2)
        p.log.append_as_leader(batch(5), 5)
        p.update_follower_fetch_state(2, 5, now_ms=100)
        p.update_follower_fetch_state(3, 1, now_ms=100)  # behind since it was made leader at 0
        waiter = p.wait_for_offset(5)
        p.maybe_shrink_isr(now_ms=900)
        assert p.out_of_sync_replicas(900) == []
        p.update_follower_fetch_state(2, 5, now_ms=1400)  # 2 keeps fetching at the end of the log
        p.maybe_shrink_isr(now_ms=1500)
        await asyncio.sleep(0.01)
        assert writes.written == [[1, 2]]
        assert p.state.isr == [1, 2] and p.state.zk_version == 1
        assert p.high_watermark == 5
        assert await waiter == ErrorCode.none  # 2 in ISR >= min.insync.replicas

    asyncio.run(run())


def test_follower_rejoins_when_it_reaches_the_high_watermark(tmp_path: Path) -> None:
    async def run() -> None:
        writes = IsrWrites()
        p = leader(tmp_path, [1, 2], writes)
        p.log.append_as_leader(batch(4), 5)
        p.update_follower_fetch_state(2, 4, now_ms=1)
        assert p.high_watermark == 4
        p.update_follower_fetch_state(3, 2, now_ms=2)
        await asyncio.sleep(0.01)
        assert writes.written == []
        p.update_follower_fetch_state(3, 4, now_ms=3)
        await asyncio.sleep(0.01)
        assert writes.written == [[1, 2, 3]] and p.state.isr == [1, 2, 3]

    asyncio.run(run())


def test_isr_write_against_a_moved_znode_is_dropped(tmp_path: Path) -> None:
    async def run() -> None:
        writes = IsrWrites(version=7)  # the controller rewrote the state meanwhile
        p = leader(tmp_path, [1, 2, 3], writes)
        p.update_follower_fetch_state(2, 0, now_ms=1)
        p.maybe_shrink_isr(now_ms=5000)
        await asyncio.sleep(0.01)
        assert writes.written == [] and p.state.isr == [1, 2, 3]

    asyncio.run(run())


def test_follower_append_records_epochs_and_truncation_drops_them(tmp_path: Path) -> None:
    leader_log = Log(tmp_path / "leader" / "t-0", log_config())
    leader_log.append_as_leader(batch(2), 3)
    leader_log.append_as_leader(batch(2), 4)
    data = leader_log.read(0, 1 << 20, None, True).records_bytes()
    follower = Partition(TP, 2, Log(tmp_path / "f" / "t-0", log_config()), PartitionState(-1, -1, [], []))
    follower.make_follower(PartitionState(1, 4, [1, 2], [1, 2]))
    follower.append_records_as_follower(data)
    assert follower.log.log_end_offset == 4
    assert follower.epoch_cache is not None and follower.epoch_cache.entries == [(3, 0), (4, 2)]
    assert follower.epoch_cache.end_offset_for(3, 4) == (3, 2)
    follower.truncate_to(2)
    assert follower.log.log_end_offset == 2 and follower.epoch_cache.entries == [(3, 0)]
    follower.update_follower_high_watermark(10)
    assert follower.high_watermark == 2


def test_truncation_at_the_log_end_drops_an_epoch_led_without_writing(tmp_path: Path) -> None:
    p = leader(tmp_path, [1])
    p.log.append_as_leader(batch(3), 5)
    p.make_leader(PartitionState(1, 7, [1], [1, 2, 3]), now_ms=0)  # led epoch 7, wrote nothing
    assert p.epoch_cache is not None and p.epoch_cache.latest_epoch == 7
    p.make_follower(PartitionState(2, 6, [2], [1, 2, 3]))
    p.truncate_to(p.log.log_end_offset)
    assert p.epoch_cache.latest_epoch == 5 and p.log.log_end_offset == 3


def test_a_leader_staying_leader_under_a_new_epoch_keeps_its_followers_positions(tmp_path: Path) -> None:
    """The controller drops a departing follower from the ISR with a new leader epoch: the high
    watermark moves with the remaining ISR at once, the waiting acks=all write completes and a
    long-polling fetch is woken (its old epoch is now fenced)."""

    async def run() -> None:
        p = leader(tmp_path, [1, 2, 3], min_isr=2)
        p.log.append_as_leader(batch(4), 5)
        p.update_follower_fetch_state(2, 4, now_ms=1)
        p.update_follower_fetch_state(3, 1, now_ms=1)
        assert p.high_watermark == 1
        waiter = p.wait_for_offset(4)
        parked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        p.add_waiter(parked, follower=True)
        assert p.make_leader(PartitionState(1, 6, [1, 2], [1, 2, 3]), now_ms=2)
        assert p.high_watermark == 4
        assert await waiter == ErrorCode.none
        assert parked.done()
        assert p.followers[3].log_end_offset == 1

    asyncio.run(run())


def test_acks_all_is_refused_below_min_insync_replicas_before_the_append(tmp_path: Path) -> None:
    p = leader(tmp_path, [1], min_isr=2)
    assert p.min_insync_replicas == 2
    with pytest.raises(NotEnoughReplicasError):
        p.check_enough_replicas(-1)
    p.check_enough_replicas(1)  # acks=1 and acks=0 do not wait for the ISR
    p.check_enough_replicas(0)
    p.make_leader(PartitionState(1, 6, [1, 2], [1, 2, 3]), now_ms=0)
    p.check_enough_replicas(-1)


def test_an_acks_all_wait_reached_with_a_short_isr_is_not_enough_replicas_after_append(tmp_path: Path) -> None:
    async def run() -> None:
        p = leader(tmp_path, [1, 2], min_isr=2)
        p.log.append_as_leader(batch(3), 5)
        waiter = p.wait_for_offset(3)
        p.make_leader(PartitionState(1, 6, [1], [1, 2, 3]), now_ms=1)  # the controller shrank the ISR
        assert p.high_watermark == 3
        assert await waiter == ErrorCode.not_enough_replicas_after_append

    asyncio.run(run())


def test_the_high_watermark_never_moves_back(tmp_path: Path) -> None:
    p = leader(tmp_path, [1, 2])
    p.log.append_as_leader(batch(4), 5)
    p.update_follower_fetch_state(2, 4, now_ms=1)
    assert p.high_watermark == 4
    p.update_follower_fetch_state(2, 2, now_ms=2)  # a follower that truncated
    assert not p.maybe_increment_high_watermark()
    assert p.high_watermark == 4


def test_only_written_isr_changes_are_counted_and_reported(tmp_path: Path) -> None:
    async def run() -> None:
        writes = IsrWrites()
        changed: list[TopicPartition] = []
        counters = [0, 0, 0]
        p = leader(tmp_path, [1, 2], writes)
        p.on_isr_change, p.counters = changed.append, counters
        p.log.append_as_leader(batch(2), 5)
        p.update_follower_fetch_state(2, 2, now_ms=1)
        p.update_follower_fetch_state(3, 2, now_ms=1)  # caught up: joins
        await asyncio.sleep(0.01)
        assert p.state.isr == [1, 2, 3] and changed == [TP]
        assert counters[ISR_EXPANDS] == 1 and counters[ISR_SHRINKS] == 0
        writes.version = 40  # the controller moved the znode to another version
        p.maybe_shrink_isr(now_ms=5000)
        await asyncio.sleep(0.01)
        assert p.state.isr == [1, 2, 3] and changed == [TP]  # not written: not reported
        assert counters[ISR_SHRINKS] == 0

    asyncio.run(run())
