"""The state machines that decide (Kafka's ``ZkPartitionStateMachine`` and ``ZkReplicaStateMachine``).

:class:`ZkPartitionStateMachine` moves partitions online: it reads a partition's state znode,
lets a leader election strategy pick the leader and ISR (the strategies call the pure functions of
:mod:`odradek.controller.election`), writes the result with the leader epoch + 1, conditionally on
the znode's version and on the controller epoch's zkVersion (Kafka's ``updateLeaderAndIsr``; a
deposed controller's write fails with ControllerMovedError), moves the partition's state
(OnlinePartition with a live leader, OfflinePartition without) and adds LeaderAndIsr for its live
replicas and UpdateMetadata for every live broker to the event's
:class:`~odradek.controller.batch.ControllerBrokerRequestBatch`. New partitions get their state
znodes in one multi per topic.

The strategies (Kafka's ``PartitionLeaderElectionStrategy``), each ``decide(state, replicas,
live)`` -> (leader, ISR) to write, or the :class:`ErrorCode` saying why nothing is written:

- :class:`OfflinePartitionLeaderElectionStrategy`: a live leader keeps leading (dead replicas
  leave the ISR; ELECTION_NOT_NEEDED when none is dead); else the first live ISR replica, or with
  ``allow_unclean`` the first live replica; none: leader -1 and the last ISR kept, as Kafka
  (ELIGIBLE_LEADERS_NOT_AVAILABLE when the leader already is -1);
- :class:`ReassignPartitionLeaderElectionStrategy`: the ISR loses the replicas outside the
  target; the leader stays if it is in the target and alive, else the first live target replica
  in the ISR (or -1);
- :class:`PreferredReplicaPartitionLeaderElectionStrategy`: the first replica if it is alive and
  in the ISR (ELECTION_NOT_NEEDED when it leads, PREFERRED_LEADER_NOT_AVAILABLE otherwise);
- :class:`ControlledShutdownPartitionLeaderElectionStrategy`: a partition the broker leads gets
  the first live ISR replica not shutting down (ELIGIBLE_LEADERS_NOT_AVAILABLE when none); one it
  follows drops it from the ISR; the brokers shutting down leave the ISR either way.

:class:`ZkReplicaStateMachine` adds StopReplica with delete to the batch when a replica goes
ReplicaDeletionStarted (Kafka's replica state machine does the same); a replica that cannot be
deleted now goes ReplicaDeletionIneligible.

Event-task only: everything here runs on the controller's event task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Collection, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.controller.batch import ControllerBrokerRequestBatch
from odradek.controller.context import ControllerContext, PartitionLifecycle, ReplicaLifecycle
from odradek.controller.election import (
    controlled_shutdown_leader_election,
    initial_leader_and_isr,
    offline_partition_leader_election,
    preferred_replica_leader_election,
    reassign_partition_leader_election,
)
from odradek.controller.state_machines import PartitionStateMachine, ReplicaStateMachine
from odradek.controller.zk_client import ControllerZkClient
from odradek.errors import ErrorCode
from odradek.metadata.errors import BadVersionError
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = [
    "ControlledShutdownPartitionLeaderElectionStrategy",
    "LeaderElectionStrategy",
    "OfflinePartitionLeaderElectionStrategy",
    "Outcome",
    "PreferredReplicaPartitionLeaderElectionStrategy",
    "ReassignPartitionLeaderElectionStrategy",
    "ZkPartitionStateMachine",
    "ZkReplicaStateMachine",
]

log = logging.getLogger("odradek.controller.controller")

Outcome = tuple[int, list[int]] | ErrorCode
"""A strategy's decision: (leader, isr) to write, or why nothing is written."""

_P = PartitionLifecycle
_R = ReplicaLifecycle


class LeaderElectionStrategy(Protocol):
    def decide(self, state: PartitionState, replicas: list[int], live: Collection[int]) -> Outcome:
        """From the partition's current ``state`` (read from its znode), its assignment and the
        brokers eligible as leader: what to write."""
        ...


@dataclass(frozen=True)
class OfflinePartitionLeaderElectionStrategy:
    """Kafka's ``OfflinePartitionLeaderElectionStrategy`` (module docstring)."""

    allow_unclean: bool

    def decide(self, state: PartitionState, replicas: list[int], live: Collection[int]) -> Outcome:
        live_isr = [r for r in state.isr if r in live]
        if state.leader in live:
            return ErrorCode.election_not_needed if len(live_isr) == len(state.isr) else (state.leader, live_isr)
        elected = offline_partition_leader_election(replicas, state.isr, live, self.allow_unclean)
        if elected is None:
            return (-1, list(state.isr)) if state.leader != -1 else ErrorCode.eligible_leaders_not_available
        return elected, live_isr or [elected]


@dataclass(frozen=True)
class ReassignPartitionLeaderElectionStrategy:
    """Kafka's ``ReassignPartitionLeaderElectionStrategy`` (module docstring)."""

    target: tuple[int, ...]

    def decide(self, state: PartitionState, replicas: list[int], live: Collection[int]) -> Outcome:
        isr = [r for r in state.isr if r in self.target]
        if state.leader in self.target and state.leader in live:
            return state.leader, isr
        leader = reassign_partition_leader_election(self.target, isr, live)
        return -1 if leader is None else leader, isr


@dataclass(frozen=True)
class PreferredReplicaPartitionLeaderElectionStrategy:
    """Kafka's ``PreferredReplicaPartitionLeaderElectionStrategy`` (module docstring)."""

    def decide(self, state: PartitionState, replicas: list[int], live: Collection[int]) -> Outcome:
        if state.leader == replicas[0]:
            return ErrorCode.election_not_needed
        preferred = preferred_replica_leader_election(replicas, state.isr, live)
        return ErrorCode.preferred_leader_not_available if preferred is None else (preferred, list(state.isr))


@dataclass(frozen=True)
class ControlledShutdownPartitionLeaderElectionStrategy:
    """Kafka's ``ControlledShutdownPartitionLeaderElectionStrategy`` for ``broker_id`` (module
    docstring); ``shutting_down``: every broker in controlled shutdown."""

    broker_id: int
    shutting_down: frozenset[int]

    def decide(self, state: PartitionState, replicas: list[int], live: Collection[int]) -> Outcome:
        isr = [r for r in state.isr if r not in self.shutting_down]
        if state.leader == self.broker_id:
            leader = controlled_shutdown_leader_election(state.replicas, state.isr, live, self.shutting_down)
            return ErrorCode.eligible_leaders_not_available if leader is None else (leader, isr)
        if self.broker_id in state.isr and isr:  # a follower leaves the ISR (OfflineReplica)
            return state.leader, isr
        return ErrorCode.election_not_needed


@dataclass(frozen=True)
class _SameLeader:
    """The leader and ISR as they are: a new leader epoch (and replica list) only."""

    def decide(self, state: PartitionState, replicas: list[int], live: Collection[int]) -> Outcome:
        return state.leader, list(state.isr)


class ZkReplicaStateMachine(ReplicaStateMachine):
    """Replica states, and the StopReplica requests deletions take (module docstring)."""

    def __init__(self, controller_id: int, ctx: ControllerContext, batch: ControllerBrokerRequestBatch) -> None:
        super().__init__(controller_id, ctx)
        self.batch = batch

    def start_deletion(
        self, replicas: Mapping[TopicPartition, Collection[int]], cause: str, leader_epoch: int | None = None
    ) -> None:
        """Each replica to OfflineReplica (through NewReplica if unknown) then
        ReplicaDeletionStarted, with StopReplica (delete) to its broker in the batch (nothing for
        a dead broker); a replica already being deleted, or deleted, stays where it is.
        ``leader_epoch``: the one sent (None: the partition's as the controller knows it)."""
        for tp, ids in replicas.items():
            known = self.ctx.states.get(tp)
            epoch = leader_epoch if leader_epoch is not None else -1 if known is None else known.leader_epoch
            for replica in ids:
                current = self.state(tp, replica)
                if current in (_R.ReplicaDeletionStarted, _R.ReplicaDeletionSuccessful):
                    continue
                if current is _R.NonExistentReplica:
                    self.transition(tp, replica, _R.NewReplica, cause)
                if self.state(tp, replica) is not _R.OfflineReplica:
                    self.transition(tp, replica, _R.OfflineReplica, cause)
                self.transition(tp, replica, _R.ReplicaDeletionStarted, cause)
                self.batch.add_stop_replica(replica, tp, True, epoch)

    def mark_deletion_ineligible(self, tp: TopicPartition, replica: int, cause: str) -> None:
        """The replica to ReplicaDeletionIneligible (through NewReplica and OfflineReplica as the
        table requires); already there: nothing."""
        current = self.state(tp, replica)
        if current is _R.ReplicaDeletionIneligible:
            return
        if current is _R.NonExistentReplica:
            self.transition(tp, replica, _R.NewReplica, cause)
        if self.state(tp, replica) not in (_R.OfflineReplica, _R.ReplicaDeletionStarted):
            self.transition(tp, replica, _R.OfflineReplica, cause)
        self.transition(tp, replica, _R.ReplicaDeletionIneligible, cause)

    def complete_deletion(self, replicas: Mapping[TopicPartition, Collection[int]], cause: str) -> None:
        """Each replica from ReplicaDeletionStarted to ReplicaDeletionSuccessful and NonExistentReplica."""
        for tp, ids in replicas.items():
            for replica in ids:
                self.transition(tp, replica, _R.ReplicaDeletionSuccessful, cause)
                self.transition(tp, replica, _R.NonExistentReplica, cause)


class ZkPartitionStateMachine(PartitionStateMachine):
    """Partition states, elections and their znode writes (module docstring). ``unclean_default``:
    the broker's ``unclean.leader.election.enable``, for topics that do not set it."""

    def __init__(
        self,
        controller_id: int,
        ctx: ControllerContext,
        zk: ControllerZkClient,
        batch: ControllerBrokerRequestBatch,
        replica_state_machine: ReplicaStateMachine,
        unclean_default: bool = False,
    ) -> None:
        super().__init__(controller_id, ctx)
        self.zk = zk
        self.batch = batch
        self.replica_state_machine = replica_state_machine
        self.unclean_default = unclean_default
        self.unclean_leader_elections = 0
        """Leaders elected from outside the ISR (Kafka's ``UncleanLeaderElectionsPerSec``)."""

    async def unclean_election_enabled(self, topic: str) -> bool:
        """The topic's ``unclean.leader.election.enable``, or the broker default (Kafka's
        controller reads the topic config at each election)."""
        try:
            value = (await self.zk.get_entity_configs("topics", topic)).get("unclean.leader.election.enable")
        except Exception:
            value = None
        return self.unclean_default if value is None else value.strip().lower() == "true"

    async def elect(
        self,
        tp: TopicPartition,
        replicas: list[int],
        strategy: LeaderElectionStrategy,
        live: Collection[int],
        cause: str,
    ) -> PartitionState | ErrorCode:
        """Read ``tp``'s state znode, let ``strategy`` decide, and write its (leader, ISR) with the
        leader epoch + 1 and ``replicas``, conditionally on the version read and on the controller
        epoch's zkVersion; re-reads and decides again when a leader changed the ISR meanwhile (up to
        5 times, then UNKNOWN_SERVER_ERROR). Returns the new state (also in ``ctx.states``, and
        added to the batch), or the strategy's error (the state read goes to ``ctx.states``);
        UNKNOWN_TOPIC_OR_PARTITION without a state znode. ``cause`` goes to the state-change log."""
        for _attempt in range(5):
            current = await self.zk.get_partition_state(tp)
            if current is None:
                return ErrorCode.unknown_topic_or_partition
            old = self.ctx.states.get(tp)
            state = PartitionState.from_znode(current, replicas)
            outcome = strategy.decide(state, list(replicas), live)
            if isinstance(outcome, ErrorCode):
                self.ctx.states[tp] = state
                return outcome
            leader, isr = outcome
            new = PartitionState(leader, state.leader_epoch + 1, isr, list(replicas), self.ctx.epoch, state.zk_version)
            try:
                version = await self.zk.update_leader_and_isr(
                    tp, new.to_znode(), state.zk_version, self.ctx.epoch_zk_version
                )
            except BadVersionError:
                continue
            new = dataclasses.replace(new, zk_version=version)
            self.ctx.states[tp] = new
            if leader >= 0 and leader not in state.isr:
                self._unclean_election(tp, leader, state.isr)
            self._record_leadership(tp, old, new, cause)
            self.batch.add_leader_and_isr(new.replicas, (tp,))
            return new
        log.warning("controller %d: %s-%d's state kept changing; leaving it", self.controller_id, *tp)
        return ErrorCode.unknown_server_error

    async def bump_leader_epoch(self, tp: TopicPartition, replicas: list[int], cause: str) -> PartitionState | None:
        """The same leader and ISR with the leader epoch + 1 and ``replicas`` (a reassignment's
        start); None when ``tp`` has no state znode."""
        new = await self.elect(tp, replicas, _SameLeader(), (), cause)
        return None if isinstance(new, ErrorCode) else new

    def _unclean_election(self, tp: TopicPartition, elected: int, isr: list[int]) -> None:
        self.unclean_leader_elections += 1
        log.warning(
            "controller %d: unclean leader election for %s-%d: broker %d was not in the ISR %s; "
            "records acknowledged by the old ISR may be lost",
            self.controller_id,
            tp.topic,
            tp.partition,
            elected,
            isr,
        )

    def _record_leadership(
        self, tp: TopicPartition, old: PartitionState | None, new: PartitionState, cause: str
    ) -> None:
        """OnlinePartition when ``new``'s leader is alive (logged when the leader changed or the
        partition was not online), else OfflinePartition; an ISR change under the same leader is
        not a partition transition."""
        current = self.state(tp)
        if new.leader in self.ctx.live_brokers:
            if current is not _P.OnlinePartition or old is None or old.leader != new.leader:
                self.transition(tp, _P.OnlinePartition, new, cause)
        elif current is not _P.OfflinePartition:
            self.transition(tp, _P.OfflinePartition, new, cause)

    async def elect_offline(
        self, tp: TopicPartition, replicas: list[int], live: set[int], unclean: bool, cause: str
    ) -> PartitionState | None:
        """The offline strategy for ``tp`` (a partition whose leader is not alive goes
        OfflinePartition first), then its replicas settle Online/Offline. The new state, or None."""
        known = self.ctx.states.get(tp)
        if known is not None and known.leader not in live and self.state(tp) is _P.OnlinePartition:
            self.transition(tp, _P.OfflinePartition, cause=cause)
        new = await self.elect(tp, replicas, OfflinePartitionLeaderElectionStrategy(unclean), live, cause)
        self.replica_state_machine.settle(tp, replicas, cause)
        return None if isinstance(new, ErrorCode) else new

    async def trigger_online_partition_state_change(
        self, topics: set[str], cause: str
    ) -> dict[TopicPartition, PartitionState]:
        """New partitions of ``topics`` to OnlinePartition (first live replica leads, every live
        replica in the ISR) and partitions whose leader or ISR member is not alive through the
        offline strategy (Kafka's ``triggerOnlinePartitionStateChange``); returns the partitions
        written. Topics queued for deletion are left out. A new partition without a live replica
        stays NewPartition until a broker change.

        A topic's new partitions get their state znodes in one multi (a 1,000-partition topic is
        one write); its elections are pipelined (their reads, then their writes)."""
        live = set(self.ctx.live_brokers) - self.ctx.shutting_down
        changed: dict[TopicPartition, PartitionState] = {}
        for topic in sorted(topics - self.ctx.topics_to_be_deleted):
            created: dict[int, PartitionState] = {}
            unclean: bool | None = None
            elections: list[tuple[TopicPartition, Coroutine[Any, Any, PartitionState | None]]] = []
            for partition, replicas in sorted(self.ctx.assignments[topic].items()):
                tp = TopicPartition(topic, partition)
                state = self.ctx.states.get(tp)
                if state is None:
                    initial = initial_leader_and_isr(replicas, live)
                    if initial is not None:
                        leader, isr = initial
                        created[partition] = PartitionState(leader, 0, isr, list(replicas), self.ctx.epoch, 0)
                    else:
                        self.log(
                            logging.WARNING,
                            f"Controller {self.controller_id} epoch {self.ctx.epoch} encountered error during state "
                            f"change of partition {topic}-{partition} from NewPartition to OnlinePartition, assigned "
                            f"replicas are [{','.join(map(str, replicas))}], live brokers are {sorted(live)}. "
                            "No assigned replica is alive.",
                            cause,
                        )
                    continue
                live_tp = self.ctx.live_for(tp, live)
                if state.leader in live_tp and all(r in live_tp for r in state.isr):
                    if state.replicas != replicas:  # a new state: the old one may be in a queued request
                        self.ctx.states[tp] = dataclasses.replace(state, replicas=list(replicas))
                        self.replica_state_machine.settle(tp, replicas, cause)
                    continue
                if unclean is None:
                    unclean = await self.unclean_election_enabled(topic)
                elections.append((tp, self.elect_offline(tp, replicas, live_tp, unclean, cause)))
            results = await asyncio.gather(*(election for _tp, election in elections))
            for (tp, _election), new in zip(elections, results, strict=True):
                if new is not None:
                    changed[tp] = new
            if created:
                await self.zk.create_partition_states(
                    topic, {p: s.to_znode() for p, s in created.items()}, self.ctx.epoch_zk_version
                )
                for partition, new in created.items():
                    tp = TopicPartition(topic, partition)
                    self.ctx.states[tp] = changed[tp] = new
                    self.transition(tp, _P.OnlinePartition, new, cause)
                    self.replica_state_machine.settle(tp, new.replicas, cause)
                    self.batch.add_leader_and_isr(new.replicas, (tp,))
        return changed
