"""ReplicaManager without sockets or processes: LeaderAndIsr transitions (with the fetcher
manager's calls recorded), the high watermark moving with followers' fetch positions, acks=all
waits and their outcomes, ISR shrink after ``replica.lag.time.max.ms``, StopReplica, and idle
fetchers stopped once this broker leads (or stopped) their partitions.

Logs live in a temporary directory; the ISR znode is :class:`IsrWrites`; broker 1 is this broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from odradek.errors import (
    ErrorCode,
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.records import Record, build_batch
from odradek.replication.partition import PartitionState
from odradek.replication.replica_manager import FetchRequestPartition, ReplicaManager
from odradek.storage import LogManager, TopicPartition

from .replication_fakes import TP, FakeConnection, IsrWrites, RecordingFetchers, batch, settle
from .storage_support import log_config

LAG_MS = 1000


def _manager(tmp_path: Path, writes: IsrWrites | None = None, min_isr: int = 1) -> ReplicaManager:
    logs = LogManager([tmp_path / "logs"], log_config())
    return ReplicaManager(
        1,
        logs,
        lambda _topic: log_config(min_insync_replicas=min_isr),
        io_threads=1,
        replica_lag_time_max_ms=LAG_MS,
        isr_writer=writes,
    )


def _run(
    tmp_path: Path,
    body: Callable[[ReplicaManager], Awaitable[Any]],
    *,
    writes: IsrWrites | None = None,
    min_isr: int = 1,
    recorded: bool = True,
) -> Any:
    async def main() -> Any:
        rm = _manager(tmp_path, writes, min_isr)
        if recorded:
            rm.fetcher_manager = RecordingFetchers()  # type: ignore[assignment]
        try:
            return await body(rm)
        finally:
            await rm.shutdown_fetchers()
            rm.shutdown()
            rm.log_manager.shutdown()

    return asyncio.run(main())


def _leader(rm: ReplicaManager, isr: list[int], epoch: int = 1, zk_version: int = 0) -> None:
    rm.make_leader_or_follower(TP, PartitionState(1, epoch, isr, [1, 2, 3], 1, zk_version))


def _follower_fetch(rm: ReplicaManager, replica_id: int, offset: int) -> Any:
    request = FetchRequestPartition(TP, offset, 1 << 20)
    return rm.fetch_messages([request], max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, replica_id=replica_id)


def test_become_follower_then_leader_starts_and_stops_fetching(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> tuple[list[Any], bool, int]:
        fetchers: RecordingFetchers = rm.fetcher_manager  # type: ignore[assignment]
        rm.make_leader_or_follower(TP, PartitionState(2, 1, [1, 2], [1, 2], 1, 0))
        rm.make_leader_or_follower(TP, PartitionState(2, 1, [1, 2], [1, 2], 1, 0))  # same leader and epoch
        rm.make_leader_or_follower(TP, PartitionState(3, 2, [1, 3], [1, 3], 1, 1))  # a new leader
        partition = rm.make_leader_or_follower(TP, PartitionState(1, 3, [1, 3], [1, 3], 1, 2))
        return fetchers.calls, partition.is_leader, partition.leader_epoch

    calls, is_leader, epoch = _run(tmp_path, body)
    assert calls == [("add", TP, 2), ("add", TP, 3), ("remove", TP, None)]
    assert (is_leader, epoch) == (True, 3)


def test_each_new_leadership_goes_to_the_state_change_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ``Leader <tp> starts at leader epoch`` / ``Follower <tp> starts at leader epoch`` lines,
    once per new leader or epoch: what the fault campaign's leader-loss stages are read from."""

    async def body(rm: ReplicaManager) -> None:
        rm.make_leader_or_follower(TP, PartitionState(2, 1, [1, 2], [1, 2], 1, 0))
        rm.make_leader_or_follower(TP, PartitionState(2, 1, [1, 2], [1, 2], 1, 0))  # no change: no line
        rm.make_leader_or_follower(TP, PartitionState(1, 2, [1], [1, 2], 1, 1))

    with caplog.at_level("INFO", logger="state.change.logger"):
        _run(tmp_path, body)
    lines = [r.getMessage() for r in caplog.records if r.name == "state.change.logger"]
    name = f"{TP.topic}-{TP.partition}"
    assert lines == [
        f"[Broker id=1] Follower {name} starts at leader epoch 1 from offset 0 with high watermark 0."
        " Current leader is 2. Previous leader epoch was -1.",
        f"[Broker id=1] Leader {name} starts at leader epoch 2 from offset 0 with high watermark 0, ISR [1]."
        " Previous leader epoch was 1.",
    ]


def test_a_follower_without_a_leader_stops_fetching(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> list[Any]:
        fetchers: RecordingFetchers = rm.fetcher_manager  # type: ignore[assignment]
        rm.make_leader_or_follower(TP, PartitionState(2, 1, [1, 2], [1, 2], 1, 0))
        rm.make_leader_or_follower(TP, PartitionState(-1, 2, [1], [1, 2], 1, 1))
        return fetchers.calls

    assert _run(tmp_path, body) == [("add", TP, 2), ("remove", TP, None)]


def test_the_high_watermark_advances_as_followers_fetch_positions_arrive(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> list[int]:
        _leader(rm, [1, 2, 3])
        rm.append_records(TP, batch(10), required_acks=-1)
        partition = rm.partitions[TP]
        seen = [partition.high_watermark]
        await _follower_fetch(rm, 2, 10)
        seen.append(partition.high_watermark)
        await _follower_fetch(rm, 3, 6)
        seen.append(partition.high_watermark)
        await _follower_fetch(rm, 3, 10)
        seen.append(partition.high_watermark)
        return seen

    assert _run(tmp_path, body) == [0, 0, 6, 10]


def test_a_consumer_reads_up_to_the_high_watermark_only(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> tuple[int, int]:
        _leader(rm, [1, 2])
        rm.append_records(TP, batch(4), required_acks=1)
        before = await rm.fetch_messages(
            [FetchRequestPartition(TP, 0, 1 << 20)], max_wait_ms=0, min_bytes=0, max_bytes=1 << 20
        )
        await _follower_fetch(rm, 2, 4)
        after = await rm.fetch_messages(
            [FetchRequestPartition(TP, 0, 1 << 20)], max_wait_ms=0, min_bytes=0, max_bytes=1 << 20
        )
        return before[0].records_size, after[0].high_watermark

    size, hw = _run(tmp_path, body)
    assert size == 0
    assert hw == 4


def test_acks_all_completes_when_the_isr_has_the_records(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> tuple[bool, ErrorCode]:
        _leader(rm, [1, 2])
        info = rm.append_records(TP, batch(3), required_acks=-1)
        wait = asyncio.ensure_future(rm.wait_for_acks(TP, info.last_offset + 1, 10_000))
        await settle()
        pending = not wait.done()
        await _follower_fetch(rm, 2, 3)
        return pending, await wait

    assert _run(tmp_path, body) == (True, ErrorCode.none)


def test_acks_all_with_the_leader_alone_in_the_isr_answers_without_a_loop_turn(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> tuple[ErrorCode, bool]:
        _leader(rm, [1])
        info = rm.append_records(TP, batch(3), required_acks=-1)
        turned = asyncio.Event()
        asyncio.get_running_loop().call_soon(turned.set)
        error = await rm.wait_for_acks(TP, info.last_offset + 1, 10_000)
        return error, turned.is_set()

    assert _run(tmp_path, body) == (ErrorCode.none, False)


def test_acks_all_times_out_with_request_timed_out(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> ErrorCode:
        _leader(rm, [1, 2])
        info = rm.append_records(TP, batch(3), required_acks=-1)
        return await rm.wait_for_acks(TP, info.last_offset + 1, 20)

    assert _run(tmp_path, body) == ErrorCode.request_timed_out


def test_acks_all_is_refused_before_the_append_with_too_few_in_sync_replicas(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> int:
        _leader(rm, [1])
        with pytest.raises(NotEnoughReplicasError):
            rm.append_records(TP, batch(), required_acks=-1)
        rm.append_records(TP, batch(), required_acks=1)  # acks=1 does not look at the ISR
        return rm.partitions[TP].log.log_end_offset

    assert _run(tmp_path, body, min_isr=2) == 1


def test_acks_all_answers_not_enough_replicas_after_append_when_the_isr_shrinks(tmp_path: Path) -> None:
    writes = IsrWrites()

    async def body(rm: ReplicaManager) -> tuple[ErrorCode, list[list[int]]]:
        _leader(rm, [1, 2])
        info = rm.append_records(TP, batch(2), required_acks=-1)
        wait = asyncio.ensure_future(rm.wait_for_acks(TP, info.last_offset + 1, 10_000))
        await settle()
        partition = rm.partitions[TP]
        rm.maybe_shrink_isr(now_ms=partition.followers[2].last_caught_up_time_ms + LAG_MS + 1)
        return await wait, writes.written

    error, written = _run(tmp_path, body, writes=writes, min_isr=2)
    assert written == [[1]]
    assert error == ErrorCode.not_enough_replicas_after_append


def test_acks_all_waiting_on_a_leader_that_steps_down_gets_not_leader(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> ErrorCode:
        _leader(rm, [1, 2])
        info = rm.append_records(TP, batch(2), required_acks=-1)
        wait = asyncio.ensure_future(rm.wait_for_acks(TP, info.last_offset + 1, 10_000))
        await settle()
        rm.make_leader_or_follower(TP, PartitionState(2, 2, [2], [1, 2], 1, 1))
        return await wait

    assert _run(tmp_path, body) == ErrorCode.not_leader_or_follower


def test_the_isr_shrinks_after_replica_lag_time_max_ms_only(tmp_path: Path) -> None:
    writes = IsrWrites()

    async def body(rm: ReplicaManager) -> tuple[list[list[int]], list[int], set[TopicPartition]]:
        _leader(rm, [1, 2, 3])
        rm.append_records(TP, batch(5), required_acks=1)
        partition = rm.partitions[TP]
        start = partition.followers[2].last_caught_up_time_ms
        partition.update_follower_fetch_state(3, 5, now_ms=start + LAG_MS)  # 3 caught up later
        rm.maybe_shrink_isr(now_ms=start + LAG_MS)  # not yet: exactly the lag time
        await settle()
        before = list(writes.written)
        rm.maybe_shrink_isr(now_ms=start + LAG_MS + 1)
        await settle()
        return before + writes.written, list(partition.state.isr), set(rm.isr_changed)

    written, isr, changed = _run(tmp_path, body, writes=writes)
    assert written == [[1, 3]]
    assert isr == [1, 3]
    assert changed == {TP}


def test_stop_replica_stops_fetching_and_deletes_the_log_when_asked(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> tuple[list[Any], bool]:
        fetchers: RecordingFetchers = rm.fetcher_manager  # type: ignore[assignment]
        rm.make_leader_or_follower(TP, PartitionState(2, 1, [1, 2], [1, 2], 1, 0))
        log_dir = rm.partitions[TP].log.dir
        rm.stop_replica(TP, delete=True)
        with pytest.raises(UnknownTopicOrPartitionError):  # gone, not merely led elsewhere
            rm.leader_partition(TP)
        return fetchers.calls, log_dir.exists()

    calls, exists = _run(tmp_path, body)
    assert calls == [("add", TP, 2), ("remove", TP, None)]
    assert not exists


def test_a_partition_not_hosted_here_is_not_leader_or_follower_if_it_exists_else_unknown(tmp_path: Path) -> None:
    """Kafka's ``getPartitionOrException``: what every partition API answers for a partition this
    broker does not host."""
    elsewhere, failed, missing = TopicPartition("t", 1), TopicPartition("t", 2), TopicPartition("gone", 0)
    known = {TP, elsewhere, failed}

    async def body(rm: ReplicaManager) -> list[type[Exception]]:
        rm.partition_exists = known.__contains__
        rm.make_leader_or_follower(TP, PartitionState(1, 1, [1, 2], [1, 2], 1, 0))
        rm.offline_partitions.add(failed)
        raised: list[type[Exception]] = []
        for tp in (elsewhere, failed, missing):
            for lookup in (rm.get_partition, rm.leader_partition):
                with pytest.raises(Exception) as info:
                    lookup(tp)
                raised.append(info.type)
        assert rm.get_partition(TP) is rm.leader_partition(TP)
        return raised

    raised = _run(tmp_path, body)
    assert raised == [NotLeaderOrFollowerError] * 2 + [KafkaStorageError] * 2 + [UnknownTopicOrPartitionError] * 2


@pytest.mark.parametrize("change", ["become leader", "stop replica"])
def test_a_fetcher_left_without_partitions_is_stopped_with_its_connection(tmp_path: Path, change: str) -> None:
    async def body(rm: ReplicaManager) -> tuple[bool, bool, dict[Any, Any]]:
        rm.make_leader_or_follower(TP, PartitionState(2, 1, [1, 2], [1, 2], 1, 0))
        fetcher = rm.fetcher_manager.fetchers[(2, 0)]
        conn = FakeConnection()
        fetcher._conn = conn  # type: ignore[assignment]  # as after its first fetch
        if change == "become leader":
            rm.make_leader_or_follower(TP, PartitionState(1, 2, [1, 2], [1, 2], 1, 1))
        else:
            rm.stop_replica(TP, delete=False)
        await rm.fetcher_manager.wait_idle_shutdown()
        return fetcher._task.done(), conn.closed, dict(rm.fetcher_manager.fetchers)

    assert _run(tmp_path, body, recorded=False) == (True, True, {})


def test_a_fetch_reports_when_it_starts_waiting(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> tuple[int, int]:
        _leader(rm, [1])
        rm.append_records(TP, batch(2), required_acks=1)
        delays: list[int] = []
        request = [FetchRequestPartition(TP, 0, 1 << 20)]
        await rm.fetch_messages(
            request, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, on_delay=lambda: delays.append(1)
        )
        answered_at_once = len(delays)
        await rm.fetch_messages(
            [FetchRequestPartition(TP, 2, 1 << 20)],
            max_wait_ms=20,
            min_bytes=1,
            max_bytes=1 << 20,
            on_delay=lambda: delays.append(2),
        )
        return answered_at_once, len(delays)

    assert _run(tmp_path, body) == (0, 1)  # data at once: no delay; nothing new: one delay, then the timeout


def test_appends_of_the_coordinators_are_reported(tmp_path: Path) -> None:
    payload = batch(3)

    async def body(rm: ReplicaManager) -> list[tuple[str, int, int]]:
        _leader(rm, [1])
        told: list[tuple[str, int, int]] = []
        rm.on_append = lambda topic, records, nbytes: told.append((topic, records, nbytes))
        rm.append_records(TP, payload, required_acks=1, origin="coordinator")
        return told

    assert _run(tmp_path, body) == [(TP.topic, 3, len(payload))]


def test_a_log_loaded_at_start_up_takes_its_topics_config_on_leader_and_isr(tmp_path: Path) -> None:
    """Logs are loaded before the topics' overrides are known; the first LeaderAndIsr applies
    them (a compacted topic keeps being cleaned after a restart)."""
    first = LogManager([tmp_path / "logs"], log_config())
    first.get_or_create_log(TP, log_config(cleanup_policy="compact"))
    first.shutdown()

    async def body(rm: ReplicaManager) -> tuple[Any, Any]:
        rm.log_config_for = lambda _topic: log_config(cleanup_policy="compact", segment_bytes=4096)
        rm.log_manager.load_logs()
        before = rm.log_manager.get_or_create_log(TP).config
        _leader(rm, [1])
        return before, rm.partitions[TP].log.config

    before, after = _run(tmp_path, body)
    assert (before.get("cleanup.policy"), before.segment_bytes) == (["delete"], 1024 * 1024 * 1024)
    assert (after.get("cleanup.policy"), after.segment_bytes) == (["compact"], 4096)


def test_an_idempotent_batch_refused_while_the_isr_is_short_then_a_gap_is_out_of_order(tmp_path: Path) -> None:
    """The answers behind docs/reliability.md "Anomalies" item 3, in Kafka 3.9's order (the ISR check
    before the sequence check): a batch appended and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, its
    retry and the next batch refused NOT_ENOUGH_REPLICAS while the ISR is short (nothing appended);
    once the ISR is back, the batch after the gap is OUT_OF_ORDER_SEQUENCE_NUMBER, and retries in
    order store each batch once: the first retry is recognised and gets its original offset."""
    writes = IsrWrites()

    def idempotent(seq: int) -> bytes:
        return build_batch([Record(None, b"s%d" % seq)], producer_id=7, producer_epoch=0, base_sequence=seq)

    async def body(rm: ReplicaManager) -> list[Any]:
        _leader(rm, [1, 2])
        partition = rm.partitions[TP]
        out: list[Any] = []
        first = await rm.append_produced_records(TP, idempotent(0), -1)
        wait = asyncio.ensure_future(rm.wait_for_acks(TP, first.last_offset + 1, 10_000))
        await settle()
        rm.maybe_shrink_isr(now_ms=partition.followers[2].last_caught_up_time_ms + LAG_MS + 1)
        out.append(await wait)
        for seq in (0, 1):
            with pytest.raises(NotEnoughReplicasError):
                await rm.append_produced_records(TP, idempotent(seq), -1)
        out.append(partition.log.log_end_offset)
        await _follower_fetch(rm, 2, partition.log.log_end_offset)  # caught up: back in the ISR
        await settle()
        out.append(list(partition.state.isr))
        with pytest.raises(OutOfOrderSequenceError):
            await rm.append_produced_records(TP, idempotent(2), -1)
        out += [(await rm.append_produced_records(TP, idempotent(seq), -1)).first_offset for seq in (0, 1, 2)]
        return out

    error, end, isr, *offsets = _run(tmp_path, body, writes=writes, min_isr=2)
    assert error == ErrorCode.not_enough_replicas_after_append
    assert end == 1  # only the first attempt of sequence 0 is in the log
    assert sorted(isr) == [1, 2]
    assert offsets == [0, 1, 2]  # sequence 0 recognised (its original offset), 1 and 2 appended once
