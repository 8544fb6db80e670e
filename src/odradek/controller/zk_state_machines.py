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

import dataclasses
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

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
from odradek.metadata.errors import BadVersionError, CoordinationError
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


@dataclass(frozen=True, slots=True)
class Election:
    """One partition to elect: its replicas (written as its assignment), the strategy, and the
    brokers eligible as leader."""

    tp: TopicPartition
    replicas: list[int]
    strategy: LeaderElectionStrategy
    live: Collection[int]


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
        """:meth:`elect_many` of one partition."""
        return (await self.elect_many([Election(tp, replicas, strategy, live)], cause))[tp]

    async def elect_many(
        self, elections: Sequence[Election], cause: str, trust_known: bool = False
    ) -> dict[TopicPartition, PartitionState | ErrorCode]:
        """Read each partition's state znode, let its strategy decide, and write its (leader, ISR)
        with the leader epoch + 1 and its replicas, conditionally on the version read and on the
        controller epoch's zkVersion. The reads go in one pipelined batch and so do the writes
        (Kafka's ``doElectLeaderForPartitions``); a partition whose state a leader changed
        meanwhile (its ISR) is read and decided again with the others of its round, up to 5 rounds
        (then UNKNOWN_SERVER_ERROR). Per partition: the new state (also in ``ctx.states``, and added
        to the batch), or the strategy's error (the state read goes to ``ctx.states``);
        UNKNOWN_TOPIC_OR_PARTITION without a state znode. ``cause`` goes to the state-change log.
        Raises ControllerMovedError when this controller was deposed.

        ``trust_known``: the first round decides from the states in ``ctx.states`` (a new
        controller read them all a moment ago) instead of reading them again; safe because every
        write is conditional on the version decided from: a state that moved meanwhile fails its
        write and is read in the next round."""
        results: dict[TopicPartition, PartitionState | ErrorCode] = {}
        pending = list(elections)
        for round_ in range(5):
            if not pending:
                break
            states = await self._read_states(pending, trust_known=round_ == 0 and trust_known)
            writes: list[tuple[Election, PartitionState, PartitionState]] = []
            for election, state in zip(pending, states, strict=True):
                if state is None:
                    results[election.tp] = ErrorCode.unknown_topic_or_partition
                    continue
                outcome = election.strategy.decide(state, list(election.replicas), election.live)
                if isinstance(outcome, ErrorCode):
                    self.ctx.states[election.tp] = state
                    results[election.tp] = outcome
                    continue
                leader, isr = outcome
                new = PartitionState(
                    leader, state.leader_epoch + 1, isr, list(election.replicas), self.ctx.epoch, state.zk_version
                )
                writes.append((election, state, new))
            versions = await self.zk.update_leader_and_isrs(
                [(e.tp, new.to_znode(), state.zk_version) for e, state, new in writes], self.ctx.epoch_zk_version
            )
            pending = []
            for (election, state, new), version in zip(writes, versions, strict=True):
                if isinstance(version, BadVersionError):
                    pending.append(election)
                elif isinstance(version, CoordinationError):  # the state znode went: the topic is being deleted
                    results[election.tp] = ErrorCode.unknown_topic_or_partition
                else:
                    results[election.tp] = self._elected(
                        election.tp, state, dataclasses.replace(new, zk_version=version), cause
                    )
        for election in pending:
            log.warning("controller %d: %s-%d's state kept changing; leaving it", self.controller_id, *election.tp)
            results[election.tp] = ErrorCode.unknown_server_error
        return results

    async def _read_states(self, elections: Sequence[Election], trust_known: bool) -> list[PartitionState | None]:
        """The partitions' states with ``replicas`` as their assignment: read from their znodes in
        one batch, or, with ``trust_known``, taken from ``ctx.states`` where it has them."""
        known = [self.ctx.states.get(e.tp) if trust_known else None for e in elections]
        missing = [e for e, k in zip(elections, known, strict=True) if k is None]
        read = iter(await self.zk.get_partition_states_of([e.tp for e in missing]) if missing else ())
        out: list[PartitionState | None] = []
        for election, state in zip(elections, known, strict=True):
            if state is not None:
                out.append(dataclasses.replace(state, replicas=list(election.replicas)))
            else:
                znode = next(read)
                out.append(None if znode is None else PartitionState.from_znode(znode, election.replicas))
        return out

    def _elected(self, tp: TopicPartition, read: PartitionState, new: PartitionState, cause: str) -> PartitionState:
        old = self.ctx.states.get(tp)
        self.ctx.states[tp] = new
        if new.leader >= 0 and new.leader not in read.isr:
            self._unclean_election(tp, new.leader, read.isr)
        self._record_leadership(tp, old, new, cause)
        self.batch.add_leader_and_isr(new.replicas, (tp,))
        return new

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

    async def elect_offline_many(
        self, partitions: Sequence[tuple[TopicPartition, list[int], set[int], bool]], cause: str
    ) -> dict[TopicPartition, PartitionState]:
        """The offline strategy (with or without unclean election) for each (partition, replicas,
        live replicas, unclean) in one :meth:`elect_many` (a partition whose leader is not alive
        goes OfflinePartition first), then each one's replicas settle Online/Offline. The
        partitions written, with their new states. The first round decides from the states the
        controller knows (``trust_known``): a failover or a broker's death then costs one batch of
        conditional writes, plus a read and a write for each state a leader changed meanwhile."""
        elections = []
        for tp, replicas, live, unclean in partitions:
            known = self.ctx.states.get(tp)
            if known is not None and known.leader not in live and self.state(tp) is _P.OnlinePartition:
                self.transition(tp, _P.OfflinePartition, cause=cause)
            elections.append(Election(tp, replicas, OfflinePartitionLeaderElectionStrategy(unclean), live))
        results = await self.elect_many(elections, cause, trust_known=True)
        for tp, replicas, _live, _unclean in partitions:
            self.replica_state_machine.settle(tp, replicas, cause)
        return {tp: new for tp, new in results.items() if not isinstance(new, ErrorCode)}

    async def trigger_online_partition_state_change(
        self, topics: set[str], cause: str
    ) -> dict[TopicPartition, PartitionState]:
        """New partitions of ``topics`` to OnlinePartition (first live replica leads, every live
        replica in the ISR) and partitions whose leader or ISR member is not alive through the
        offline strategy (Kafka's ``triggerOnlinePartitionStateChange``); returns the partitions
        written. Topics queued for deletion are left out. A new partition without a live replica
        stays NewPartition until a broker change.

        A topic's new partitions get their state znodes in one multi (a 1,000-partition topic is
        one write); the elections of every topic go in one :meth:`elect_many` (one pipelined batch
        of reads, one of writes)."""
        live = set(self.ctx.live_brokers) - self.ctx.shutting_down
        changed: dict[TopicPartition, PartitionState] = {}
        offline: list[tuple[TopicPartition, list[int], set[int], bool]] = []
        for topic in sorted(topics - self.ctx.topics_to_be_deleted):
            created: dict[int, PartitionState] = {}
            unclean: bool | None = None
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
                offline.append((tp, replicas, live_tp, unclean))
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
        changed.update(await self.elect_offline_many(offline, cause))
        return changed
