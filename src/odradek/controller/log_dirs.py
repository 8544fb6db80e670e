"""Offline replicas: a broker's failed log dir, as Kafka's controller handles it.

A mixin of :class:`~odradek.controller.controller.KafkaController`.

1. A broker whose log dir failed writes ``/log_dir_event_notification/log_dir_event_<seq>``; the
   controller (watching the children) reads and deletes them and sends each named live broker
   LeaderAndIsr for every replica it hosts (Kafka's ``onBrokerLogDirFailure``).
2. Every LeaderAndIsr answer is read: partitions answered KAFKA_STORAGE_ERROR are offline on that
   broker (Kafka's ``LeaderAndIsrResponseReceived``). The controller records them in
   ``ctx.offline_replicas`` and moves each such partition as for a dead broker, but for that replica
   only: a new leader from the rest of the ISR if the broker led it (or none, offline, when the ISR
   holds no other live replica and unclean election is off), the broker dropped from the ISR.
3. Every broker gets UpdateMetadata for those partitions naming the replica in
   ``offline_replicas``, so Metadata lists it there while its broker is alive.
4. Elections skip offline replicas until the broker registers again (a restart with the directory
   repaired brings its replicas back through the usual catch-up into the ISR).

Runs on the controller's event task.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.controller.channel import response_errors
from odradek.controller.core import ControllerCore
from odradek.controller.events import ControllerEvent
from odradek.controller.requests import LeaderAndIsrRequest
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition
from odradek.storage.topic_partition import parse_topic_partition_dir

log = logging.getLogger("odradek.controller.controller")


class ControllerLogDirs(ControllerCore):
    async def _update_state(
        self, tp: TopicPartition, replicas: list[int], live: set[int], unclean: bool
    ) -> PartitionState | None:
        raise NotImplementedError

    async def _unclean_election_enabled(self, topic: str) -> bool:
        raise NotImplementedError

    def live_for(self, tp: TopicPartition, live: set[int]) -> set[int]:
        """``live`` without the brokers on which ``tp``'s replica is offline."""
        offline = {b for b, tps in self.ctx.offline_replicas.items() if tp in tps}
        return live - offline if offline else live

    def leader_and_isr_answered(self, broker_id: int, response: Any, request: LeaderAndIsrRequest) -> None:
        """The channel's callback: queue the partitions ``broker_id`` answered KAFKA_STORAGE_ERROR."""
        names = {str(topic_id): topic for topic, topic_id in request.topic_ids.items()}
        _error, failed = response_errors(ApiKey.LEADER_AND_ISR, response, names)
        offline = set()
        for name, code in failed.items():
            tp = parse_topic_partition_dir(name)
            if code == ErrorCode.kafka_storage_error and tp is not None:
                offline.add(tp)
        if offline:
            self.put(ControllerEvent.REPLICAS_OFFLINE, (broker_id, offline))

    async def _on_log_dir_event_notification(self) -> None:
        brokers = await self.zk.pop_log_dir_event_notifications()
        for broker_id in sorted(brokers):
            if broker_id not in self.ctx.live_brokers:
                continue
            hosted = {tp: s for tp, s in self.ctx.states.items() if broker_id in s.replicas}
            log.info(
                "controller %d: log dir failure on broker %d: asking about its %d replicas",
                self.broker_id,
                broker_id,
                len(hosted),
            )
            await self._send_leader_and_isr(hosted, {broker_id})

    async def _on_replicas_offline(self, broker_id: int, partitions: set[TopicPartition]) -> None:
        known = {tp for tp in partitions if tp in self.ctx.states}
        if broker_id not in self.ctx.live_brokers or not known:
            return
        already = self.ctx.offline_replicas.setdefault(broker_id, set())
        if known <= already:
            return
        already |= known
        log.warning(
            "controller %d: replicas on broker %d are offline: %s",
            self.broker_id,
            broker_id,
            ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(known)[:10]) + (" …" if len(known) > 10 else ""),
        )
        live = set(self.ctx.live_brokers) - self.ctx.shutting_down
        changed: dict[TopicPartition, PartitionState] = {}
        for tp in sorted(known):
            state = self.ctx.states[tp]
            unclean = await self._unclean_election_enabled(tp.topic)
            new = await self._update_state(tp, state.replicas, self.live_for(tp, live), unclean)
            if new is not None:
                self.ctx.states[tp] = changed[tp] = new
        if changed:
            await self._send_leader_and_isr(changed)
        # every broker learns the offline replicas (Metadata's offline_replicas), changed or not
        await self._send_update_metadata({tp: self.ctx.states[tp] for tp in known})
