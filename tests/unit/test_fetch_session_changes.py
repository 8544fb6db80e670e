"""Incremental fetch sessions that read what changed: a session watching a real replica manager's
partitions reads, at each incremental fetch, only the partitions named, changed since their last
read, or not caught up then; an idle session's fetch reads none and its clock keeps the follower
in the ISR; a change between a read and its answer is not lost; a session leaving the cache stops
watching. Broker 1 leads ``t-0`` and ``t-1``; broker 2 is the follower fetching them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from odradek.replication.partition import PartitionState
from odradek.replication.replica_manager import FetchPartitionResult, FetchRequestPartition, ReplicaManager
from odradek.server.fetch_context import FetchManager, FullFetchContext, IncrementalFetchContext
from odradek.server.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache, PartitionData
from odradek.storage import LogManager, TopicPartition

from .replication_fakes import IsrWrites, RecordingFetchers, batch, settle
from .storage_support import log_config

LAG_MS = 1000
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
FOLLOWER = 2
ZERO = uuid.UUID(int=0)


def _run(tmp_path: Path, body: Callable[[ReplicaManager, FetchManager], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        rm = ReplicaManager(
            1,
            LogManager([tmp_path / "logs"], log_config()),
            lambda _topic: log_config(),
            io_threads=1,
            replica_lag_time_max_ms=LAG_MS,
            isr_writer=IsrWrites(),
        )
        rm.fetcher_manager = RecordingFetchers()  # type: ignore[assignment]
        for tp in (T0, T1):
            rm.make_leader_or_follower(tp, PartitionState(1, 1, [1, FOLLOWER], [1, FOLLOWER], 1, 0))
            rm.append_records(tp, batch(2), required_acks=1)
        manager = FetchManager(FetchSessionCache.sharded(100, 120000), rm.fetch_watchers)
        try:
            return await body(rm, manager)
        finally:
            rm.shutdown()
            rm.log_manager.shutdown()

    return asyncio.run(main())


def _data(rm: ReplicaManager, tp: TopicPartition) -> PartitionData:
    """The follower's request for ``tp``: at its log end offset (caught up with the leader)."""
    return PartitionData(tp.topic, ZERO, tp.partition, rm.partitions[tp].log.log_end_offset, 0, 1 << 20, 1)


async def _read(
    rm: ReplicaManager, ctx: Any, wanted: list[PartitionData]
) -> list[tuple[PartitionData, FetchPartitionResult]]:
    requests = [
        FetchRequestPartition(TopicPartition(p.topic or "", p.partition), p.fetch_offset, p.max_bytes, 1)
        for p in wanted
    ]
    results = await rm.fetch_messages(
        requests, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, replica_id=FOLLOWER, clock=ctx.clock
    )
    return list(zip(wanted, results, strict=True))


async def _open(rm: ReplicaManager, manager: FetchManager) -> tuple[int, int]:
    """A full fetch of both partitions: (session id, next epoch)."""
    parts = [_data(rm, T0), _data(rm, T1)]
    ctx = manager.new_context(12, INVALID_SESSION_ID, INITIAL_EPOCH, True, parts, [], {}, 0, 1000)
    assert isinstance(ctx, FullFetchContext)
    answer = ctx.answer(await _read(rm, ctx, ctx.partitions()), 0)
    assert answer.session_id != INVALID_SESSION_ID
    return answer.session_id, 1


def _incremental(manager: FetchManager, session_id: int, epoch: int, named: list[PartitionData]) -> Any:
    ctx = manager.new_context(12, session_id, epoch, True, named, [], {}, epoch, 1000)
    assert isinstance(ctx, IncrementalFetchContext) and ctx.watching
    return ctx


def test_an_idle_session_reads_nothing_and_an_append_marks_its_partition(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, manager: FetchManager) -> list[Any]:
        session_id, epoch = await _open(rm, manager)
        seen = []
        for _ in range(2):  # the first incremental fetch reads both (new session) and settles them
            ctx = _incremental(manager, session_id, epoch, [])
            wanted = ctx.partitions()
            seen.append([p.partition for p in wanted])
            answer = ctx.answer(await _read(rm, ctx, wanted), epoch)
            seen.append([p.partition for p, _ in answer.partitions])
            epoch += 1
        rm.append_records(T1, batch(3), required_acks=1)
        ctx = _incremental(manager, session_id, epoch, [])
        wanted = ctx.partitions()
        answer = ctx.answer(await _read(rm, ctx, wanted), epoch)
        seen.append([(p.partition, p.fetch_offset) for p in wanted])
        seen.append([(p.partition, r.records_size > 0) for p, r in answer.partitions])
        return seen

    seen = _run(tmp_path, body)
    assert seen[0] == [0, 1] and seen[1] == []  # read again, nothing new to answer
    assert seen[2] == [] and seen[3] == []  # idle: nothing read, nothing answered
    assert seen[4] == [(1, 2)]  # only the partition appended to
    assert seen[5] == [(1, True)]


def test_a_change_between_the_read_and_the_answer_is_read_next_time(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, manager: FetchManager) -> list[list[int]]:
        session_id, epoch = await _open(rm, manager)
        ctx = _incremental(manager, session_id, epoch, [])
        reads = await _read(rm, ctx, ctx.partitions())  # both caught up...
        rm.append_records(T0, batch(1), required_acks=1)  # ...then t-0 changes before the answer
        ctx.answer(reads, epoch)
        ctx = _incremental(manager, session_id, epoch + 1, [])
        return [[p.partition for p in ctx.partitions()]]

    assert _run(tmp_path, body) == [[0]]


def test_the_session_clock_keeps_an_idle_follower_in_sync_until_it_stops_or_the_partition_changes(
    tmp_path: Path,
) -> None:
    async def body(rm: ReplicaManager, manager: FetchManager) -> tuple[int, int, int, int]:
        session_id, epoch = await _open(rm, manager)
        ctx = _incremental(manager, session_id, epoch, [])
        ctx.answer(await _read(rm, ctx, ctx.partitions()), epoch)
        follower = rm.partitions[T0].followers[FOLLOWER]
        caught_up_read = follower.last_caught_up_time_ms
        clock = ctx.clock
        await asyncio.sleep(0.02)
        idle = _incremental(manager, session_id, epoch + 1, [])
        assert idle.partitions() == []
        await _read(rm, idle, [])  # an idle fetch: only the clock moves
        moved = follower.caught_up_ms()
        rm.append_records(T0, batch(1), required_acks=1)  # the follower is behind from here
        frozen = follower.caught_up_ms()
        clock.ms += 10 * LAG_MS  # later fetches of the session no longer count for t-0
        after = follower.caught_up_ms()
        return caught_up_read, moved, frozen, after

    caught_up_read, moved, frozen, after = _run(tmp_path, body)
    assert moved > caught_up_read
    assert frozen == moved == after


def test_an_idle_follower_stays_in_the_isr_and_leaves_it_when_its_fetches_stop(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, manager: FetchManager) -> tuple[list[int], list[int]]:
        session_id, epoch = await _open(rm, manager)
        ctx = _incremental(manager, session_id, epoch, [])
        ctx.answer(await _read(rm, ctx, ctx.partitions()), epoch)
        partition = rm.partitions[T0]
        start = partition.followers[FOLLOWER].last_caught_up_time_ms
        ctx.clock.ms = start + 3 * LAG_MS  # fetches kept coming, reading nothing
        rm.maybe_shrink_isr(now_ms=start + 3 * LAG_MS + 1)
        await settle()
        kept = list(partition.state.isr)
        rm.maybe_shrink_isr(now_ms=start + 4 * LAG_MS + 1)  # then they stopped
        await settle()
        return kept, list(partition.state.isr)

    kept, shrunk = _run(tmp_path, body)
    assert kept == [1, FOLLOWER]
    assert shrunk == [1]


def test_a_follower_outside_the_isr_is_read_at_each_fetch(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, manager: FetchManager) -> list[int]:
        for tp in (T0, T1):  # the follower is out of t-0's ISR
            isr = [1] if tp == T0 else [1, FOLLOWER]
            rm.make_leader_or_follower(tp, PartitionState(1, 1, isr, [1, FOLLOWER], 1, 0))
        rm.partitions[T0].isr_writer = None  # its expansion is not written: it stays out
        session_id, epoch = await _open(rm, manager)
        for e in (epoch, epoch + 1):
            ctx = _incremental(manager, session_id, e, [])
            ctx.answer(await _read(rm, ctx, ctx.partitions()), e)
        ctx = _incremental(manager, session_id, epoch + 2, [])
        return [p.partition for p in ctx.partitions()]

    assert _run(tmp_path, body) == [0]


def test_a_session_that_leaves_the_cache_or_forgets_a_partition_stops_watching_it(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, manager: FetchManager) -> tuple[set[Any], set[Any], set[Any]]:
        session_id, epoch = await _open(rm, manager)
        watched = set(rm.fetch_watchers)
        ctx = manager.new_context(12, session_id, epoch, True, [], [("t", 0)], {}, 1, 1000)
        assert isinstance(ctx, IncrementalFetchContext)
        after_forget = set(rm.fetch_watchers)
        shard = manager.cache.cache_shard(session_id)
        assert shard is not None
        shard.remove(session_id)
        return watched, after_forget, set(rm.fetch_watchers)

    watched, after_forget, after_close = _run(tmp_path, body)
    assert watched == {T0, T1}
    assert after_forget == {T1}
    assert after_close == set()


def test_a_waiting_fetch_returns_at_a_change_or_at_its_timeout(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, manager: FetchManager) -> tuple[bool, bool]:
        session_id, epoch = await _open(rm, manager)
        ctx = _incremental(manager, session_id, epoch, [])
        ctx.answer(await _read(rm, ctx, ctx.partitions()), epoch)
        timed_out = await ctx.wait_for_change(0.05)
        asyncio.get_running_loop().call_later(0.02, lambda: rm.append_records(T1, batch(1), required_acks=1))
        woken = await ctx.wait_for_change(5)
        return timed_out, woken

    assert _run(tmp_path, body) == (False, True)
