"""The follower's fetcher, driven without sockets: truncation decided from OffsetForLeaderEpoch
answers (KIP-101/279), diverging epochs in Fetch answers (KIP-595), back-off after errors, and
idle fetchers stopped once their partitions moved away (Kafka's shutdownIdleFetcherThreads).

Each test builds a real follower partition on a temporary log and calls the fetcher's steps
directly with a fake leader connection; the fetcher's own task is stopped first where it would
otherwise race with the step under test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.client.errors import KafkaConnectionError
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.replication.fetcher import FetcherConfig, ReplicaFetcher, ReplicaFetcherManager
from odradek.replication.partition import Partition
from odradek.storage import TopicPartition
from odradek.storage.leader_epoch import UNDEFINED_EPOCH_OFFSET

from .replication_fakes import TP, FakeConnection, batch, epoch_answer, fetched, follower_with_epochs, settle


async def _idle_fetcher(partition: Partition, backoff_ms: int = 1000) -> ReplicaFetcher:
    """A fetcher of ``partition`` whose task is stopped: its steps are called by the test."""
    fetcher = ReplicaFetcher(2, 1, 0, {TP: partition}.get, lambda _: None, FetcherConfig(backoff_ms=backoff_ms))
    fetcher._stopping = True
    fetcher._task.cancel()
    await asyncio.gather(fetcher._task, return_exceptions=True)
    fetcher.add(TP)
    return fetcher


def _run(tmp_path: Path, epochs: list[tuple[int, int]], body: Callable[[Partition], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        partition = follower_with_epochs(tmp_path, epochs)
        try:
            return await body(partition)
        finally:
            partition.log.close()

    return asyncio.run(main())


def test_truncates_to_the_end_offset_the_leader_gives_for_our_latest_epoch(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[int, Any, bool]:
        fetcher = await _idle_fetcher(partition)
        conn = FakeConnection(epoch_answer(0, 2, 7))
        await fetcher._truncate(conn, [TP])  # type: ignore[arg-type]
        asked = conn.requests[0].topics[0].partitions[0]
        return (
            partition.log.log_end_offset,
            (asked.leader_epoch, asked.current_leader_epoch),
            fetcher.partitions[TP].truncating,
        )

    end, asked, truncating = _run(tmp_path, [(1, 5), (2, 5)], body)
    assert asked == (2, 3)  # our latest epoch, and the leader epoch we follow
    assert end == 7
    assert truncating is False


def test_an_older_epoch_in_the_answer_truncates_to_where_that_epoch_ends_on_either_side(tmp_path: Path) -> None:
    async def body(partition: Partition) -> int:
        fetcher = await _idle_fetcher(partition)
        # the leader never had epoch 2: its epoch 1 ends at 8, ours at 5 (where our epoch 2 began)
        await fetcher._truncate(FakeConnection(epoch_answer(0, 1, 8)), [TP])  # type: ignore[arg-type]
        return partition.log.log_end_offset

    assert _run(tmp_path, [(1, 5), (2, 5)], body) == 5


def test_an_answer_past_our_end_truncates_nothing(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[int, bool]:
        fetcher = await _idle_fetcher(partition)
        await fetcher._truncate(FakeConnection(epoch_answer(0, 2, 50)), [TP])  # type: ignore[arg-type]
        return partition.log.log_end_offset, fetcher.partitions[TP].truncating

    assert _run(tmp_path, [(1, 5), (2, 5)], body) == (10, False)


def test_an_undefined_epoch_truncates_to_the_high_watermark(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[int, int]:
        high_watermark = partition.high_watermark  # 5: where the leadership of epoch 2 began
        fetcher = await _idle_fetcher(partition)
        answer = epoch_answer(0, -1, UNDEFINED_EPOCH_OFFSET)
        await fetcher._truncate(FakeConnection(answer), [TP])  # type: ignore[arg-type]
        return high_watermark, partition.log.log_end_offset

    assert _run(tmp_path, [(1, 5), (2, 5)], body) == (5, 5)


def test_an_empty_log_needs_no_request(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[int, bool]:
        fetcher = await _idle_fetcher(partition)
        conn = FakeConnection()
        await fetcher._truncate(conn, [TP])  # type: ignore[arg-type]
        return len(conn.requests), fetcher.partitions[TP].truncating

    assert _run(tmp_path, [], body) == (0, False)


def test_an_error_answer_backs_off_and_keeps_the_partition_truncating(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[int, bool, bool, list[TopicPartition]]:
        fetcher = await _idle_fetcher(partition, backoff_ms=60_000)
        before = time.monotonic()
        await fetcher._truncate(FakeConnection(epoch_answer(ErrorCode.fenced_leader_epoch, -1, -1)), [TP])  # type: ignore[arg-type]
        state = fetcher.partitions[TP]
        return partition.log.log_end_offset, state.truncating, state.delayed_until >= before + 59, fetcher._ready()

    assert _run(tmp_path, [(1, 5), (2, 5)], body) == (10, True, True, [])


def test_a_diverging_epoch_in_a_fetch_answer_truncates_and_appends_nothing(tmp_path: Path) -> None:
    async def body(partition: Partition) -> int:
        fetcher = await _idle_fetcher(partition)
        fetcher.partitions[TP].truncating = False
        fetcher._process(partition, fetched(diverging=(1, 6), high_watermark=6))
        return partition.log.log_end_offset

    # our epoch 2 started at 5, the leader's epoch 1 ran to 6: the smaller bound wins
    assert _run(tmp_path, [(1, 5), (2, 5)], body) == 5


@pytest.mark.parametrize(
    "error",
    [ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_topic_or_partition],
)
def test_a_partition_answered_with_an_error_waits_the_back_off(tmp_path: Path, error: ErrorCode) -> None:
    async def body(partition: Partition) -> tuple[list[TopicPartition], list[TopicPartition], int]:
        fetcher = await _idle_fetcher(partition, backoff_ms=60_000)
        fetcher.partitions[TP].truncating = False
        assert fetcher._ready() == [TP]
        fetcher._process(partition, fetched(error))
        waiting = fetcher._ready()
        fetcher.partitions[TP].delayed_until = time.monotonic() - 1  # the back-off has passed
        return waiting, fetcher._ready(), partition.log.log_end_offset

    assert _run(tmp_path, [(1, 5)], body) == ([], [TP], 5)


def test_out_of_range_behind_the_leaders_start_restarts_the_log_there(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[int, int]:
        fetcher = await _idle_fetcher(partition)
        fetcher._process(partition, fetched(ErrorCode.offset_out_of_range, log_start_offset=40))
        return partition.log.log_start_offset, partition.log.log_end_offset

    assert _run(tmp_path, [(1, 5)], body) == (40, 40)


def test_out_of_range_within_our_log_truncates_again(tmp_path: Path) -> None:
    async def body(partition: Partition) -> bool:
        fetcher = await _idle_fetcher(partition)
        fetcher.partitions[TP].truncating = False
        fetcher._process(partition, fetched(ErrorCode.offset_out_of_range, log_start_offset=0))
        return fetcher.partitions[TP].truncating

    assert _run(tmp_path, [(1, 5)], body) is True


def test_fetched_batches_are_appended_and_the_high_watermark_follows_the_leader(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[int, int, Any]:
        fetcher = await _idle_fetcher(partition)
        fetcher.partitions[TP].truncating = False
        records = bytearray(batch(3))
        records[0:8] = (5).to_bytes(8, "big")  # the leader's base offset
        topic = SimpleNamespace(topic=TP.topic, partitions=[fetched(records=bytes(records), high_watermark=7)])
        conn = FakeConnection(SimpleNamespace(error_code=0, responses=[topic]))
        await fetcher._fetch(conn, [TP])  # type: ignore[arg-type]
        request = conn.requests[0]
        sent = request.topics[0].partitions[0]
        return (
            partition.log.log_end_offset,
            partition.high_watermark,
            (type(request).__api_key__, sent.fetch_offset, sent.last_fetched_epoch),
        )

    end, hw, sent = _run(tmp_path, [(1, 5)], body)
    assert sent == (ApiKey.FETCH, 5, 1)
    assert (end, hw) == (8, 7)


def test_a_lost_connection_backs_off_before_connecting_again(tmp_path: Path) -> None:
    async def body(partition: Partition) -> int:
        attempts = 0

        async def connection(self: ReplicaFetcher) -> Any:
            nonlocal attempts
            attempts += 1
            raise KafkaConnectionError("refused")

        fetcher = ReplicaFetcher(2, 1, 0, {TP: partition}.get, lambda _: ("h", 1), FetcherConfig(backoff_ms=60_000))
        fetcher._connection = connection.__get__(fetcher)  # type: ignore[method-assign]
        fetcher.add(TP)
        await asyncio.sleep(0.2)
        await fetcher.stop()
        return attempts

    assert _run(tmp_path, [(1, 5)], body) == 1


def test_a_fetcher_whose_partitions_all_moved_away_is_stopped_and_its_connection_closed(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[bool, bool, dict[Any, Any], bool]:
        other = TopicPartition("t", 1)
        manager = ReplicaFetcherManager(2, {TP: partition}.get, lambda _: None, FetcherConfig())
        manager.add_partition(TP, 1)
        manager.add_partition(other, 1)
        fetcher = manager.fetchers[(1, 0)]
        conn = FakeConnection()
        fetcher._conn = conn  # type: ignore[assignment]  # as after its first fetch
        manager.remove_partition(TP)
        await settle()
        still_running = not fetcher._task.done() and not conn.closed  # one partition is left
        manager.remove_partition(other)  # e.g. this broker became the leader of the last one
        await manager.wait_idle_shutdown()
        return still_running, fetcher._task.done(), dict(manager.fetchers), conn.closed

    assert _run(tmp_path, [(1, 5)], body) == (True, True, {}, True)


def test_a_partition_moved_within_one_change_keeps_its_fetcher(tmp_path: Path) -> None:
    async def body(partition: Partition) -> tuple[bool, bool]:
        manager = ReplicaFetcherManager(2, {TP: partition}.get, lambda _: None, FetcherConfig())
        manager.add_partition(TP, 1)
        fetcher = manager.fetchers[(1, 0)]
        manager.add_partition(TP, 1)  # a new leader epoch from the same leader: removed, then added
        await manager.wait_idle_shutdown()
        kept = manager.fetchers.get((1, 0)) is fetcher and not fetcher._task.done()
        await manager.shutdown()
        return kept, fetcher._task.done()

    assert _run(tmp_path, [(1, 5)], body) == (True, True)


def test_the_fetcher_fetches_in_a_session_and_starts_over_after_a_session_error(tmp_path: Path) -> None:
    def answer(session_id: int, *partitions: Any, error: int = 0) -> Any:
        topics = [SimpleNamespace(topic=TP.topic, partitions=list(partitions))] if partitions else []
        return SimpleNamespace(error_code=error, session_id=session_id, responses=topics)

    async def body(partition: Partition) -> list[tuple[int, int, int, int]]:
        fetcher = await _idle_fetcher(partition)
        fetcher.partitions[TP].truncating = False
        conn = FakeConnection(
            answer(55, fetched(high_watermark=3)),  # full: opens session 55
            answer(55),  # incremental, nothing new
            answer(0, error=ErrorCode.invalid_fetch_session_epoch),
            answer(56, fetched(high_watermark=4)),  # full again, closing 55: session 56
        )
        for _ in range(4):
            await fetcher._fetch(conn, [TP])  # type: ignore[arg-type]
        return [
            (r.session_id, r.session_epoch, sum(len(t.partitions) for t in r.topics), len(r.forgotten_topics_data))
            for r in conn.requests
        ]

    sent = _run(tmp_path, [(1, 5)], body)
    # full (id 0, epoch 0, the partition); incremental (55, 1, nothing named); (55, 2) answered with
    # the epoch error; full again closing 55 (55, 0, the partition)
    assert sent == [(0, 0, 1, 0), (55, 1, 0, 0), (55, 2, 0, 0), (55, 0, 1, 0)]


def test_an_idle_fetcher_names_nothing_and_names_what_changed(tmp_path: Path) -> None:
    def answer(*partitions: Any) -> Any:
        topics = [SimpleNamespace(topic=TP.topic, partitions=list(partitions))] if partitions else []
        return SimpleNamespace(error_code=0, session_id=55, responses=topics)

    async def body(partition: Partition) -> list[list[tuple[int, int]]]:
        fetcher = await _idle_fetcher(partition)
        fetcher.partitions[TP].truncating = False
        records = bytearray(batch(2))
        records[0:8] = (5).to_bytes(8, "big")  # the leader's base offset
        conn = FakeConnection(
            answer(fetched(high_watermark=5)),  # full: opens session 55
            answer(),  # idle
            answer(fetched(records=bytes(records), high_watermark=5)),  # idle, but the leader had two records
            answer(),  # names the new fetch offset
            answer(),  # idle again
            answer(),  # after the log start moved
        )
        for step in range(6):
            if step == 5:
                partition.log.delete_records(1)
                fetcher.mark_changed(TP)
            await fetcher._fetch(conn, [TP])  # type: ignore[arg-type]
        return [[(p.fetch_offset, p.log_start_offset) for t in r.topics for p in t.partitions] for r in conn.requests]

    assert _run(tmp_path, [(1, 5)], body) == [[(5, 0)], [], [], [(7, 0)], [], [(7, 1)]]
