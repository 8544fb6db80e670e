"""Operator-driven leadership moves of the active controller: controlled shutdown, ElectLeaders
(preferred and unclean) and the automatic leader rebalance.

A part of :class:`~odradek.controller.controller.KafkaController` over
:class:`~odradek.controller.core.ControllerCore`: each public coroutine queues an event and waits
for its result, and the ``_on_*`` handlers run on the controller's event task, like every other
change of its state. Every partition change is an election of the partition state machine with
the operation's strategy (a fresh read of the state znode, the leader epoch + 1, a conditional
write, the state-change log), which adds LeaderAndIsr to the replicas and UpdateMetadata to every
broker to the event's request batch.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging

from odradek.controller.core import ControllerCore
from odradek.controller.events import ControlledShutdown, ReplicaLeaderElection
from odradek.controller.zk_state_machines import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    Election,
    LeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
)
from odradek.errors import ErrorCode
from odradek.metadata.errors import ControllerMovedError
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

log = logging.getLogger("odradek.controller.controller")


class ControllerOperations(ControllerCore):
    """Controlled shutdown and leader elections asked for from outside the controller."""

    async def elect_leaders(
        self, partitions: set[TopicPartition] | None, unclean: bool
    ) -> dict[TopicPartition, ErrorCode] | None:
        """ElectLeaders (and auto leader rebalance) through the event queue: the error per
        partition, or None when this broker is not the controller. See :meth:`_on_elect_leaders`."""
        future: asyncio.Future[dict[TopicPartition, ErrorCode] | None] = asyncio.get_running_loop().create_future()
        self.put(ReplicaLeaderElection(None if partitions is None else frozenset(partitions), unclean, future))
        return await future

    async def _on_elect_leaders(
        self,
        partitions: frozenset[TopicPartition] | set[TopicPartition] | None,
        unclean: bool,
        future: asyncio.Future[dict[TopicPartition, ErrorCode] | None],
    ) -> None:
        """Preferred election (Kafka's PreferredReplicaPartitionLeaderElectionStrategy): the first
        replica of the assignment leads if it is alive and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE
        otherwise, ELECTION_NOT_NEEDED if it already leads). Unclean election: a partition without a
        live leader gets one from the ISR or, failing that, any live replica, logged as possible
        data loss (ELIGIBLE_LEADERS_NOT_AVAILABLE when none is alive, ELECTION_NOT_NEEDED when it
        has a leader). ``partitions`` None means every partition. Unknown ones:
        UNKNOWN_TOPIC_OR_PARTITION."""
        results: dict[TopicPartition, ErrorCode] = {}
        try:
            if not self.active:
                return
            live = set(self.ctx.live_brokers) - self.ctx.shutting_down
            strategy: LeaderElectionStrategy = (
                OfflinePartitionLeaderElectionStrategy(allow_unclean=True)
                if unclean
                else PreferredReplicaPartitionLeaderElectionStrategy()
            )
            cause = "unclean leader election" if unclean else "preferred replica leader election"
            moved = 0
            elections: list[Election] = []
            for tp in sorted(partitions if partitions is not None else set(self.ctx.states)):
                state = self.ctx.states.get(tp)
                replicas = self.ctx.assignments.get(tp.topic, {}).get(tp.partition)
                if state is None or replicas is None:
                    results[tp] = ErrorCode.unknown_topic_or_partition
                    continue
                if tp.topic in self.ctx.topics_to_be_deleted:  # Kafka's answer for a topic being deleted
                    results[tp] = ErrorCode.invalid_topic_exception
                    continue
                if unclean and state.leader in live:  # Kafka's ElectLeaders: an online partition is left
                    results[tp] = ErrorCode.election_not_needed
                    continue
                elections.append(Election(tp, replicas, strategy, live))
            for tp, new in (await self.partition_state_machine.elect_many(elections, cause)).items():
                if isinstance(new, ErrorCode):
                    results[tp] = new
                elif new.leader < 0:
                    results[tp] = ErrorCode.eligible_leaders_not_available
                else:
                    results[tp], moved = ErrorCode.none, moved + 1
            if moved:
                log.info(
                    "controller %d: %s election moved %d leaders",
                    self.broker_id,
                    "unclean" if unclean else "preferred",
                    moved,
                )
        finally:
            if not future.done():
                future.set_result(results if self.active else None)

    def leader_imbalance(self) -> dict[int, tuple[int, int]]:
        """Broker -> (partitions it should lead by preference, of those led by another broker)."""
        out: dict[int, tuple[int, int]] = {}
        for tp, state in self.ctx.states.items():
            replicas = self.ctx.assignments.get(tp.topic, {}).get(tp.partition)
            if not replicas:
                continue
            preferred = replicas[0]
            total, elsewhere = out.get(preferred, (0, 0))
            out[preferred] = (total + 1, elsewhere + (state.leader != preferred))
        return out

    async def maybe_rebalance_leaders(self, imbalance_percentage: int) -> None:
        """``auto.leader.rebalance.enable``: for every live broker whose share of partitions led by
        another broker exceeds ``leader.imbalance.per.broker.percentage``, a preferred election of
        those partitions (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        if not self.active:
            return
        targets: set[TopicPartition] = set()
        for broker_id, (total, elsewhere) in self.leader_imbalance().items():
            if broker_id in self.ctx.live_brokers and total and elsewhere * 100 / total > imbalance_percentage:
                targets |= {
                    tp
                    for tp, s in self.ctx.states.items()
                    if self.ctx.assignments.get(tp.topic, {}).get(tp.partition, [None])[0] == broker_id
                    and s.leader != broker_id
                }
        if targets:
            await self.elect_leaders(targets, unclean=False)

    async def _on_preferred_replica_election_znode(self) -> None:
        """``/admin/preferred_replica_election`` (``{"version":1,"partitions":[{"topic":"t",
        "partition":0}]}``, the ZooKeeper-era tool's request): a preferred election of those
        partitions, then the znode is deleted (Kafka's PreferredReplicaElection event). A
        malformed znode is logged and deleted."""
        path = "/admin/preferred_replica_election"
        data = await self.zk.get_preferred_replica_election()
        if data is None:
            return
        try:
            entries = json.loads(data)["partitions"]
            partitions = {TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries}
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("controller %d: ignoring malformed %s: %r", self.broker_id, path, exc)
            partitions = set()
        if partitions:
            done: asyncio.Future[dict[TopicPartition, ErrorCode] | None] = asyncio.get_running_loop().create_future()
            await self._on_elect_leaders(partitions, False, done)
            for tp, error in sorted((done.result() or {}).items()):
                if error not in (ErrorCode.none, ErrorCode.election_not_needed):
                    log.warning("controller %d: preferred election of %s-%d: %s", self.broker_id, *tp, error.name)
        await self.zk.delete_preferred_replica_election()

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """ControlledShutdown for ``broker_id`` through the event queue: (error, partitions the
        broker still leads). NOT_CONTROLLER when this broker is not (or no longer) the
        controller, BROKER_NOT_AVAILABLE when ``broker_id`` is not registered, STALE_BROKER_EPOCH
        when ``broker_epoch`` (-1: not sent) is older than the registration's (KIP-380). Call
        from the broker's loop (the ControlledShutdown API)."""
        future: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = asyncio.get_running_loop().create_future()
        self.put(ControlledShutdown(broker_id, future, broker_epoch))
        return await future

    async def _on_controlled_shutdown(
        self, broker_id: int, future: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]], broker_epoch: int = -1
    ) -> None:
        """Kafka's ``doControlledShutdown``, leader side: every partition with more than one
        replica that ``broker_id`` leads gets the first live ISR replica not shutting down as
        leader (leader epoch + 1, the broker left out of the ISR), written to its state znode and
        sent as LeaderAndIsr and UpdateMetadata. Partitions with no other eligible replica stay
        and are answered as remaining; the caller retries. Partitions it follows drop it from
        their ISR (leader epoch + 1), so acks=all writes do not wait for a broker going away."""
        result: tuple[ErrorCode, list[TopicPartition]] = (ErrorCode.unknown_server_error, [])
        try:
            if not self.active:
                result = (ErrorCode.not_controller, [])
                return
            if broker_id not in self.ctx.live_brokers:
                result = (ErrorCode.broker_not_available, [])
                return
            if broker_epoch != -1 and broker_epoch < self.ctx.live_brokers[broker_id].epoch:
                result = (ErrorCode.stale_broker_epoch, [])
                return
            self.ctx.shutting_down.add(broker_id)
            changed: dict[TopicPartition, PartitionState] = {}
            live = set(self.ctx.live_brokers)
            strategy = ControlledShutdownPartitionLeaderElectionStrategy(broker_id, frozenset(self.ctx.shutting_down))
            # every partition's read and conditional write in one pipelined batch each, as Kafka's
            # updateLeaderAndIsr for the whole batch, rather than two round trips per partition
            cause = f"controlled shutdown of broker {broker_id}"
            moves = [
                Election(tp, list(state.replicas), strategy, live)
                for tp, state in sorted(self.ctx.states.items(), key=lambda item: (item[0].topic, item[0].partition))
                if broker_id in state.replicas
                and len(state.replicas) > 1
                and tp.topic not in self.ctx.topics_to_be_deleted
            ]
            for tp, new in (await self.partition_state_machine.elect_many(moves, cause)).items():
                if not isinstance(new, ErrorCode):
                    changed[tp] = new
            for tp, replicas in sorted(self._hosted_by(broker_id).items()):
                if len(replicas) > 1:  # its replicas go OfflineReplica (Kafka's doControlledShutdown)
                    self.replica_state_machine.settle(tp, replicas, cause)
            remaining = [
                tp
                for tp, s in self.ctx.states.items()
                if s.leader == broker_id and len(s.replicas) > 1 and tp.topic not in self.ctx.topics_to_be_deleted
            ]
            log.info(
                "controller %d: controlled shutdown of broker %d moved %d leaders, %d remain",
                self.broker_id,
                broker_id,
                len(changed),
                len(remaining),
            )
            result = (ErrorCode.none, remaining)
        except ControllerMovedError:
            result = (ErrorCode.not_controller, [])  # deposed mid-way: the caller asks the new controller
            raise
        finally:
            if not future.done():
                future.set_result(result)
