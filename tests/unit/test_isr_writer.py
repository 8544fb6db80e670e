"""The leader's ISR write to the partition state znode and the ISR change notifications
(:class:`~odradek.replication.isr_writer.ZkIsrWriter`), against an in-memory state znode."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Sequence

from odradek.metadata.errors import BadVersionError, CoordinationError, NoNodeError, StoreUnavailableError
from odradek.metadata.znodes import LeaderAndIsr
from odradek.replication.isr_writer import ZkIsrWriter
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

from .replication_fakes import TP


class StateZnode:
    """One partition's state znode (None: deleted) and the notifications written; ``failure`` is
    raised by every call when set."""

    def __init__(self, state: LeaderAndIsr | None) -> None:
        self.state = state
        self.notifications: list[list[TopicPartition]] = []
        self.failure: Exception | None = None
        self.batches: list[int] = []

    async def update_leader_and_isr(self, tp: TopicPartition, state: LeaderAndIsr, expected_zk_version: int) -> int:
        if self.failure is not None:
            raise self.failure
        if self.state is None:
            raise NoNodeError("no state znode")
        if expected_zk_version != self.state.zk_version:
            raise BadVersionError.at("state", expected_zk_version)
        self.state = dataclasses.replace(state, zk_version=expected_zk_version + 1)
        return self.state.zk_version

    async def update_leader_and_isrs(
        self, updates: Sequence[tuple[TopicPartition, LeaderAndIsr, int]]
    ) -> list[int | CoordinationError]:
        """The batch: each update as :meth:`update_leader_and_isr` (a lost session raises)."""
        self.batches.append(len(updates))
        out: list[int | CoordinationError] = []
        for tp, state, version in updates:
            try:
                out.append(await self.update_leader_and_isr(tp, state, version))
            except (BadVersionError, NoNodeError) as exc:
                out.append(exc)
        return out

    async def get_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        return self.state

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        if self.failure is not None:
            raise self.failure
        self.notifications.append(list(partitions))
        return "/isr_change_notification/isr_change_0000000000"


def _write(znode: StateZnode, proposed: PartitionState) -> int | None:
    return asyncio.run(ZkIsrWriter(1, znode).write_isr(TP, proposed))


def test_the_isr_is_written_on_the_version_the_leader_knows() -> None:
    znode = StateZnode(LeaderAndIsr(1, 5, [1, 2, 3], 2, zk_version=4))
    assert _write(znode, PartitionState(1, 5, [1, 2], [1, 2, 3], 2, zk_version=4)) == 5
    assert znode.state == LeaderAndIsr(1, 5, [1, 2], 2, zk_version=5)


def test_the_writes_of_one_loop_turn_go_in_one_batch() -> None:
    async def run() -> list[int | None]:
        znode = StateZnode(LeaderAndIsr(1, 5, [1, 2, 3], 2, zk_version=4))
        writer = ZkIsrWriter(1, znode)
        proposals = [PartitionState(1, 5, isr, [1, 2, 3], 2, zk_version=4 + i) for i, isr in enumerate(([1, 2], [1]))]
        results = await asyncio.gather(*(writer.write_isr(TP, p) for p in proposals))
        assert znode.batches == [2]  # both in one batch, applied in order
        return list(results)

    assert asyncio.run(run()) == [5, 6]


def test_a_moved_znode_of_the_same_term_is_written_again_on_its_version() -> None:
    znode = StateZnode(LeaderAndIsr(1, 5, [1, 2, 3], 2, zk_version=9))
    assert _write(znode, PartitionState(1, 5, [1, 2], [1, 2, 3], 2, zk_version=4)) == 10
    assert znode.state is not None and list(znode.state.isr) == [1, 2]


def test_a_new_term_a_deleted_znode_or_a_lost_session_writes_nothing() -> None:
    proposed = PartitionState(1, 5, [1, 2], [1, 2, 3], 2, zk_version=4)
    new_epoch = StateZnode(LeaderAndIsr(1, 6, [1, 2, 3], 2, zk_version=9))
    new_leader = StateZnode(LeaderAndIsr(2, 5, [2, 3], 2, zk_version=9))
    assert _write(new_epoch, proposed) is None and new_epoch.state is not None and new_epoch.state.leader_epoch == 6
    assert _write(new_leader, proposed) is None and new_leader.state is not None and new_leader.state.leader == 2
    assert _write(StateZnode(None), proposed) is None
    lost = StateZnode(LeaderAndIsr(1, 5, [1, 2, 3], 2, zk_version=4))
    lost.failure = StoreUnavailableError("connection lost")
    assert _write(lost, proposed) is None
    assert lost.state is not None and list(lost.state.isr) == [1, 2, 3]


def test_changes_are_propagated_in_one_notification_and_kept_when_it_fails() -> None:
    async def run() -> None:
        znode = StateZnode(None)
        writer = ZkIsrWriter(1, znode)
        other = TopicPartition("a", 3)
        await writer.propagate_isr_changes(set())
        assert znode.notifications == []  # nothing changed: nothing written
        changed = {TP, other}
        znode.failure = StoreUnavailableError("connection lost")
        await writer.propagate_isr_changes(changed)
        assert changed == {TP, other} and znode.notifications == []  # for the next run
        znode.failure = None
        await writer.propagate_isr_changes(changed)
        assert znode.notifications == [[other, TP]] and changed == set()

    asyncio.run(run())
