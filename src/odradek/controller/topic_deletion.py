"""Topic deletion by the active controller (Kafka's ``TopicDeletionManager``).

A part of :class:`~odradek.controller.controller.KafkaController` over
:class:`~odradek.controller.core.ControllerCore`. A topic marked for deletion
(``/admin/delete_topics/<t>``) is queued in ``ctx.topics_to_be_deleted``; from then on the
controller elects no leader for it, sends no LeaderAndIsr for it, and lists its partitions in
every UpdateMetadata with leader -2, so brokers drop it from their metadata. Then:

1. **Start** (an eligible topic: no replica deletion in flight, not marked ineligible): its
   partitions go OfflinePartition and NonExistentPartition; each replica on a live broker goes
   OfflineReplica and ReplicaDeletionStarted, with StopReplica (delete) to its broker; each
   replica on a dead broker (or a failed log dir, or a broker shutting down) goes
   ReplicaDeletionIneligible, and the topic is marked ineligible for deletion.
2. **Answers** (``TopicDeletionStopReplicaResponseReceived``): a replica answered without error
   goes ReplicaDeletionSuccessful; one answered with an error goes ReplicaDeletionIneligible and
   marks its topic ineligible. A broker that dies (or registers again) before answering has its
   started replicas marked ReplicaDeletionIneligible the same way.
3. **Resume** after each of these: a topic whose replicas are all ReplicaDeletionSuccessful is
   deleted (``/brokers/topics/<t>``, its config, then the mark) and forgotten; one with a
   deletion in flight waits; ineligible replicas go back to OfflineReplica, to be started again
   once the topic is eligible.
4. **Retry**: a broker hosting replicas of a queued topic that registers (a dead broker's
   return) makes the topic eligible again, so its remaining replicas get StopReplica then.

A topic the controller does not know (never loaded, or already forgotten) is deleted at once.
A new controller re-reads the marks before it elects anything, so it resumes the deletions.
Runs on the controller's event task.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.controller.channel import response_errors
from odradek.controller.context import PartitionLifecycle, ReplicaLifecycle
from odradek.controller.core import ControllerCore
from odradek.controller.events import TopicDeletionStopReplicaResponseReceived
from odradek.controller.messages.stop_replica import EPOCH_DURING_DELETE, StopReplicaRequest
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.storage import TopicPartition
from odradek.storage.topic_partition import parse_topic_partition_dir

log = logging.getLogger("odradek.controller.controller")

__all__ = ["ControllerTopicDeletion"]

_R = ReplicaLifecycle
CAUSE = "topic deletion"


class ControllerTopicDeletion(ControllerCore):
    """Topic deletion that waits for the replicas' StopReplica answers (module docstring)."""

    def _deleting_replicas(self, topic: str) -> dict[TopicPartition, list[int]]:
        return {TopicPartition(topic, p): list(rs) for p, rs in self.ctx.assignments.get(topic, {}).items()}

    async def _queue_topic_deletions(self) -> None:
        """Read ``/admin/delete_topics``: unknown topics are deleted at once, known ones queued."""
        for topic in sorted(await self.zk.get_topic_deletions()):
            if topic in self.ctx.assignments:
                self.ctx.topics_to_be_deleted.add(topic)  # a move in progress is dropped with the topic
            else:
                await self.zk.delete_topic(topic)
                await self.zk.delete_topic_deletion(topic)
                log.info("controller %d deleted topic %s", self.broker_id, topic)

    async def _on_topic_deletion_requested(self) -> None:
        """The TopicDeletion event: queue the marked topics and resume deletions."""
        await self._queue_topic_deletions()
        await self._resume_deletions()

    async def _resume_deletions(self) -> None:
        """Complete, wait, retry or start each queued topic's deletion (module docstring, 3)."""
        machine = self.replica_state_machine
        eligible: list[str] = []
        for topic in sorted(self.ctx.topics_to_be_deleted):
            replicas = [(tp, r) for tp, rs in self._deleting_replicas(topic).items() for r in rs]
            states = {machine.state(tp, r) for tp, r in replicas}
            if states <= {_R.ReplicaDeletionSuccessful}:
                await self._complete_delete_topic(topic)
                continue
            if _R.ReplicaDeletionStarted in states:
                continue
            for tp, replica in replicas:
                if machine.state(tp, replica) is _R.ReplicaDeletionIneligible:
                    machine.transition(tp, replica, _R.OfflineReplica, CAUSE)
            if topic not in self.ctx.topics_ineligible_for_deletion:
                eligible.append(topic)
        for topic in eligible:
            self._on_topic_deletion(topic)

    def _on_topic_deletion(self, topic: str) -> None:
        """Start (module docstring, 1)."""
        partitions = self._deleting_replicas(topic)
        lifecycle = self.partition_state_machine
        for tp in sorted(partitions):
            if lifecycle.state(tp) is not PartitionLifecycle.NonExistentPartition:
                if lifecycle.state(tp) is not PartitionLifecycle.OfflinePartition:
                    lifecycle.transition(tp, PartitionLifecycle.OfflinePartition, cause=CAUSE)
                lifecycle.transition(tp, PartitionLifecycle.NonExistentPartition, cause=CAUSE)
        self.batch.add_update_metadata(partitions)  # sent with leader -2: brokers forget the topic
        machine = self.replica_state_machine
        online: dict[TopicPartition, list[int]] = {}
        for tp, replicas in partitions.items():
            for replica in replicas:
                if machine.state(tp, replica) is _R.ReplicaDeletionSuccessful:
                    continue
                if self.ctx.replica_online(tp, replica):
                    online.setdefault(tp, []).append(replica)
                else:
                    machine.mark_deletion_ineligible(tp, replica, CAUSE)
                    self.ctx.topics_ineligible_for_deletion.add(topic)
        machine.start_deletion(online, CAUSE, EPOCH_DURING_DELETE)
        log.info(
            "controller %d: deleting topic %s: StopReplica to %d replicas%s",
            self.broker_id,
            topic,
            sum(map(len, online.values())),
            ", waiting for the others' brokers" if topic in self.ctx.topics_ineligible_for_deletion else "",
        )

    async def _complete_delete_topic(self, topic: str) -> None:
        partitions = self._deleting_replicas(topic)
        machine = self.replica_state_machine
        for tp, replicas in partitions.items():
            for replica in replicas:
                machine.transition(tp, replica, _R.NonExistentReplica, CAUSE)
        await self.zk.delete_topic(topic)
        self._forget_topic(topic)
        await self.zk.delete_topic_deletion(topic)
        log.info("controller %d deleted topic %s", self.broker_id, topic)

    def _forget_topic(self, topic: str) -> None:
        """Drop ``topic`` from the controller's state (overridden by the controller, which also
        cancels its watch)."""
        self.ctx.topics_to_be_deleted.discard(topic)
        self.ctx.topics_ineligible_for_deletion.discard(topic)

    # --- answers and brokers -----------------------------------------------------------------

    def stop_replica_answered(self, request: StopReplicaRequest, broker_id: int, response: Any) -> None:
        """The channel's callback for a StopReplica the batch sent: the answer of a deletion is
        queued as ``TopicDeletionStopReplicaResponseReceived`` (a top-level error fails every
        partition)."""
        if not request.delete_partitions:
            return
        error, failed = response_errors(ApiKey.STOP_REPLICA, response)
        failures = set(request.partitions) if error != ErrorCode.none else set()
        for name in failed:
            tp = parse_topic_partition_dir(name)
            if tp is not None:
                failures.add(tp)
        self.put(
            TopicDeletionStopReplicaResponseReceived(broker_id, frozenset(request.partitions), frozenset(failures))
        )

    async def _on_stop_replica_deletion_answered(
        self, broker_id: int, partitions: frozenset[TopicPartition], failed: frozenset[TopicPartition]
    ) -> None:
        """Answers (module docstring, 2); replicas not being deleted by a topic deletion (a
        reassignment's, an answer to an earlier attempt) are left alone."""
        machine = self.replica_state_machine
        for tp in sorted(partitions):
            if tp.topic not in self.ctx.topics_to_be_deleted or machine.state(tp, broker_id) is not (
                _R.ReplicaDeletionStarted
            ):
                continue
            if tp in failed:
                log.warning("controller %d: broker %d failed to delete %s-%d", self.broker_id, broker_id, *tp)
                machine.mark_deletion_ineligible(tp, broker_id, CAUSE)
                self.ctx.topics_ineligible_for_deletion.add(tp.topic)
            else:
                machine.transition(tp, broker_id, _R.ReplicaDeletionSuccessful, CAUSE)
        await self._resume_deletions()

    async def _on_deletion_brokers_changed(self, new: set[int], dead: set[int]) -> None:
        """Brokers that died or registered again fail their replicas' deletions in flight (they
        will never answer); a registered broker makes the queued topics it hosts eligible again
        (Kafka's ``resumeDeletionForTopics``). Then resume."""
        if not self.ctx.topics_to_be_deleted:
            return
        machine = self.replica_state_machine
        for topic in sorted(self.ctx.topics_to_be_deleted):
            for tp, replicas in self._deleting_replicas(topic).items():
                for replica in set(replicas) & (new | dead):
                    if machine.state(tp, replica) is _R.ReplicaDeletionStarted:
                        machine.mark_deletion_ineligible(tp, replica, f"broker {replica} changed")
                        self.ctx.topics_ineligible_for_deletion.add(topic)
                if new & set(replicas):
                    self.ctx.topics_ineligible_for_deletion.discard(topic)
        await self._resume_deletions()
