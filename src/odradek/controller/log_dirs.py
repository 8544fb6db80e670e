"""Offline replicas: a broker's failed log dir, as Kafka's controller handles it.

A part of :class:`~odradek.controller.controller.KafkaController` over
:class:`~odradek.controller.core.ControllerCore` (which reads the LeaderAndIsr answers and queues
``LeaderAndIsrResponseReceived``).

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

from odradek.controller.core import ControllerCore
from odradek.storage import TopicPartition

log = logging.getLogger("odradek.controller.controller")


class ControllerLogDirs(ControllerCore):
    """Log dir failures: the notifications and the replicas answered KAFKA_STORAGE_ERROR."""

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
            self.batch.add_leader_and_isr({broker_id}, hosted)

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
        machine = self.partition_state_machine
        offline = [
            (
                tp,
                self.ctx.states[tp].replicas,
                self.live_for(tp, live),
                await machine.unclean_election_enabled(tp.topic),
            )
            for tp in sorted(known)
        ]
        await machine.elect_offline_many(offline, f"log dir failure on broker {broker_id}")
        # every broker learns the offline replicas (Metadata's offline_replicas), changed or not
        self.batch.add_update_metadata(known)
