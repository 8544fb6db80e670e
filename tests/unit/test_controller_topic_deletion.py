"""Topic deletion as Kafka's TopicDeletionManager runs it: the controller waits for the replicas'
StopReplica answers, marks replicas on dead brokers (and failed answers) ReplicaDeletionIneligible,
and retries them when their broker registers again."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest
from tests.unit.controller_support import ControllerCluster, run_scenario

from odradek.controller.messages.update_metadata import LEADER_DURING_DELETE
from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.controller.state_machines import ReplicaLifecycle
from odradek.errors import ErrorCode
from odradek.storage import TopicPartition

R = ReplicaLifecycle
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def ineligible(caplog: pytest.LogCaptureFixture, tp: TopicPartition, replica: int) -> bool:
    """``replica`` of ``tp`` went ReplicaDeletionIneligible (the deletion's retry then moves it back
    to OfflineReplica at once, as Kafka's markTopicForDeletionRetry, while its topic stays ineligible)."""
    return any(
        f"replica {replica} for partition {tp.topic}-{tp.partition} from " in r.getMessage()
        and "to ReplicaDeletionIneligible" in r.getMessage()
        for r in caplog.records
        if r.name == "state.change.logger"
    )


def scenario(fn: Callable[[ControllerCluster], Awaitable[None]]) -> None:
    """Brokers 1..3 (1 the controller) and topic t: t-0 on [2, 3], t-1 on [3, 2]."""

    async def with_topic(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 3], 1: [3, 2]})
        await fn(cluster)

    run_scenario(with_topic, 1, 2, 3)


async def delete(cluster: ControllerCluster, topic: str) -> None:
    await cluster.admin.request_topic_deletion(topic)
    await cluster.settle()


async def gone(cluster: ControllerCluster, topic: str) -> bool:
    return not await cluster.admin.topic_exists(topic) and topic not in await cluster.admin.get_topic_deletions()


def test_deletion_waits_for_every_stop_replica_answer() -> None:
    async def check(cluster: ControllerCluster) -> None:
        controller, channel = cluster.active, cluster.channel
        channel.silent.add(3)
        await delete(cluster, "t")
        assert await cluster.admin.topic_exists("t") and "t" in controller.ctx.topics_to_be_deleted
        machine = controller.replica_state_machine
        assert machine.state(T0, 2) is machine.state(T1, 2) is R.ReplicaDeletionSuccessful
        assert machine.state(T0, 3) is machine.state(T1, 3) is R.ReplicaDeletionStarted
        for broker_id in (1, 2, 3):  # every broker forgets the topic at once
            (metadata,) = [m for m in channel.sent(broker_id, UpdateMetadataRequest) if m.deleted_topics]
            assert metadata.deleted_topics == {"t"} and metadata.partition_states[T0].leader == LEADER_DURING_DELETE
        ((broker_id, request, answer),) = channel.unanswered
        assert broker_id == 3 and request.delete_partitions and sorted(request.partitions) == [T0, T1]
        channel.silent.clear()
        await channel.send_stop_replica(broker_id, request, answer)  # the answer arrives
        await cluster.settle()
        assert await gone(cluster, "t")
        assert not controller.ctx.topics_to_be_deleted and "t" not in controller.ctx.assignments
        assert not any(tp.topic == "t" for tp, _ in controller.ctx.replica_lifecycle)

    scenario(check)


def test_a_replica_on_a_dead_broker_is_ineligible_until_the_broker_returns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="state.change.logger")

    async def check(cluster: ControllerCluster) -> None:
        await cluster.kill(3)
        controller, channel = cluster.active, cluster.channel
        await delete(cluster, "t")
        machine = controller.replica_state_machine
        assert await cluster.admin.topic_exists("t") and controller.ctx.topics_ineligible_for_deletion == {"t"}
        assert ineligible(caplog, T0, 3) and ineligible(caplog, T1, 3)
        assert machine.state(T0, 3) is machine.state(T1, 3) is R.OfflineReplica  # not deleted, to be retried
        assert machine.state(T0, 2) is R.ReplicaDeletionSuccessful
        channel.clear()
        await cluster.start_broker(3)  # it returns: StopReplica again, and no LeaderAndIsr for t
        (stop,) = channel.sent(3, StopReplicaRequest)
        assert stop.delete_partitions and sorted(stop.partitions) == [T0, T1]
        assert not any("t" in {tp.topic for tp in r.partition_states} for r in channel.sent(3, LeaderAndIsrRequest))
        assert channel.sent(2, StopReplicaRequest) == []  # its replicas were deleted already
        assert await gone(cluster, "t") and not controller.ctx.topics_ineligible_for_deletion

    scenario(check)


def test_a_broker_that_dies_before_answering_gets_the_request_again_when_it_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="state.change.logger")

    async def check(cluster: ControllerCluster) -> None:
        controller, channel = cluster.active, cluster.channel
        channel.silent.add(3)
        await delete(cluster, "t")
        await cluster.kill(3)
        assert ineligible(caplog, T0, 3) and controller.replica_state_machine.state(T0, 3) is R.OfflineReplica
        assert await cluster.admin.topic_exists("t") and controller.ctx.topics_ineligible_for_deletion == {"t"}
        channel.silent.clear()
        channel.clear()
        await cluster.start_broker(3)
        assert len(channel.sent(3, StopReplicaRequest)) == 1
        assert await gone(cluster, "t")

    scenario(check)


def test_a_failed_answer_is_retried_when_the_broker_registers_again(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="state.change.logger")

    async def check(cluster: ControllerCluster) -> None:
        controller, channel = cluster.active, cluster.channel
        channel.stop_replica_errors[3] = ErrorCode.kafka_storage_error
        await delete(cluster, "t")
        assert ineligible(caplog, T1, 3) and controller.replica_state_machine.state(T1, 3) is R.OfflineReplica
        assert await cluster.admin.topic_exists("t") and "t" in controller.ctx.topics_ineligible_for_deletion
        del channel.stop_replica_errors[3]
        await cluster.kill(3)
        await cluster.start_broker(3)
        assert await gone(cluster, "t")

    scenario(check)


def test_a_new_controller_resumes_a_deletion_in_progress() -> None:
    async def check(cluster: ControllerCluster) -> None:
        assert cluster.active.broker_id == 1
        cluster.channel.silent.add(3)
        await delete(cluster, "t")
        assert await cluster.admin.topic_exists("t")
        await cluster.kill(1)
        successor = cluster.active
        assert successor.broker_id != 1 and await gone(cluster, "t")
        assert sorted(cluster.channel.sent(3, StopReplicaRequest)[0].partitions) == [T0, T1]

    scenario(check)
