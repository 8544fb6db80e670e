"""The controller without processes: its election and failover, and partition leader elections
(new topics, broker failure, offline and unclean elections, ISR changes, controlled shutdown,
preferred election) against an in-memory store and a recording channel."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest
from tests.unit.controller_support import ControllerCluster, last_state
from tests.unit.metadata_support import run

from odradek.controller.events import LeaderAndIsrResponseReceived
from odradek.controller.requests import LeaderAndIsrRequest, UpdateMetadataRequest
from odradek.controller.state_machines import PartitionLifecycle, ReplicaLifecycle
from odradek.errors import ErrorCode
from odradek.metadata.znodes import LeaderAndIsr
from odradek.storage import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def scenario(
    fn: Callable[[ControllerCluster], Awaitable[None]], brokers: tuple[int, ...] = (1, 2, 3), unclean: bool = False
) -> None:
    async def main() -> None:
        cluster = ControllerCluster(unclean)
        try:
            await cluster.start(*brokers)
            await fn(cluster)
        finally:
            await cluster.close()

    run(main)


# --- controller election -------------------------------------------------------------------------


def test_first_broker_becomes_controller_with_epoch_1() -> None:
    async def check(cluster: ControllerCluster) -> None:
        assert [c.broker_id for c in cluster.controllers.values() if c.active] == [1]
        assert cluster.active.ctx.epoch == 1
        assert {c.active_controller_id for c in cluster.controllers.values()} == {1}
        # created at epoch 0 and bumped in the election's multi, as Kafka: epoch 1 at version 1,
        # the version every partition state write of this controller is conditional on
        assert await cluster.admin.get_controller_epoch() == (1, 1)
        assert cluster.active.ctx.epoch_zk_version == 1
        # the controller knows every broker that registered after it
        assert set(cluster.active.ctx.live_brokers) == {1, 2, 3}

    scenario(check)


def test_controller_session_end_elects_another_controller_with_a_higher_epoch() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [1, 2, 3]})
        await cluster.kill(1)
        successor = cluster.active
        assert successor.broker_id in (2, 3)
        assert successor.ctx.epoch == 2
        assert (await cluster.admin.get_controller_id()) == successor.broker_id
        # the new controller re-elected the partition the old one led, with its own epoch
        state = await cluster.state("t", 0)
        assert state.leader == 2 and state.controller_epoch == 2 and list(state.isr) == [2, 3]
        requests = cluster.channel.sent(2, LeaderAndIsrRequest)
        assert requests and all(r.controller_epoch == 2 for r in requests)
        metadata = cluster.channel.sent(3, UpdateMetadataRequest)[-1]
        assert metadata.controller_epoch == 2 and {b.id for b in metadata.live_brokers} == {2, 3}

    scenario(check)


def test_a_new_controller_reads_and_writes_the_cluster_state_in_pipelined_batches() -> None:
    """Failover reads every topic's assignment in one batch, then every partition's state in one
    (Kafka's KafkaZkClient pipelines them), and elects every partition the old controller led in
    one batch of conditional writes decided from those states, instead of one ZooKeeper round
    trip after another: those partitions wait for the reads and writes before their LeaderAndIsr."""
    batches: dict[str, list[int]] = {}
    single: list[str] = []

    def batched(name: str, call: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
        async def wrapper(items: list[object], *args: object) -> object:
            batches.setdefault(name, []).append(len(items))
            return await call(items, *args)

        return wrapper

    def one_by_one(name: str, call: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
        async def wrapper(*args: object) -> object:
            single.append(name)
            return await call(*args)

        return wrapper

    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [1, 2, 3], 1: [1, 3, 2], 2: [3, 1, 2]})
        await cluster.create_topic("u", {0: [1, 2, 3], 1: [2, 3, 1]})
        for broker_id in (2, 3):
            zk = cluster.controllers[broker_id].zk
            zk.get_topic_assignments = batched("assignments", zk.get_topic_assignments)  # type: ignore[method-assign]
            zk.get_partition_states_of = batched("states", zk.get_partition_states_of)  # type: ignore[method-assign]
            zk.update_leader_and_isrs = batched("writes", zk.update_leader_and_isrs)  # type: ignore[method-assign]
            zk.get_partition_state = one_by_one("state", zk.get_partition_state)  # type: ignore[method-assign]
            zk.update_leader_and_isr = one_by_one("write", zk.update_leader_and_isr)  # type: ignore[method-assign]
        await cluster.kill(1)
        assert cluster.active.ctx.epoch == 2
        # both topics' assignments, then all 5 states; every partition had 1 as leader or in its
        # ISR, so all 5 are rewritten together, decided from the states just read
        assert batches == {"assignments": [2], "states": [5], "writes": [5]}
        assert single == []
        assert [(await cluster.state("t", p)).leader for p in (0, 1, 2)] == [2, 3, 3]
        assert [list((await cluster.state("u", p)).isr) for p in (0, 1)] == [[2, 3], [2, 3]]

    scenario(check)


def test_a_deposed_controller_cannot_write_partition_state_and_resigns() -> None:
    """A controller that missed the loss of its session (its watches were lost with it) still
    thinks it is active; its first partition state write is conditional on the ``/controller_epoch``
    version it was elected with (Kafka's ``controllerEpochZkVersion``), fails with
    ControllerMovedError, and it resigns without having sent anything: its successor's state stays."""

    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1, 3]})
        stale = cluster.controllers[1]
        for handle in stale._watches:
            handle.cancel()
        await cluster.sessions[1].expire()
        await cluster.settle()
        successor = next(c for c in cluster.controllers.values() if c.active and c is not stale)
        assert successor.ctx.epoch == 2 and stale.active and stale.ctx.epoch == 1
        before = await cluster.state("t", 0)
        cluster.channels[1].clear()
        assert await stale.controlled_shutdown(2) == (ErrorCode.not_controller, [])
        await stale.wait_idle()
        assert not stale.active
        assert await cluster.state("t", 0) == before
        sent = [r for requests in cluster.channels[1].requests.values() for r in requests]
        assert sent == []

    scenario(check)


# --- new partitions ------------------------------------------------------------------------------


def test_new_topic_goes_online_with_the_first_live_replica_leading(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="state.change.logger")

    async def check(cluster: ControllerCluster) -> None:
        topic_id = await cluster.create_topic("t", {0: [3, 2, 1], 1: [1, 2, 3]})
        state = await cluster.state("t", 0)
        assert (state.leader, list(state.isr), state.leader_epoch, state.controller_epoch) == (2, [2, 1], 0, 1)
        assert (await cluster.state("t", 1)).leader == 1
        ctx = cluster.active.ctx
        assert ctx.partition_lifecycle[T0] is PartitionLifecycle.OnlinePartition
        assert ctx.replica_lifecycle[(T0, 3)] is ReplicaLifecycle.OfflineReplica
        assert ctx.replica_lifecycle[(T0, 2)] is ReplicaLifecycle.OnlineReplica
        # LeaderAndIsr to the live replicas only, UpdateMetadata to every live broker
        channel = cluster.channel
        assert set(channel.requests) == {1, 2}
        sent = last_state(channel, 1, T0)
        assert (sent.leader, sent.isr, sent.replicas) == (2, [2, 1], [3, 2, 1])
        assert channel.sent(1, LeaderAndIsrRequest)[-1].topic_ids == {"t": topic_id}
        assert channel.sent(2, UpdateMetadataRequest)[-1].partition_states[T1].leader == 1

    scenario(check, brokers=(1, 2))
    lines = [r.getMessage() for r in caplog.records if r.name == "state.change.logger"]
    assert (
        "[Controller id=1 epoch=1] Changed partition t-0 state from NonExistentPartition to NewPartition "
        in (
            lines[0][
                : len(
                    "[Controller id=1 epoch=1] Changed partition t-0 state from NonExistentPartition to NewPartition "
                )
            ]
        )
    )
    assert any(
        "Changed partition t-0 from NewPartition to OnlinePartition with state "
        "LeaderAndIsr(leader=2, leaderEpoch=0, isr=[2, 1], zkVersion=0)" in line
        for line in lines
    )
    assert any(
        "Changed state of replica 3 for partition t-0 from NewReplica to OfflineReplica" in line for line in lines
    )


# --- broker failure ------------------------------------------------------------------------------


def test_broker_failure_elects_a_leader_from_the_isr_and_shrinks_isrs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="state.change.logger")

    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 3, 1], 1: [1, 2, 3]})
        await cluster.kill(2)
        led = await cluster.state("t", 0)
        assert (led.leader, list(led.isr), led.leader_epoch) == (3, [3, 1], 1)
        followed = await cluster.state("t", 1)
        assert (followed.leader, list(followed.isr), followed.leader_epoch) == (1, [1, 3], 1)
        ctx = cluster.active.ctx
        assert ctx.replica_lifecycle[(T0, 2)] is ReplicaLifecycle.OfflineReplica
        assert ctx.partition_lifecycle[T0] is PartitionLifecycle.OnlinePartition
        assert last_state(cluster.channel, 3, T0).leader == 3
        assert 2 not in cluster.channel.requests or not cluster.channel.sent(2, LeaderAndIsrRequest)[1:]

    scenario(check)
    lines = [r.getMessage() for r in caplog.records if r.name == "state.change.logger"]
    assert any("Changed partition t-0 state from OnlinePartition to OfflinePartition" in line for line in lines)
    assert any(
        "Changed partition t-0 from OfflinePartition to OnlinePartition with state LeaderAndIsr(leader=3" in line
        for line in lines
    )
    assert any(
        "Changed state of replica 2 for partition t-1 from OnlineReplica to OfflineReplica" in line for line in lines
    )


def test_no_live_isr_member_leaves_the_partition_offline_until_unclean_election_is_enabled() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1]})
        await cluster.leader_writes_isr(T0, [2])  # 1 fell out of the ISR
        await cluster.kill(2)
        offline = await cluster.state("t", 0)
        assert (offline.leader, list(offline.isr)) == (-1, [2])  # Kafka keeps the last ISR
        ctx = cluster.active.ctx
        assert ctx.partition_lifecycle[T0] is PartitionLifecycle.OfflinePartition
        assert cluster.channel.sent(1, UpdateMetadataRequest)[-1].partition_states[T0].leader == -1
        # turning unclean election on for the topic elects the out-of-ISR replica at once
        await cluster.admin.set_entity_configs("topics", "t", {"unclean.leader.election.enable": "true"})
        await cluster.settle()
        unclean = await cluster.state("t", 0)
        assert (unclean.leader, list(unclean.isr)) == (1, [1])
        assert ctx.partition_lifecycle[T0] is PartitionLifecycle.OnlinePartition
        assert last_state(cluster.channel, 1, T0).leader == 1

    scenario(check, brokers=(1, 2))


def test_a_dynamic_broker_default_reaches_the_next_offline_election() -> None:
    """``unclean.leader.election.enable`` changed on a running broker (a dynamic broker config)
    applies to the next election of a topic without an override."""

    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1], 1: [2, 1]})
        await cluster.leader_writes_isr(T0, [2])
        cluster.active.set_unclean_leader_election_default(True)
        await cluster.leader_writes_isr(T1, [2])
        await cluster.kill(2)
        for tp in (T0, T1):
            state = await cluster.state("t", tp.partition)
            assert (state.leader, list(state.isr)) == (1, [1])

    scenario(check, brokers=(1, 2))


def test_broker_default_unclean_election_elects_an_out_of_isr_replica() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1]})
        await cluster.leader_writes_isr(T0, [2])
        await cluster.kill(2)
        state = await cluster.state("t", 0)
        assert (state.leader, list(state.isr)) == (1, [1])

    scenario(check, brokers=(1, 2), unclean=True)


# --- ISR changes, controlled shutdown, preferred election ----------------------------------------


def test_isr_change_notification_sends_update_metadata_only() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [1, 2, 3]})
        cluster.channel.clear()
        await cluster.leader_writes_isr(T0, [1, 3])
        for broker_id in (1, 2, 3):
            assert cluster.channel.sent(broker_id, LeaderAndIsrRequest) == []
            (metadata,) = cluster.channel.sent(broker_id, UpdateMetadataRequest)
            assert metadata.partition_states[T0].isr == [1, 3]
        assert cluster.active.ctx.states[T0].isr == [1, 3]
        assert await cluster.admin.pop_isr_change_notifications() == set()  # consumed

    scenario(check)


def test_controlled_shutdown_moves_leadership_and_leaves_the_isrs() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1, 3], 1: [1, 2, 3], 2: [2]})
        error, remaining = await cluster.active.controlled_shutdown(2)
        assert error is ErrorCode.none and remaining == []  # t-2 has no other replica: not counted
        moved = await cluster.state("t", 0)
        assert (moved.leader, list(moved.isr), moved.leader_epoch) == (1, [1, 3], 1)
        followed = await cluster.state("t", 1)
        assert (followed.leader, list(followed.isr)) == (1, [1, 3])
        assert (await cluster.state("t", 2)).leader == 2
        assert last_state(cluster.channel, 3, T0).leader == 1
        ctx = cluster.active.ctx
        assert ctx.replica_lifecycle[(T0, 2)] is ReplicaLifecycle.OfflineReplica
        assert ctx.shutting_down == {2}
        assert await cluster.active.controlled_shutdown(9) == (ErrorCode.broker_not_available, [])
        assert await cluster.controllers[3].controlled_shutdown(2) == (ErrorCode.not_controller, [])

    scenario(check)


def test_controlled_shutdown_rewrites_the_partition_states_in_one_pipelined_batch() -> None:
    """ControlledShutdown moves every partition of the broker in one batch (Kafka's
    updateLeaderAndIsr pipelines the batch's writes), not one read-then-write after another: the
    broker's clients wait for the last of those writes before its LeaderAndIsr."""
    batches: list[int] = []

    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1, 3], 1: [2, 3, 1], 2: [3, 2, 1], 3: [2, 1, 3]})
        zk = cluster.active.zk
        write = zk.update_leader_and_isrs

        async def counted(updates: list[object], *args: object) -> object:
            batches.append(len(updates))
            return await write(updates, *args)  # type: ignore[arg-type]

        zk.update_leader_and_isrs = counted  # type: ignore[method-assign]
        assert await cluster.active.controlled_shutdown(2) == (ErrorCode.none, [])
        assert batches == [4]  # three leaders moved, one ISR shrunk: all in one batch
        assert [(await cluster.state("t", p)).leader for p in range(4)] == [1, 3, 3, 1]

    scenario(check)


def test_preferred_replica_election() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1]})
        await cluster.kill(2)
        assert (await cluster.state("t", 0)).leader == 1
        await cluster.start_broker(2)
        controller = cluster.active
        assert await controller.elect_leaders({T0}, unclean=False) == {T0: ErrorCode.preferred_leader_not_available}
        await cluster.leader_writes_isr(T0, [1, 2])  # 2 caught up
        assert controller.leader_imbalance() == {2: (1, 1)}
        assert await controller.elect_leaders({T0}, unclean=False) == {T0: ErrorCode.none}
        state = await cluster.state("t", 0)
        assert (state.leader, list(state.isr)) == (2, [1, 2])
        assert last_state(cluster.channel, 2, T0).leader == 2
        assert await controller.elect_leaders({T0}, unclean=False) == {T0: ErrorCode.election_not_needed}
        unknown = TopicPartition("nope", 0)
        assert await controller.elect_leaders({unknown}, unclean=False) == {
            unknown: ErrorCode.unknown_topic_or_partition
        }
        assert await cluster.controllers[2].elect_leaders({T0}, unclean=False) is None  # not the controller

    scenario(check, brokers=(1, 2))


def test_preferred_replica_election_znode_is_handled_and_deleted() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1]})
        await cluster.kill(2)
        await cluster.start_broker(2)
        await cluster.leader_writes_isr(T0, [1, 2])
        assert (await cluster.state("t", 0)).leader == 1
        await cluster.admin.store.create(
            "/admin/preferred_replica_election", b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
        )
        await cluster.settle()
        assert (await cluster.state("t", 0)).leader == 2
        assert await cluster.admin.get_preferred_replica_election() is None
        # a malformed request is dropped
        await cluster.admin.store.create("/admin/preferred_replica_election", b"not json")
        await cluster.settle()
        assert await cluster.admin.get_preferred_replica_election() is None

    scenario(check, brokers=(1, 2))


def test_replicas_answered_kafka_storage_error_go_offline() -> None:
    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [2, 1, 3]})
        controller = cluster.active
        controller.put(LeaderAndIsrResponseReceived(2, frozenset({T0, TopicPartition("gone", 0)})))
        await cluster.settle()
        state = await cluster.state("t", 0)
        assert (state.leader, list(state.isr)) == (1, [1, 3])
        assert controller.ctx.offline_replicas == {2: {T0}}
        assert controller.ctx.replica_lifecycle[(T0, 2)] is ReplicaLifecycle.OfflineReplica
        metadata = cluster.channel.sent(3, UpdateMetadataRequest)[-1]
        assert metadata.offline_replicas == {T0: {2}}
        assert last_state(cluster.channel, 3, T0).leader == 1

    scenario(check)


def test_an_election_decided_from_a_stale_known_state_is_read_and_decided_again() -> None:
    """A broker's death is decided from the states the controller knows (no read first); a leader
    changed one meanwhile without the controller hearing of it yet, so that conditional write
    fails and the partition is read and decided again: nothing is overwritten."""

    async def check(cluster: ControllerCluster) -> None:
        await cluster.create_topic("t", {0: [1, 2, 3], 1: [2, 1, 3]})
        tp = TopicPartition("t", 0)
        current = await cluster.state("t", 0)
        # the leader shrinks the ISR in the znode, with no notification: the controller's copy is stale
        await cluster.admin.update_leader_and_isr(
            tp, LeaderAndIsr(1, current.leader_epoch, [1, 2], current.controller_epoch), current.zk_version
        )
        assert cluster.active.ctx.states[tp].isr == [1, 2, 3]
        await cluster.kill(3)
        after = await cluster.state("t", 0)
        # read again: leader 1 alive and 3 already out of the ISR, so nothing was written
        assert (after.leader, list(after.isr), after.zk_version) == (1, [1, 2], current.zk_version + 1)
        assert cluster.active.ctx.states[tp].isr == [1, 2]
        other = await cluster.state("t", 1)  # decided from the known state and written at once
        assert (other.leader, list(other.isr)) == (2, [2, 1])

    scenario(check)
