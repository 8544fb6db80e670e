"""The controller's shared machinery: its state, event queue, state machines, partition writes
and requests to brokers.

:class:`ControllerCore` is the base of :class:`~odradek.controller.controller.KafkaController`
and of the parts it is assembled from (``operations.py``, ``reassignment.py``, ``log_dirs.py``),
which change partitions only through these members:

- :meth:`ControllerCore._rewrite_state`: a fresh read of the state znode, a decision, the leader
  epoch + 1, a conditional write; the new state replaces the old one in ``ctx.states`` (states
  are immutable: a request built from one keeps what it was built with) and the partition's
  state machine moves (Online when the new leader is alive, Offline when there is none);
- :meth:`ControllerCore._send_leader_and_isr` to the replicas and
  :meth:`ControllerCore._send_update_metadata` to every live broker.

Runs on the broker's event loop; everything but :meth:`put` runs on the controller's event task.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Callable
from typing import Any

from odradek.controller.channel import ControllerChannelManager, response_errors
from odradek.controller.context import ControllerContext
from odradek.controller.election import offline_partition_leader_election
from odradek.controller.events import ControllerEvent, LeaderAndIsrResponseReceived, Reassignment
from odradek.controller.requests import LeaderAndIsrRequest, UpdateMetadataRequest
from odradek.controller.state_machines import (
    PartitionLifecycle,
    PartitionStateMachine,
    ReplicaLifecycle,
    ReplicaStateMachine,
)
from odradek.controller.zk_client import ControllerZkClient
from odradek.errors import ErrorCode
from odradek.metadata.errors import BadVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition
from odradek.storage.topic_partition import parse_topic_partition_dir

log = logging.getLogger("odradek.controller.controller")

Decision = Callable[[PartitionState], tuple[int, list[int]] | None]
"""Given a partition's current state: (leader, isr) to write, or None to leave it."""


class ControllerCore:
    """State and shared helpers of the controller (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        zk: ControllerZkClient,
        channel: ControllerChannelManager,
        unclean_leader_election: bool = False,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.channel = channel
        self.unclean_leader_election = unclean_leader_election
        self.ctx = ControllerContext()
        """Built once; emptied in place (``ctx.reset()``) when the controller resigns."""
        self.partition_state_machine = PartitionStateMachine(broker_id, self.ctx)
        self.replica_state_machine = ReplicaStateMachine(broker_id, self.ctx)
        self.reassignments: dict[TopicPartition, Reassignment] = {}
        self.active = False
        self.initialized = False
        """Active and done with the failover (context, reassignments and deletions loaded): what the
        controller answers from its state before that would be incomplete."""
        self.active_controller_id: int | None = None
        self.broker_change_times_ms: collections.deque[float] = collections.deque(maxlen=1024)
        """How long the last broker changes took to handle (Kafka's ``LeaderElectionRateAndTimeMs``)."""
        self.broker_changes = 0
        self.unclean_leader_elections = 0
        """Leaders elected from outside the ISR (Kafka's ``UncleanLeaderElectionsPerSec``)."""
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._idle = asyncio.Event()

    # --- event queue -------------------------------------------------------------------------

    def put(self, event: ControllerEvent) -> None:
        """Queue ``event`` for the event task (callable from any coroutine on the loop)."""
        self._idle.clear()
        self._queue.put_nowait(event)

    async def wait_idle(self) -> None:
        """Wait until every queued event has been processed (tests and admin calls use it)."""
        await self._idle.wait()

    # --- state machines ----------------------------------------------------------------------

    def live_for(self, tp: TopicPartition, live: set[int]) -> set[int]:
        """``live`` without the brokers on which ``tp``'s replica is offline."""
        return self.ctx.live_for(tp, live)

    def _record_leadership(
        self, tp: TopicPartition, old: PartitionState | None, new: PartitionState, cause: str
    ) -> None:
        """Move ``tp``'s state machine after ``new`` was written: OnlinePartition when its leader
        is alive (logged when the leader changed or the partition was not online), else
        OfflinePartition; an ISR change under the same leader is not a partition transition."""
        machine = self.partition_state_machine
        current = machine.state(tp)
        if new.leader in self.ctx.live_brokers:
            if current is not PartitionLifecycle.OnlinePartition or old is None or old.leader != new.leader:
                machine.transition(tp, PartitionLifecycle.OnlinePartition, new, cause)
        elif current is not PartitionLifecycle.OfflinePartition:
            machine.transition(tp, PartitionLifecycle.OfflinePartition, new, cause)

    def _hosted_by(self, broker_id: int) -> dict[TopicPartition, list[int]]:
        """The partitions with a replica on ``broker_id``, with their replicas."""
        return {
            TopicPartition(topic, partition): replicas
            for topic, assignment in self.ctx.assignments.items()
            for partition, replicas in assignment.items()
            if broker_id in replicas
        }

    # --- partition state writes --------------------------------------------------------------

    async def _rewrite_state(
        self, tp: TopicPartition, replicas: list[int], decide: Decision, cause: str
    ) -> PartitionState | None:
        """Read ``tp``'s state znode, let ``decide`` pick (leader, isr) from it (None: no change),
        and write that with the leader epoch + 1, conditionally on the version read; re-reads and
        decides again when a leader changed the ISR meanwhile. Returns the new state, or None.
        ``cause`` goes to the state-change log."""
        for _attempt in range(5):
            current = await self.zk.get_partition_state(tp)
            if current is None:
                return None
            old = self.ctx.states.get(tp)
            state = PartitionState.from_znode(current, replicas)
            decision = decide(state)
            if decision is None:
                self.ctx.states[tp] = state
                return None
            leader, isr = decision
            new = PartitionState(leader, state.leader_epoch + 1, isr, list(replicas), self.ctx.epoch, state.zk_version)
            try:
                version = await self.zk.update_leader_and_isr(
                    tp, new.to_znode(), state.zk_version, self.ctx.epoch_zk_version
                )
            except BadVersionError:
                continue
            new = PartitionState(leader, new.leader_epoch, isr, list(replicas), self.ctx.epoch, version)
            self.ctx.states[tp] = new
            self._record_leadership(tp, old, new, cause)
            return new
        log.warning("controller %d: %s-%d's state kept changing; leaving it", self.broker_id, tp.topic, tp.partition)
        return None

    async def _unclean_election_enabled(self, topic: str) -> bool:
        """The topic's ``unclean.leader.election.enable``, or the broker default (Kafka's controller
        reads the topic config at each election)."""
        try:
            value = (await self.zk.get_entity_configs("topics", topic)).get("unclean.leader.election.enable")
        except Exception:
            value = None
        return self.unclean_leader_election if value is None else value.strip().lower() == "true"

    async def _update_state(
        self, tp: TopicPartition, replicas: list[int], live: set[int], unclean: bool, cause: str
    ) -> PartitionState | None:
        """Elect a new leader for ``tp`` if its leader is not alive, and drop dead replicas from its
        ISR (Kafka's OfflinePartition -> OnlinePartition election with the offline strategy, and
        the OfflineReplica transition). A partition whose leader is gone goes OfflinePartition first."""
        known = self.ctx.states.get(tp)
        machine = self.partition_state_machine
        if known is not None and known.leader not in live and machine.state(tp) is PartitionLifecycle.OnlinePartition:
            machine.transition(tp, PartitionLifecycle.OfflinePartition, cause=cause)

        def decide(state: PartitionState) -> tuple[int, list[int]] | None:
            if state.leader in live:
                if all(r in live for r in state.isr):
                    return None
                return state.leader, [r for r in state.isr if r in live]
            elected = offline_partition_leader_election(replicas, state.isr, live, unclean)
            if elected is None:
                return (-1, state.isr) if state.leader != -1 else None  # offline: keep the last ISR, as Kafka
            if elected not in state.isr:
                self.unclean_leader_elections += 1
                log.warning(
                    "controller %d: unclean leader election for %s-%d: broker %d was not in the ISR %s; "
                    "records acknowledged by the old ISR may be lost",
                    self.broker_id,
                    tp.topic,
                    tp.partition,
                    elected,
                    state.isr,
                )
            return elected, [r for r in state.isr if r in live] or [elected]

        new = await self._rewrite_state(tp, replicas, decide, cause)
        self.replica_state_machine.settle(tp, replicas, cause)
        return new

    def _start_replica_deletion(self, replicas: dict[TopicPartition, list[int]], cause: str) -> None:
        """Each replica to OfflineReplica then ReplicaDeletionStarted (StopReplica with delete
        follows). A replica already being deleted stays where it is."""
        machine = self.replica_state_machine
        for tp, ids in replicas.items():
            machine.settle(tp, ids, cause)
            for replica in ids:
                if machine.state(tp, replica) is ReplicaLifecycle.ReplicaDeletionStarted:
                    continue
                if machine.state(tp, replica) is not ReplicaLifecycle.OfflineReplica:
                    machine.transition(tp, replica, ReplicaLifecycle.OfflineReplica, cause)
                machine.transition(tp, replica, ReplicaLifecycle.ReplicaDeletionStarted, cause)

    def _complete_replica_deletion(self, replicas: dict[TopicPartition, list[int]], cause: str) -> None:
        """Each replica from ReplicaDeletionStarted to ReplicaDeletionSuccessful and
        NonExistentReplica. odradek does not wait for the StopReplica answers: the replicas are
        deleted once the requests are queued and the znodes are gone (a broker that is down
        meanwhile never gets the request)."""
        machine = self.replica_state_machine
        for tp, ids in replicas.items():
            for replica in ids:
                machine.transition(tp, replica, ReplicaLifecycle.ReplicaDeletionSuccessful, cause)
                machine.transition(tp, replica, ReplicaLifecycle.NonExistentReplica, cause)

    # --- requests ----------------------------------------------------------------------------

    async def _send_leader_and_isr(
        self, states: dict[TopicPartition, PartitionState], only: set[int] | None = None
    ) -> None:
        """LeaderAndIsr to every live replica of ``states`` (or only to the brokers in ``only``)."""
        by_broker: dict[int, dict[TopicPartition, PartitionState]] = {}
        for tp, state in states.items():
            for replica in state.replicas:
                if replica in self.ctx.live_brokers and (only is None or replica in only):
                    by_broker.setdefault(replica, {})[tp] = state
        for broker_id, partitions in by_broker.items():
            topic_ids = {tp.topic: self.ctx.topic_ids[tp.topic] for tp in partitions}
            request = LeaderAndIsrRequest(self.broker_id, self.ctx.epoch, partitions, topic_ids)
            await self.channel.send_leader_and_isr(
                broker_id, request, functools.partial(self.leader_and_isr_answered, request)
            )

    def leader_and_isr_answered(self, request: LeaderAndIsrRequest, broker_id: int, response: Any) -> None:
        """The channel's callback: queue the partitions ``broker_id`` answered KAFKA_STORAGE_ERROR
        (Kafka's LeaderAndIsrResponseReceived); see :mod:`odradek.controller.log_dirs`."""
        names = {str(topic_id): topic for topic, topic_id in request.topic_ids.items()}
        _error, failed = response_errors(ApiKey.LEADER_AND_ISR, response, names)
        offline = set()
        for name, code in failed.items():
            tp = parse_topic_partition_dir(name)
            if code == ErrorCode.kafka_storage_error and tp is not None:
                offline.add(tp)
        if offline:
            self.put(LeaderAndIsrResponseReceived(broker_id, frozenset(offline)))

    async def _send_update_metadata(
        self, states: dict[TopicPartition, PartitionState], deleted: set[str] | None = None
    ) -> None:
        offline: dict[TopicPartition, set[int]] = {}
        for broker_id, tps in self.ctx.offline_replicas.items():
            for tp in tps & states.keys():
                offline.setdefault(tp, set()).add(broker_id)
        request = UpdateMetadataRequest(
            self.broker_id,
            self.ctx.epoch,
            list(self.ctx.live_brokers.values()),
            dict(states),
            dict(self.ctx.topic_ids),
            set(deleted or ()),
            offline,
        )
        for broker_id in list(self.ctx.live_brokers):
            await self.channel.send_update_metadata(broker_id, request)

    async def _send_all_metadata(self) -> None:
        await self._send_leader_and_isr(dict(self.ctx.states))
        await self._send_update_metadata(dict(self.ctx.states))
