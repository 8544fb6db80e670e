"""Partition reassignment, step by step: adding the target replicas, waiting for them to join the
ISR, electing a leader from the target replicas, removing the old replicas; cancellation and
the ``/admin/reassign_partitions`` znode."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest
from tests.unit.controller_support import ControllerCluster, last_state
from tests.unit.metadata_support import run

from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.controller.state_machines import PartitionLifecycle, ReplicaLifecycle
from odradek.errors import ErrorCode
from odradek.metadata.znodes import PartitionAssignment
from odradek.storage import TopicPartition

T0 = TopicPartition("t", 0)


def scenario(fn: Callable[[ControllerCluster], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = ControllerCluster()
        try:
            await cluster.start(1, 2, 3, 4)
            await cluster.create_topic("t", {0: [1, 2]})
            await fn(cluster)
        finally:
            await cluster.close()

    run(main)


def test_each_reassignment_step(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="state.change.logger")

    async def check(cluster: ControllerCluster) -> None:
        controller = cluster.active
        channel = cluster.channel
        channel.clear()
        # 1. start: RS = TRS + (ORS - TRS), the new replicas get LeaderAndIsr and start fetching
        assert await controller.alter_partition_reassignments({T0: [3, 4]}) == {T0: (ErrorCode.none, None)}
        znode = await cluster.admin.get_replica_assignment_and_topic_id("t")
        assert znode is not None
        assert list(znode.partitions[0]) == [3, 4, 1, 2]
        assert list(znode.adding_replicas[0]) == [3, 4] and list(znode.removing_replicas[0]) == [1, 2]
        started = last_state(channel, 3, T0)
        assert (started.leader, started.isr, started.replicas, started.leader_epoch) == (1, [1, 2], [3, 4, 1, 2], 1)
        assert {b for b in (1, 2, 3, 4) if channel.sent(b, LeaderAndIsrRequest)} == {1, 2, 3, 4}
        assert controller.ctx.replica_lifecycle[(T0, 4)] is ReplicaLifecycle.OnlineReplica
        moves = controller.list_partition_reassignments(None)
        assert moves is not None and moves[T0].adding == [3, 4] and moves[T0].removing == [1, 2]
        # 2. wait: not complete while a target replica is out of the ISR
        await cluster.leader_writes_isr(T0, [1, 2, 3])
        assert T0 in controller.reassignments
        assert channel.sent(1, StopReplicaRequest) == []
        # 3. complete: a leader from the target replicas, the old ones leave the ISR and are removed
        channel.clear()
        await cluster.leader_writes_isr(T0, [1, 2, 3, 4])
        assert T0 not in controller.reassignments
        state = await cluster.state("t", 0)
        assert (state.leader, list(state.isr), state.leader_epoch) == (3, [3, 4], 2)
        done = await cluster.admin.get_replica_assignment_and_topic_id("t")
        assert done is not None and list(done.partitions[0]) == [3, 4]
        assert not done.adding_replicas and not done.removing_replicas
        assert last_state(channel, 4, T0).replicas == [3, 4]
        for removed in (1, 2):
            (stop,) = channel.sent(removed, StopReplicaRequest)
            assert stop.delete_partitions and stop.partitions == (T0,) and dict(stop.leader_epochs) == {T0: 2}
            assert (T0, removed) not in controller.ctx.replica_lifecycle
        assert channel.sent(1, UpdateMetadataRequest)[-1].partition_states[T0].replicas == [3, 4]
        assert controller.ctx.partition_lifecycle[T0] is PartitionLifecycle.OnlinePartition

    scenario(check)
    lines = [r.getMessage() for r in caplog.records if r.name == "state.change.logger"]
    assert any(
        "Changed partition t-0 from OnlinePartition to OnlinePartition with state LeaderAndIsr(leader=3" in line
        and "(reassignment completed)" in line
        for line in lines
    )
    assert any(
        "replica 1 for partition t-0 from ReplicaDeletionStarted to ReplicaDeletionSuccessful" in x for x in lines
    )
    assert any(
        "replica 4 for partition t-0 from NonExistentReplica to NewReplica (reassignment started)" in x for x in lines
    )


def test_cancel_goes_back_to_the_original_replicas() -> None:
    async def check(cluster: ControllerCluster) -> None:
        controller = cluster.active
        await controller.alter_partition_reassignments({T0: [1, 3]})
        assert controller.reassignments[T0].adding == [3]
        assert await controller.alter_partition_reassignments({T0: None}) == {T0: (ErrorCode.none, None)}
        # the cancelled move's new replica is removed once the original replicas are in sync
        assert T0 not in controller.reassignments
        assert (await cluster.admin.get_topic_assignment("t"))[0] == {0: [1, 2]}
        (stop,) = cluster.channel.sent(3, StopReplicaRequest)
        assert stop.partitions == (T0,)
        assert await controller.alter_partition_reassignments({T0: None}) == {
            T0: (ErrorCode.no_reassignment_in_progress, "No reassignment in progress")
        }

    scenario(check)


def test_invalid_targets_are_refused() -> None:
    async def check(cluster: ControllerCluster) -> None:
        controller = cluster.active
        result = await controller.alter_partition_reassignments({T0: [1, 1], TopicPartition("t", 5): [1]})
        assert result is not None
        assert result[T0] == (
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes duplicate replicas [1, 1].",
        )
        assert result[TopicPartition("t", 5)][0] is ErrorCode.unknown_topic_or_partition
        dead = await controller.alter_partition_reassignments({T0: [1, 9]})
        assert dead is not None and dead[T0][0] is ErrorCode.invalid_replica_assignment
        assert not controller.reassignments

    scenario(check)


def test_reassign_partitions_znode_starts_a_move_and_is_emptied_at_the_end() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.admin.set_partition_reassignment([PartitionAssignment("t", 0, (2, 3))])
        await cluster.settle()
        assert cluster.active.reassignments[T0].target == [2, 3]
        await cluster.leader_writes_isr(T0, [1, 2, 3])
        assert T0 not in cluster.active.reassignments
        assert await cluster.admin.get_partition_reassignment() == []
        assert (await cluster.state("t", 0)).leader == 2

    scenario(check)


def test_a_new_controller_lists_reassignments_only_once_it_resumed_them() -> None:
    """ListPartitionReassignments reaching a controller still in its failover is NOT_CONTROLLER
    (None), never an empty list that a ``--verify`` would read as every move completed."""

    async def check(cluster: ControllerCluster) -> None:
        old = cluster.active
        assert await old.alter_partition_reassignments({T0: [3, 4]}) == {T0: (ErrorCode.none, None)}
        await cluster.leader_writes_isr(T0, [1, 2, 3])
        seen: list[object] = []
        for controller in cluster.controllers.values():
            if controller is not old:
                resume = controller._resume_reassignments

                async def spy(resume: Callable[[], Awaitable[None]] = resume, c: object = controller) -> None:
                    seen.append(c.list_partition_reassignments(None))  # type: ignore[attr-defined]
                    await resume()

                controller._resume_reassignments = spy  # type: ignore[method-assign]
        await cluster.kill(old.broker_id)
        assert seen == [None]
        moves = cluster.active.list_partition_reassignments(None)
        assert moves is not None and moves[T0].target == [3, 4]

    scenario(check)
