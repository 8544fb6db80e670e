"""The requests one controller event sends (Kafka's ``ControllerBrokerRequestBatch``).

The controller owns one :class:`ControllerBrokerRequestBatch`, built once with its context and
channel. The event task starts it empty before each event (:meth:`new_batch`); while the event
runs, the state machines and the event's handler only *add* to it:

- :meth:`add_leader_and_isr`: partitions a broker must apply (it leads or follows them); also
  asks for UpdateMetadata of those partitions, as Kafka's ``addLeaderAndIsrRequestForBrokers``;
- :meth:`add_update_metadata`: partitions every live broker must learn (none: only the live
  brokers); those of topics queued for deletion go out with leader -2;
- :meth:`add_stop_replica`: partitions a broker must stop (and delete) replicas of.

At the end of the event the task sends it once (:meth:`send_requests_to_brokers`): per broker at
most one LeaderAndIsr, one UpdateMetadata and one StopReplica (two StopReplica only if one event
both stopped and deleted replicas on a broker, which the controller never does: StopReplica
before v3 has one delete flag per request). Kafka sends one batch per state machine call; odradek
sends one per event, so an event that moves many partitions through several steps costs each
broker one request of each kind.

Partition states are read from the context when the batch is sent, so a partition changed twice
in an event goes out once, in its last state; a partition the event forgot (its topic deleted) is
left out, and so is a topic queued for deletion from LeaderAndIsr. Recipients that are no longer live when the batch is
sent are skipped (the channel has no queue for them). The batch is emptied by sending it, and by
:meth:`clear` when the controller resigns mid-event.

Event-task only: every method runs on the controller's event task.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.controller.channel import ControllerChannelManager
from odradek.controller.context import ControllerContext
from odradek.controller.messages.leader_and_isr import LeaderAndIsrRequest
from odradek.controller.messages.stop_replica import StopReplicaRequest
from odradek.controller.messages.update_metadata import LEADER_DURING_DELETE, UpdateMetadataRequest
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = ["ControllerBrokerRequestBatch", "LeaderAndIsrAnswered", "StopReplicaAnswered"]

LeaderAndIsrAnswered = Callable[[LeaderAndIsrRequest, int, Any], None]
"""``callback(request, broker_id, response)`` for a LeaderAndIsr the batch sent."""
StopReplicaAnswered = Callable[[StopReplicaRequest, int, Any], None]
"""``callback(request, broker_id, response)`` for a StopReplica the batch sent."""


class ControllerBrokerRequestBatch:
    """One event's LeaderAndIsr, UpdateMetadata and StopReplica requests (module docstring)."""

    def __init__(
        self,
        controller_id: int,
        ctx: ControllerContext,
        channel: ControllerChannelManager,
        on_leader_and_isr: LeaderAndIsrAnswered | None = None,
        on_stop_replica: StopReplicaAnswered | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.ctx = ctx
        self.channel = channel
        self.on_leader_and_isr = on_leader_and_isr
        self.on_stop_replica = on_stop_replica
        self._leader_and_isr: dict[int, set[TopicPartition]] = {}
        self._update_metadata: set[TopicPartition] | None = None
        """None: no UpdateMetadata in this batch; a set (maybe empty): one to every live broker."""
        self._stop_replica: dict[int, dict[TopicPartition, tuple[bool, int]]] = {}

    # --- building ----------------------------------------------------------------------------

    def new_batch(self) -> None:
        """Start an event's batch (the previous one was sent or cleared)."""
        self.clear()

    def clear(self) -> None:
        """Forget what was added without sending it."""
        self._leader_and_isr = {}
        self._update_metadata = None
        self._stop_replica = {}

    def is_empty(self) -> bool:
        return not self._leader_and_isr and self._update_metadata is None and not self._stop_replica

    def add_leader_and_isr(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        """LeaderAndIsr of ``partitions`` to each live broker of ``brokers``, and UpdateMetadata of
        them to every live broker."""
        tps = set(partitions)
        for broker_id in brokers:
            if broker_id in self.ctx.live_brokers:
                self._leader_and_isr.setdefault(broker_id, set()).update(tps)
        self.add_update_metadata(tps)

    def add_leader_and_isr_for_replicas(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        """LeaderAndIsr of each partition to its live replicas (and UpdateMetadata of them)."""
        for tp, state in states.items():
            self.add_leader_and_isr(state.replicas, (tp,))

    def add_update_metadata(self, partitions: Iterable[TopicPartition] = ()) -> None:
        """UpdateMetadata to every live broker, listing ``partitions`` (none: the live brokers
        only); those of a topic queued for deletion are sent with leader -2."""
        if self._update_metadata is None:
            self._update_metadata = set()
        self._update_metadata.update(partitions)

    def add_stop_replica(self, broker_id: int, tp: TopicPartition, delete: bool, leader_epoch: int = -1) -> None:
        """StopReplica of ``tp`` to ``broker_id`` (if live), deleting the replica if ``delete``;
        ``leader_epoch``: the one the controller knows (-1: any)."""
        if broker_id in self.ctx.live_brokers:
            self._stop_replica.setdefault(broker_id, {})[tp] = (delete, leader_epoch)

    # --- sending -----------------------------------------------------------------------------

    async def send_requests_to_brokers(self) -> None:
        """Queue the batch's requests on the channel (LeaderAndIsr, then UpdateMetadata, then
        StopReplica, per broker) and empty it."""
        try:
            await self._send_leader_and_isr()
            await self._send_update_metadata()
            await self._send_stop_replica()
        finally:
            self.clear()

    async def _send_leader_and_isr(self) -> None:
        for broker_id, tps in sorted(self._leader_and_isr.items()):
            deleting = self.ctx.topics_to_be_deleted
            states = {tp: self.ctx.states[tp] for tp in tps if tp in self.ctx.states and tp.topic not in deleting}
            if not states or broker_id not in self.ctx.live_brokers:
                continue
            topic_ids = {tp.topic: self.ctx.topic_ids[tp.topic] for tp in states}
            request = LeaderAndIsrRequest(self.controller_id, self.ctx.epoch, states, topic_ids)
            callback = None if self.on_leader_and_isr is None else functools.partial(self.on_leader_and_isr, request)
            await self.channel.send_leader_and_isr(broker_id, request, callback)

    async def _send_update_metadata(self) -> None:
        if self._update_metadata is None:
            return
        states = {tp: self.ctx.states[tp] for tp in self._update_metadata if tp in self.ctx.states}
        deleted = {tp.topic for tp in states} & self.ctx.topics_to_be_deleted
        for tp, state in states.items():
            if tp.topic in deleted:
                states[tp] = dataclasses.replace(state, leader=LEADER_DURING_DELETE, controller_epoch=self.ctx.epoch)
        offline: dict[TopicPartition, set[int]] = {}
        for broker_id, tps in self.ctx.offline_replicas.items():
            for tp in tps & states.keys():
                offline.setdefault(tp, set()).add(broker_id)
        request = UpdateMetadataRequest(
            self.controller_id,
            self.ctx.epoch,
            list(self.ctx.live_brokers.values()),
            states,
            dict(self.ctx.topic_ids),
            deleted,
            offline,
        )
        for broker_id in sorted(self.ctx.live_brokers):
            await self.channel.send_update_metadata(broker_id, request)

    async def _send_stop_replica(self) -> None:
        for broker_id, partitions in sorted(self._stop_replica.items()):
            if broker_id not in self.ctx.live_brokers:
                continue
            for delete in (False, True):
                epochs = {tp: epoch for tp, (d, epoch) in partitions.items() if d is delete}
                if not epochs:
                    continue
                request = StopReplicaRequest(self.controller_id, self.ctx.epoch, sorted(epochs), delete, epochs)
                callback = None if self.on_stop_replica is None else functools.partial(self.on_stop_replica, request)
                await self.channel.send_stop_replica(broker_id, request, callback)
