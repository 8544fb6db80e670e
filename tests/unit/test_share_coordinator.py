"""The share coordinator over an in-memory ``__share_group_state``: ownership and loading,
answers only once durable, state reloaded from the log, pruning through DeleteRecords, and the
per-key ordering of concurrent requests. No sockets, no threads."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.coordinator.share import ShareCoordinator, ShareCoordinatorConfig, ShareCoordinatorDeps
from odradek.coordinator.share.records import SHARE_GROUP_STATE_TOPIC, decode_key
from odradek.errors import ErrorCode
from odradek.protocol.records import iter_all_records
from odradek.share.state import DeliveryState, SharePartitionKey, ShareState, ShareStateError, StateBatch
from odradek.storage.topic_partition import TopicPartition

from .coordinator_fakes import ManualClock, MemoryOffsetsLog, run, runtime_deps, settle

ACK = DeliveryState.ACKNOWLEDGED
KEY = SharePartitionKey("orders", uuid.UUID(int=42), 2)


class Topics:
    def __init__(self) -> None:
        self.known = {uuid.UUID(int=42): ("orders-topic", 3)}

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        entry = self.known.get(topic_id)
        return entry[0] if entry else None

    def partition_count(self, topic: str) -> int | None:
        return next((n for name, n in self.known.values() if name == topic), None)


async def start(
    log: MemoryOffsetsLog, records_per_snapshot: int = 500, deleted: list[tuple[int, int]] | None = None
) -> ShareCoordinator:
    deps, _metadata, _creator = runtime_deps(log, ManualClock())
    config = ShareCoordinatorConfig(num_partitions=3, records_per_snapshot=records_per_snapshot)
    sink = deleted if deleted is not None else []
    coordinator = ShareCoordinator(
        ShareCoordinatorDeps(config, deps, Topics(), lambda p, offset: sink.append((p, offset)))
    )
    await coordinator.startup()
    await settle()
    return coordinator


async def error_of(awaitable: object) -> ErrorCode:
    with pytest.raises(ShareStateError) as info:
        await awaitable  # type: ignore[misc]
    return info.value.error_code


@run
async def test_state_is_written_durably_and_loaded_again_by_the_next_coordinator() -> None:
    log = MemoryOffsetsLog()
    first = await start(log)
    await first.initialize_state(KEY, 1, 0)
    await first.write_state(KEY, 1, 5, 0, [StateBatch(0, 4, ACK, 1)])
    await first.write_state(KEY, 1, 5, 3, [StateBatch(5, 5, DeliveryState.ARCHIVED, 5)], delivery_complete_count=3)
    expected = ShareState(1, 3, 5, (StateBatch(3, 4, ACK, 1), StateBatch(5, 5, DeliveryState.ARCHIVED, 5)))
    assert await first.read_state(KEY, 5) == expected
    partition = first.partition_for(KEY)
    keys = [decode_key(r.key or b"") for b in log.batches[partition] for r in iter_all_records(b)]
    assert [t for t, _k in keys] == [0, 1, 1]
    await first.shutdown()

    second = await start(log)  # a failover: the new coordinator replays the partition
    assert await second.read_state(KEY, 5) == expected
    summary = await second.read_summary(KEY, 0)
    assert summary is not None and (summary.start_offset, summary.delivery_complete_count) == (3, 3)
    assert await error_of(second.read_state(KEY, 4)) is ErrorCode.fenced_leader_epoch
    await second.shutdown()


@run
async def test_ownership_errors_come_from_the_runtime() -> None:
    log = MemoryOffsetsLog()
    coordinator = await start(log)
    partition = coordinator.partition_for(KEY)
    coordinator.on_become_follower(TopicPartition(SHARE_GROUP_STATE_TOPIC, partition))
    log.epochs[partition] = None
    assert await error_of(coordinator.initialize_state(KEY, 0, 0)) is ErrorCode.not_coordinator
    log.epochs[partition] = 3
    assert await error_of(coordinator.initialize_state(KEY, 0, 0)) is ErrorCode.coordinator_load_in_progress
    await settle()
    await coordinator.initialize_state(KEY, 0, 0)
    await coordinator.shutdown()
    assert await error_of(coordinator.read_state(KEY, 0)) is ErrorCode.coordinator_not_available


@run
async def test_unknown_topics_are_refused_before_anything_is_written() -> None:
    log = MemoryOffsetsLog()
    coordinator = await start(log)
    unknown = SharePartitionKey("orders", uuid.UUID(int=43), 0)
    assert await error_of(coordinator.initialize_state(unknown, 0, 0)) is ErrorCode.unknown_topic_or_partition
    beyond = SharePartitionKey("orders", uuid.UUID(int=42), 3)
    assert await error_of(coordinator.initialize_state(beyond, 0, 0)) is ErrorCode.unknown_topic_or_partition
    assert not any(log.batches.values())
    await coordinator.shutdown()


@run
async def test_a_write_that_is_not_durable_is_an_error_and_the_log_decides_at_the_next_load() -> None:
    log = MemoryOffsetsLog()
    coordinator = await start(log)
    await coordinator.initialize_state(KEY, 0, 0)
    log.durable_error = ErrorCode.not_enough_replicas_after_append
    error = await error_of(coordinator.write_state(KEY, 0, 0, 0, [StateBatch(0, 0, ACK, 1)]))
    assert error is ErrorCode.coordinator_not_available
    assert coordinator.partition_for(KEY) not in coordinator.shards  # unloaded
    log.durable_error = ErrorCode.none
    assert await error_of(coordinator.read_state(KEY, 0)) is ErrorCode.coordinator_load_in_progress
    await settle()
    state = await coordinator.read_state(KEY, 0)  # the appended write did reach the log
    assert state.batches == (StateBatch(0, 0, ACK, 1),)
    log.fail_with = ErrorCode.not_leader_or_follower
    assert await error_of(coordinator.write_state(KEY, 0, 0, 0, [])) is ErrorCode.not_coordinator
    await coordinator.shutdown()


@run
async def test_records_below_every_key_s_latest_snapshot_are_deleted() -> None:
    log = MemoryOffsetsLog()
    deleted: list[tuple[int, int]] = []
    coordinator = await start(log, records_per_snapshot=2, deleted=deleted)
    partition = coordinator.partition_for(KEY)
    await coordinator.initialize_state(KEY, 0, 0)  # offset 0: snapshot
    for i in range(3):  # 1, 2: updates; 3: snapshot
        await coordinator.write_state(KEY, 0, 0, 0, [StateBatch(i, i, ACK, 1)])
    assert deleted == [(partition, 3)]
    for i in range(3, 6):  # 4, 5: updates, 6: snapshot
        await coordinator.write_state(KEY, 0, 0, 0, [StateBatch(i, i, ACK, 1)])
    assert deleted == [(partition, 3), (partition, 6)]
    await coordinator.shutdown()


@run
async def test_requests_for_one_key_are_applied_in_order() -> None:
    log = MemoryOffsetsLog()
    coordinator = await start(log)
    await coordinator.initialize_state(KEY, 0, 0)
    log.hold = asyncio.Event()
    first = asyncio.ensure_future(coordinator.write_state(KEY, 0, 0, 0, [StateBatch(0, 0, ACK, 1)]))
    second = asyncio.ensure_future(coordinator.write_state(KEY, 0, 0, 1, []))
    read = asyncio.ensure_future(coordinator.read_state(KEY, 0))
    await settle()
    partition = coordinator.partition_for(KEY)
    assert len(log.batches[partition]) == 2  # the second write waits for the first to be durable
    log.hold.set()
    await asyncio.gather(first, second)
    assert (await read).start_offset == 1
    assert (await read).batches == ()
    await coordinator.shutdown()
