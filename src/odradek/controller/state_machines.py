"""Kafka's partition and replica state machines, as tables of valid previous states.

The controller tracks each partition's and each replica's state in its context
(``ControllerContext.partition_lifecycle`` / ``replica_lifecycle``) and moves them only through
:meth:`PartitionStateMachine.transition` and :meth:`ReplicaStateMachine.transition`, which check
the tables below (Kafka 3.x ``PartitionStateMachine.scala`` / ``ReplicaStateMachine.scala``):

==========================  ===========================================================
target                      valid previous states
==========================  ===========================================================
NewPartition                NonExistentPartition
OnlinePartition             NewPartition, OnlinePartition, OfflinePartition
OfflinePartition            NewPartition, OnlinePartition, OfflinePartition
NonExistentPartition        OfflinePartition
NewReplica                  NonExistentReplica
OnlineReplica               NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible
OfflineReplica              NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible
ReplicaDeletionStarted      OfflineReplica
ReplicaDeletionSuccessful   ReplicaDeletionStarted
ReplicaDeletionIneligible   OfflineReplica, ReplicaDeletionStarted
NonExistentReplica          ReplicaDeletionSuccessful
==========================  ===========================================================

A partition or replica the context does not know is NonExistent. Kafka's ``PartitionState``
trait is :class:`PartitionLifecycle` here (:class:`~odradek.replication.partition.PartitionState`
is the leader/ISR record), and its ``ReplicaState`` is :class:`ReplicaLifecycle`.

Every change is written to the logger named ``state.change.logger`` (Kafka's state-change log),
one line per partition or replica, prefixed ``[Controller id=<id> epoch=<epoch>]`` and phrased as
Kafka phrases it, followed by the cause in parentheses (each one line in the log)::

    [Controller id=1 epoch=3] Changed partition t-0 from OfflinePartition to OnlinePartition
        with state LeaderAndIsr(leader=2, leaderEpoch=5, isr=[2], zkVersion=7) (broker change)
    [Controller id=1 epoch=3] Changed state of replica 3 for partition t-0 from OnlineReplica
        to OfflineReplica (broker 3 failed)

New and Online partition changes at INFO, the others at DEBUG (Kafka's TRACE); an illegal
transition at ERROR, after which :class:`IllegalStateTransition` is raised and nothing changes.

Runs on the controller's event task.
"""

from __future__ import annotations

import logging

from odradek.controller.context import ControllerContext, PartitionLifecycle, ReplicaLifecycle
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = [
    "VALID_PREVIOUS_PARTITION_STATES",
    "VALID_PREVIOUS_REPLICA_STATES",
    "IllegalStateTransition",
    "PartitionLifecycle",
    "PartitionStateMachine",
    "ReplicaLifecycle",
    "ReplicaStateMachine",
    "format_leader_and_isr",
]

state_change_logger = logging.getLogger("state.change.logger")


_P = PartitionLifecycle
_R = ReplicaLifecycle

VALID_PREVIOUS_PARTITION_STATES: dict[PartitionLifecycle, frozenset[PartitionLifecycle]] = {
    _P.NewPartition: frozenset({_P.NonExistentPartition}),
    _P.OnlinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.OfflinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.NonExistentPartition: frozenset({_P.OfflinePartition}),
}

VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaLifecycle, frozenset[ReplicaLifecycle]] = {
    _R.NewReplica: frozenset({_R.NonExistentReplica}),
    _R.OnlineReplica: frozenset({_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}),
    _R.OfflineReplica: frozenset({_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}),
    _R.ReplicaDeletionStarted: frozenset({_R.OfflineReplica}),
    _R.ReplicaDeletionSuccessful: frozenset({_R.ReplicaDeletionStarted}),
    _R.ReplicaDeletionIneligible: frozenset({_R.OfflineReplica, _R.ReplicaDeletionStarted}),
    _R.NonExistentReplica: frozenset({_R.ReplicaDeletionSuccessful}),
}


class IllegalStateTransition(Exception):
    """A partition or replica was asked to move to a state its current state cannot lead to
    (Kafka's ``IllegalStateException`` in the state machines)."""


def format_leader_and_isr(state: PartitionState) -> str:
    """Kafka's ``LeaderAndIsr.toString`` for the state-change log."""
    return (
        f"LeaderAndIsr(leader={state.leader}, leaderEpoch={state.leader_epoch}, "
        f"isr={list(state.isr)}, zkVersion={state.zk_version})"
    )


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _states(states: frozenset[PartitionLifecycle] | frozenset[ReplicaLifecycle]) -> str:
    return ",".join(sorted(s.value for s in states))


class _StateChangeLog:
    def __init__(self, controller_id: int, ctx: ControllerContext) -> None:
        self.controller_id = controller_id
        self.ctx = ctx

    def log(self, level: int, message: str, cause: str) -> None:
        suffix = f" ({cause})" if cause else ""
        state_change_logger.log(
            level, "[Controller id=%d epoch=%d] %s%s", self.controller_id, self.ctx.epoch, message, suffix
        )


class PartitionStateMachine(_StateChangeLog):
    """Partition states of one controller context (Kafka's ``PartitionStateMachine``, the
    bookkeeping part; the elections and their writes are
    :class:`~odradek.controller.zk_state_machines.ZkPartitionStateMachine`'s)."""

    def state(self, tp: TopicPartition) -> PartitionLifecycle:
        return self.ctx.partition_lifecycle.get(tp, _P.NonExistentPartition)

    def initialize(self, tp: TopicPartition, target: PartitionLifecycle) -> None:
        """Set the state of a partition found in the store by a new controller (Kafka's
        ``initializePartitionState``: Online if its leader is alive, Offline if not, New without
        a state znode); no transition, no log line."""
        self.ctx.partition_lifecycle[tp] = target

    def transition(
        self, tp: TopicPartition, target: PartitionLifecycle, state: PartitionState | None = None, cause: str = ""
    ) -> None:
        """Move ``tp`` to ``target`` and log it (``state``: the new leader and ISR, logged for
        OnlinePartition). Raises :class:`IllegalStateTransition` (logged at ERROR) when the table
        forbids it."""
        current = self.state(tp)
        valid = VALID_PREVIOUS_PARTITION_STATES[target]
        if current not in valid:
            self.log(
                logging.ERROR,
                f"Controller {self.controller_id} epoch {self.ctx.epoch} failed to change state for partition "
                f"{_name(tp)} from {current} to {target}: Partition {_name(tp)} should be in one of "
                f"{_states(valid)} states before moving to {target} state. Instead it is in {current} state",
                cause,
            )
            raise IllegalStateTransition(
                f"partition {_name(tp)} cannot move from {current} to {target} "
                f"(valid previous states: {_states(valid)})"
            )
        if target is _P.NewPartition:
            replicas = ",".join(map(str, self.ctx.assignments.get(tp.topic, {}).get(tp.partition, ())))
            message = (
                f"Changed partition {_name(tp)} state from {current} to {target} with assigned replicas {replicas}"
            )
            level = logging.INFO
        elif target is _P.OnlinePartition and state is not None:
            message = (
                f"Changed partition {_name(tp)} from {current} to {target} with state {format_leader_and_isr(state)}"
            )
            level = logging.INFO
        else:
            message = f"Changed partition {_name(tp)} state from {current} to {target}"
            level = logging.DEBUG
        if target is _P.NonExistentPartition:
            self.ctx.partition_lifecycle.pop(tp, None)
        else:
            self.ctx.partition_lifecycle[tp] = target
        self.log(level, message, cause)


class ReplicaStateMachine(_StateChangeLog):
    """Replica states of one controller context (Kafka's ``ReplicaStateMachine``, the bookkeeping
    part; the requests are :class:`~odradek.controller.zk_state_machines.ZkReplicaStateMachine`'s)."""

    def state(self, tp: TopicPartition, replica: int) -> ReplicaLifecycle:
        return self.ctx.replica_lifecycle.get((tp, replica), _R.NonExistentReplica)

    def initialize(self, tp: TopicPartition, replica: int, target: ReplicaLifecycle) -> None:
        """Set the state of a replica found in the store by a new controller; no log line."""
        self.ctx.replica_lifecycle[(tp, replica)] = target

    def transition(self, tp: TopicPartition, replica: int, target: ReplicaLifecycle, cause: str = "") -> None:
        """Move replica ``replica`` of ``tp`` to ``target`` and log it. Raises
        :class:`IllegalStateTransition` (logged at ERROR) when the table forbids it."""
        current = self.state(tp, replica)
        valid = VALID_PREVIOUS_REPLICA_STATES[target]
        if current not in valid:
            self.log(
                logging.ERROR,
                f"Controller {self.controller_id} epoch {self.ctx.epoch} initiated state change of replica "
                f"{replica} for partition {_name(tp)} from {current} to {target} failed: Replica {replica} for "
                f"partition {_name(tp)} should be in the {_states(valid)} states before moving to {target} state. "
                f"Instead it is in {current} state",
                cause,
            )
            raise IllegalStateTransition(
                f"replica {replica} of {_name(tp)} cannot move from {current} to {target} "
                f"(valid previous states: {_states(valid)})"
            )
        if target is _R.NonExistentReplica:
            self.ctx.replica_lifecycle.pop((tp, replica), None)
        else:
            self.ctx.replica_lifecycle[(tp, replica)] = target
        self.log(
            logging.DEBUG,
            f"Changed state of replica {replica} for partition {_name(tp)} from {current} to {target}",
            cause,
        )

    def settle(self, tp: TopicPartition, replicas: list[int], cause: str = "") -> None:
        """Move each of ``replicas`` to OnlineReplica if it is online (Kafka's
        ``isReplicaOnline``) or OfflineReplica if not, through NewReplica for a replica not known
        yet; a replica already in that state, or being deleted, is left as it is."""
        for replica in replicas:
            current = self.state(tp, replica)
            if current in (_R.ReplicaDeletionStarted, _R.ReplicaDeletionSuccessful):
                continue
            target = _R.OnlineReplica if self.ctx.replica_online(tp, replica) else _R.OfflineReplica
            if current is target:
                continue
            if current is _R.NonExistentReplica:
                self.transition(tp, replica, _R.NewReplica, cause)
            self.transition(tp, replica, target, cause)
