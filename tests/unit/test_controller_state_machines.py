"""Kafka's partition and replica state machines: the tables, illegal transitions (raised and
logged by ``state.change.logger``), topic deletion through the replica deletion states, and the
immutability of the partition states the controller hands to its requests."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from tests.unit.controller_support import ControllerCluster, last_state
from tests.unit.metadata_support import run

from odradek.controller.context import ControllerContext
from odradek.controller.messages.update_metadata import LEADER_DURING_DELETE
from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.controller.state_machines import (
    VALID_PREVIOUS_PARTITION_STATES,
    VALID_PREVIOUS_REPLICA_STATES,
    IllegalStateTransition,
    PartitionLifecycle,
    PartitionStateMachine,
    ReplicaLifecycle,
    ReplicaStateMachine,
)
from odradek.metadata.znodes import LeaderAndIsr
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

P = PartitionLifecycle
R = ReplicaLifecycle
T0 = TopicPartition("t", 0)


def test_tables_are_kafkas() -> None:
    assert VALID_PREVIOUS_PARTITION_STATES[P.NewPartition] == {P.NonExistentPartition}
    assert VALID_PREVIOUS_PARTITION_STATES[P.OnlinePartition] == {P.NewPartition, P.OnlinePartition, P.OfflinePartition}
    assert VALID_PREVIOUS_PARTITION_STATES[P.OfflinePartition] == {
        P.NewPartition,
        P.OnlinePartition,
        P.OfflinePartition,
    }
    assert VALID_PREVIOUS_PARTITION_STATES[P.NonExistentPartition] == {P.OfflinePartition}
    assert VALID_PREVIOUS_REPLICA_STATES[R.NewReplica] == {R.NonExistentReplica}
    both = {R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionIneligible}
    assert VALID_PREVIOUS_REPLICA_STATES[R.OnlineReplica] == both == VALID_PREVIOUS_REPLICA_STATES[R.OfflineReplica]
    assert VALID_PREVIOUS_REPLICA_STATES[R.ReplicaDeletionStarted] == {R.OfflineReplica}
    assert VALID_PREVIOUS_REPLICA_STATES[R.ReplicaDeletionSuccessful] == {R.ReplicaDeletionStarted}
    assert VALID_PREVIOUS_REPLICA_STATES[R.ReplicaDeletionIneligible] == {R.OfflineReplica, R.ReplicaDeletionStarted}
    assert VALID_PREVIOUS_REPLICA_STATES[R.NonExistentReplica] == {R.ReplicaDeletionSuccessful}


def test_illegal_partition_transition_raises_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    ctx = ControllerContext(epoch=7)
    machine = PartitionStateMachine(4, ctx)
    with caplog.at_level(logging.DEBUG, logger="state.change.logger"):
        with pytest.raises(IllegalStateTransition):
            machine.transition(T0, P.OnlinePartition)  # NonExistentPartition cannot go online
        machine.transition(T0, P.NewPartition, cause="test")
        with pytest.raises(IllegalStateTransition):
            machine.transition(T0, P.NonExistentPartition)  # only from OfflinePartition
    assert machine.state(T0) is P.NewPartition
    errors = [r for r in caplog.records if r.name == "state.change.logger" and r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "[Controller id=4 epoch=7] Controller 4 epoch 7 failed to change state for partition t-0 from "
        "NonExistentPartition to OnlinePartition: Partition t-0 should be in one of NewPartition,OfflinePartition,"
        "OnlinePartition states before moving to OnlinePartition state. Instead it is in NonExistentPartition state",
        "[Controller id=4 epoch=7] Controller 4 epoch 7 failed to change state for partition t-0 from NewPartition "
        "to NonExistentPartition: Partition t-0 should be in one of OfflinePartition states before moving to "
        "NonExistentPartition state. Instead it is in NewPartition state",
    ]


def test_illegal_replica_transition_raises_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    ctx = ControllerContext(epoch=2)
    machine = ReplicaStateMachine(1, ctx)
    with caplog.at_level(logging.DEBUG, logger="state.change.logger"):
        with pytest.raises(IllegalStateTransition):
            machine.transition(T0, 3, R.OnlineReplica)
        machine.transition(T0, 3, R.NewReplica, "new partition")
        machine.transition(T0, 3, R.OnlineReplica, "new partition")
        with pytest.raises(IllegalStateTransition):
            machine.transition(T0, 3, R.ReplicaDeletionStarted)  # only from OfflineReplica
    assert machine.state(T0, 3) is R.OnlineReplica
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "state.change.logger"]
    assert messages[1] == (
        logging.DEBUG,
        "[Controller id=1 epoch=2] Changed state of replica 3 for partition t-0 from NonExistentReplica to NewReplica "
        "(new partition)",
    )
    assert [level for level, _ in messages] == [logging.ERROR, logging.DEBUG, logging.DEBUG, logging.ERROR]
    assert "Replica 3 for partition t-0 should be in the OfflineReplica states before moving to " in messages[-1][1]


def test_topic_deletion_moves_replicas_through_the_deletion_states(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="state.change.logger")

    async def main() -> None:
        cluster = ControllerCluster()
        try:
            await cluster.start(1, 2, 3)
            await cluster.create_topic("t", {0: [1, 2], 1: [2, 3]})
            await cluster.create_topic("u", {0: [3]})
            cluster.channel.clear()
            await cluster.admin.request_topic_deletion("t")
            await cluster.settle()
            assert not await cluster.admin.topic_exists("t") and await cluster.admin.get_topic_deletions() == []
            ctx = cluster.active.ctx
            assert {tp.topic for tp in ctx.partition_lifecycle} == {"u"}
            assert {tp.topic for tp, _ in ctx.replica_lifecycle} == {"u"}
            # one StopReplica per broker, for the replicas it hosts (Kafka's replica state machine)
            for broker_id, partitions in ((1, [T0]), (2, [T0, TopicPartition("t", 1)]), (3, [TopicPartition("t", 1)])):
                (stop,) = cluster.channel.sent(broker_id, StopReplicaRequest)
                assert stop.delete_partitions and sorted(stop.partitions) == partitions
            metadata = cluster.channel.sent(2, UpdateMetadataRequest)[-1]
            assert metadata.deleted_topics == {"t"} and metadata.partition_states[T0].leader == LEADER_DURING_DELETE
        finally:
            await cluster.close()

    run(main)
    lines = [r.getMessage() for r in caplog.records if r.name == "state.change.logger"]
    for a, b in [
        ("OnlineReplica", "OfflineReplica"),
        ("OfflineReplica", "ReplicaDeletionStarted"),
        ("ReplicaDeletionStarted", "ReplicaDeletionSuccessful"),
        ("ReplicaDeletionSuccessful", "NonExistentReplica"),
    ]:
        assert any(f"replica 2 for partition t-0 from {a} to {b} (topic deletion)" in line for line in lines), (a, b)
    assert any("Changed partition t-0 state from OfflinePartition to NonExistentPartition" in line for line in lines)
    assert not any(r.levelno >= logging.ERROR for r in caplog.records if r.name == "state.change.logger")


def test_partition_state_converts_to_and_from_its_znode() -> None:
    znode = LeaderAndIsr(leader=2, leader_epoch=5, isr=[2, 3], controller_epoch=4, zk_version=9)
    state = PartitionState.from_znode(znode, [3, 2, 1])
    assert state == PartitionState(2, 5, [2, 3], [3, 2, 1], 4, 9)
    assert state.to_znode() == znode
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.replicas = [1]  # type: ignore[misc]


def test_queued_leader_and_isr_keeps_the_state_it_was_built_with() -> None:
    """The suspected defect "queued LeaderAndIsr requests are encoded at send time from
    PartitionState objects that are mutated in place": the controller used to set
    ``state.replicas`` on the state a queued request held when an assignment changed, so the
    request, encoded later, carried the new replicas. States are now replaced, never mutated."""

    async def main() -> None:
        cluster = ControllerCluster()
        try:
            await cluster.start(1, 2, 3)
            await cluster.create_topic("t", {0: [1, 2]})
            queued = cluster.channel.sent(1, LeaderAndIsrRequest)[-1]
            held = queued.partition_states[T0]
            metadata = cluster.channel.sent(3, UpdateMetadataRequest)[-1]
            # the assignment grows while the leader and ISR stay: a new state, no new LeaderAndIsr
            topic_id = cluster.active.ctx.topic_ids["t"]
            await cluster.admin.set_topic_assignment("t", {0: [1, 2, 3]}, topic_id)
            await cluster.settle()
            assert cluster.active.ctx.states[T0].replicas == [1, 2, 3]
            assert cluster.active.ctx.states[T0] is not held
            assert queued.partition_states[T0] is held and held.replicas == [1, 2]
            assert metadata.partition_states[T0].replicas == [1, 2]
            # a reassignment that only reorders the replicas replaces the state too
            assert await cluster.active.alter_partition_reassignments({T0: [3, 2, 1]}) == {T0: (0, None)}
            assert cluster.active.ctx.states[T0].replicas == [3, 2, 1]
            assert held.replicas == [1, 2] and last_state(cluster.channel, 1, T0) is held
        finally:
            await cluster.close()

    run(main)


def test_the_state_machines_are_built_once_and_follow_the_context_through_a_new_election() -> None:
    async def main() -> None:
        cluster = ControllerCluster()
        try:
            await cluster.start(1)
            await cluster.create_topic("t", {0: [1]})
            controller = cluster.active
            partitions, replicas, ctx = (
                controller.partition_state_machine,
                controller.replica_state_machine,
                controller.ctx,
            )
            ctx.shutting_down.add(7)  # something only this election knows
            await cluster.admin.store.delete("/controller")  # it resigns and is elected again
            await cluster.settle()
            assert cluster.active is controller and controller.ctx.epoch == 2
            assert controller.partition_state_machine is partitions and controller.replica_state_machine is replicas
            assert controller.ctx is ctx is partitions.ctx is replicas.ctx is controller.batch.ctx
            assert not ctx.shutting_down  # emptied in place, then loaded again
            assert partitions.state(T0) is P.OnlinePartition and T0 in ctx.states
        finally:
            await cluster.close()

    run(main)
