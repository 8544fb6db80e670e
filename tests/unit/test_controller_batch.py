"""One request batch per controller event: whatever an event changes, each live broker gets at most
one LeaderAndIsr, one UpdateMetadata and one StopReplica, with every partition in its last state."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from tests.unit.controller_support import ControllerCluster, RecordingChannel, run_scenario
from tests.unit.metadata_support import run

from odradek.controller.batch import ControllerBrokerRequestBatch
from odradek.controller.context import ControllerContext
from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

BROKERS = (1, 2, 3, 4)
PARTITIONS = 24
ASSIGNMENT = {p: [BROKERS[(p + i) % 4] for i in range(3)] for p in range(PARTITIONS)}
"""Every broker hosts 18 of the 24 partitions, and leads 6."""


def counts(channel: RecordingChannel, broker_id: int) -> tuple[int, int, int]:
    return (
        len(channel.sent(broker_id, LeaderAndIsrRequest)),
        len(channel.sent(broker_id, UpdateMetadataRequest)),
        len(channel.sent(broker_id, StopReplicaRequest)),
    )


def scenario(fn: Callable[[ControllerCluster], Awaitable[None]]) -> None:
    run_scenario(fn, *BROKERS)


def test_a_topic_creation_sends_one_leader_and_isr_and_one_update_metadata_per_live_broker() -> None:
    async def check(cluster: ControllerCluster) -> None:
        cluster.channel.clear()
        await cluster.create_topic("t", ASSIGNMENT)
        for broker_id in BROKERS:
            assert counts(cluster.channel, broker_id) == (1, 1, 0), broker_id
            (request,) = cluster.channel.sent(broker_id, LeaderAndIsrRequest)
            hosted = {TopicPartition("t", p) for p, replicas in ASSIGNMENT.items() if broker_id in replicas}
            assert set(request.partition_states) == hosted
            (metadata,) = cluster.channel.sent(broker_id, UpdateMetadataRequest)
            assert len(metadata.partition_states) == PARTITIONS

    scenario(check)


def test_a_broker_failure_sends_one_leader_and_isr_and_one_update_metadata_per_live_broker() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", ASSIGNMENT)
        cluster.channel.clear()
        await cluster.kill(4)  # 18 partitions lose a replica, 6 of them their leader
        controller = cluster.active
        for broker_id in (1, 2, 3):
            assert counts(cluster.channel, broker_id) == (1, 1, 0), broker_id
            (request,) = cluster.channel.sent(broker_id, LeaderAndIsrRequest)
            for tp, state in request.partition_states.items():
                assert 4 not in state.isr and state.leader != 4
                assert state == controller.ctx.states[tp]  # each partition in its last state
        assert cluster.channel.sent(4, LeaderAndIsrRequest) == []

    scenario(check)


def test_a_new_controller_sends_one_of_each_per_live_broker() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", ASSIGNMENT)
        await cluster.create_topic("u", {0: [2, 3]})
        await cluster.kill(1)  # the controller: another takes over and sends the whole state
        for broker_id in (2, 3, 4):
            assert counts(cluster.channel, broker_id) == (1, 1, 0), broker_id

    scenario(check)


def test_many_reassignments_in_one_request_send_one_of_each_per_broker() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {p: [1, 2] for p in range(8)})
        cluster.channel.clear()
        targets: dict[TopicPartition, list[int] | None] = {TopicPartition("t", p): [3, 4] for p in range(8)}
        await cluster.active.alter_partition_reassignments(targets)
        await cluster.settle()
        for broker_id in BROKERS:
            assert counts(cluster.channel, broker_id) == (1, 1, 0), broker_id
            (request,) = cluster.channel.sent(broker_id, LeaderAndIsrRequest)
            assert set(request.partition_states) == set(targets)

    scenario(check)


def test_the_batch_merges_what_an_event_adds_and_sends_each_partition_in_its_last_state() -> None:
    async def main() -> None:
        ctx = ControllerContext(epoch=3)
        ctx.live_brokers = {b: BrokerInfo(b, "localhost", 9000 + b) for b in (1, 2)}
        t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
        ctx.topic_ids = {"t": uuid.uuid4()}
        channel = RecordingChannel(9)
        for info in ctx.live_brokers.values():
            channel.add_broker(info)
        batch = ControllerBrokerRequestBatch(9, ctx, channel)
        batch.new_batch()
        assert batch.is_empty()
        ctx.states[t0] = PartitionState(1, 1, [1, 2], [1, 2, 3], 3, 0)
        batch.add_leader_and_isr([1, 2, 3], [t0])  # 3 is not live: left out
        ctx.states[t0] = PartitionState(2, 2, [2], [1, 2, 3], 3, 1)  # changed again in the same event
        ctx.states[t1] = PartitionState(2, 0, [2], [2], 3, 0)
        batch.add_leader_and_isr([2], [t1])
        batch.add_stop_replica(1, t1, True, 0)
        batch.add_stop_replica(3, t1, True, 0)  # not live: left out
        await batch.send_requests_to_brokers()
        assert batch.is_empty()
        assert counts(channel, 1) == (1, 1, 1) and counts(channel, 2) == (1, 1, 0)
        assert dict(channel.sent(1, LeaderAndIsrRequest)[0].partition_states) == {t0: ctx.states[t0]}
        assert dict(channel.sent(2, LeaderAndIsrRequest)[0].partition_states) == {
            t0: ctx.states[t0],
            t1: ctx.states[t1],
        }
        assert set(channel.sent(2, UpdateMetadataRequest)[0].partition_states) == {t0, t1}
        (stop,) = channel.sent(1, StopReplicaRequest)
        assert stop.partitions == (t1,) and stop.delete_partitions
        channel.clear()
        batch.add_update_metadata()  # the live brokers only
        batch.clear()
        await batch.send_requests_to_brokers()
        assert counts(channel, 1) == counts(channel, 2) == (0, 0, 0)

    run(main)


def test_a_new_controller_without_partitions_still_sends_the_live_brokers() -> None:
    async def check(cluster: ControllerCluster) -> None:
        assert counts(cluster.channel, 1) == (0, 1, 0)
        (metadata,) = cluster.channel.sent(1, UpdateMetadataRequest)
        assert [b.id for b in metadata.live_brokers] == [1] and not metadata.partition_states

    run_scenario(check, 1)
