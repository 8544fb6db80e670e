"""The persisters: InMemoryPersister keeps the share coordinator's rules; DefaultStatePersister
calls the local coordinator when it is this broker, retries the coordinator errors with a
backoff until its deadline, and maps "never initialized" to None. No sockets."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.share import ShareCoordinator, ShareCoordinatorConfig, ShareCoordinatorDeps
from odradek.errors import ErrorCode
from odradek.share.persister import CoordinatorNode, DefaultStatePersister, InMemoryPersister
from odradek.share.state import DeliveryState, Persister, SharePartitionKey, ShareState, ShareStateError, StateBatch

from .coordinator_fakes import ManualClock, MemoryOffsetsLog, run, runtime_deps, settle

ACK, AV = DeliveryState.ACKNOWLEDGED, DeliveryState.AVAILABLE
KEY = SharePartitionKey("g", uuid.UUID(int=1), 0)


@run
async def test_in_memory_persister_keeps_the_coordinator_rules() -> None:
    persister: Persister = InMemoryPersister(records_per_snapshot=2, time_ms=lambda: 5)
    assert await persister.read_state(KEY, 0) is None
    assert await persister.read_summary(KEY, 0) is None
    await persister.initialize_state(KEY, 1, -1)
    assert await persister.read_state(KEY, 3) == ShareState(1, -1, 3)
    await persister.write_state(KEY, 1, 3, 10, [StateBatch(10, 19, AV, 1)])
    await persister.write_state(KEY, 1, 3, -1, [StateBatch(12, 13, ACK, 1)])
    await persister.write_state(KEY, 1, 3, 12, [])
    assert await persister.read_state(KEY, 3) == ShareState(
        1, 12, 3, (StateBatch(12, 13, ACK, 1), StateBatch(14, 19, AV, 1))
    )
    assert await persister.read_summary(KEY, 0) == ShareState(1, 12, 3)
    with pytest.raises(ShareStateError) as fenced:
        await persister.write_state(KEY, 1, 2, -1, [])
    assert fenced.value.error_code is ErrorCode.fenced_leader_epoch
    with pytest.raises(ShareStateError) as stale:
        await persister.write_state(KEY, 0, 3, -1, [])
    assert stale.value.error_code is ErrorCode.fenced_state_epoch
    await persister.delete_state(KEY)
    assert await persister.read_state(KEY, 3) is None
    assert isinstance(persister, InMemoryPersister)
    # the initializing snapshot, the read recording leader epoch 3 and a write (updates), a snapshot
    # (2 updates followed the last one), an update, the tombstone
    assert [r[0] for r in persister.records] == [0, 1, 1, 0, 1, 0]


class Locator:
    """Answers the coordinator errors queued in ``errors`` first, then ``node``."""

    def __init__(self, node: CoordinatorNode, *errors: ErrorCode) -> None:
        self.node = node
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self, key: str) -> CoordinatorNode:
        self.calls += 1
        assert key == "g:AAAAAAAAAAAAAAAAAAAAAQ:0"
        if self.errors:
            raise ShareStateError(self.errors.pop(0))
        return self.node


LOCAL = CoordinatorNode(1, "127.0.0.1", 9092)


@run
async def test_the_local_coordinator_is_called_after_retried_coordinator_errors() -> None:
    deps, _metadata, _creator = runtime_deps(MemoryOffsetsLog(), ManualClock())
    local = ShareCoordinator(ShareCoordinatorDeps(ShareCoordinatorConfig(num_partitions=1), deps))
    await local.startup()
    await settle()
    locate = Locator(LOCAL, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator)
    persister = DefaultStatePersister(locate, local=local, local_broker_id=1, retry_backoff_ms=1)
    await persister.initialize_state(KEY, 0, 7)
    assert locate.calls == 3
    assert await persister.read_state(KEY, 0) == ShareState(0, 7, 0)
    assert await persister.read_summary(KEY, 0) == ShareState(0, 7, 0)
    await persister.delete_state(KEY)
    assert await persister.read_state(KEY, 0) is None
    assert await persister.read_summary(KEY, 0) is None
    await local.shutdown()
    await persister.close()


@run
async def test_retries_end_at_the_deadline_and_other_errors_are_not_retried() -> None:
    locate = Locator(LOCAL, *[ErrorCode.coordinator_load_in_progress] * 1000)
    persister = DefaultStatePersister(locate, local_broker_id=1, retry_backoff_ms=1, max_wait_ms=30)
    with pytest.raises(ShareStateError) as late:
        await persister.read_state(KEY, 0)
    assert late.value.error_code is ErrorCode.coordinator_load_in_progress
    assert 1 < locate.calls < 100
    locate = Locator(LOCAL, ErrorCode.cluster_authorization_failed)
    persister = DefaultStatePersister(locate, local_broker_id=1, retry_backoff_ms=1)
    with pytest.raises(ShareStateError) as refused:
        await persister.read_state(KEY, 0)
    assert refused.value.error_code is ErrorCode.cluster_authorization_failed
    assert locate.calls == 1
