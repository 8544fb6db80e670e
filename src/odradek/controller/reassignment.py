"""Partition reassignment by the active controller (Kafka 2.4+'s ``onPartitionReassignment``).

A part of :class:`~odradek.controller.controller.KafkaController` over
:class:`~odradek.controller.core.ControllerCore`. A reassignment moves a
partition from its original replicas (ORS) to target replicas (TRS); it is asked for through
AlterPartitionReassignments (:meth:`alter_partition_reassignments`) or by writing
``/admin/reassign_partitions`` (``{"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2,3]}]}``, the ZooKeeper-era tool's path). For each partition:

1. **Start**: the assignment becomes RS = TRS + (ORS - TRS), written to ``/brokers/topics/<t>``
   with ``adding_replicas`` (TRS - ORS) and ``removing_replicas`` (ORS - TRS); the leader epoch is
   bumped and LeaderAndIsr goes to every replica of RS, so the new replicas create their logs and
   fetch from the leader.
2. **Wait** until every replica of TRS is in the ISR (checked on each ISR change notification,
   on broker changes and at once).
3. **Complete**: the leader stays if it is in TRS and alive, else the first live TRS replica in
   the ISR leads; the ISR loses ORS - TRS; the leader epoch is bumped; the assignment becomes TRS
   (without adding/removing replicas); LeaderAndIsr to TRS, StopReplica with delete to the
   removed replicas, UpdateMetadata to every broker; the partition leaves
   ``/admin/reassign_partitions``, deleted when it is empty.

A new controller resumes reassignments from the topic znodes' ``adding_replicas`` and
``removing_replicas`` (TRS = RS - removing, ORS = RS - adding) and from the znode. Cancelling
(AlterPartitionReassignments with null replicas) reassigns back to ORS. Runs on the controller's
event task, like every other change of its state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid

from odradek.controller.core import ControllerCore
from odradek.controller.events import AlterResult, ApiPartitionReassignment, Reassignment
from odradek.controller.zk_state_machines import ReassignPartitionLeaderElectionStrategy
from odradek.errors import ErrorCode
from odradek.metadata.errors import NoNodeError
from odradek.metadata.znodes import PartitionAssignment
from odradek.storage import TopicPartition

log = logging.getLogger("odradek.controller.controller")

__all__ = ["AlterResult", "ControllerReassignment", "Reassignment"]


class ControllerReassignment(ControllerCore):
    """Partition reassignment, from the API or ``/admin/reassign_partitions``."""

    # --- requests ----------------------------------------------------------------------------

    async def alter_partition_reassignments(
        self, targets: dict[TopicPartition, list[int] | None]
    ) -> AlterResult | None:
        """Start (replicas) or cancel (None) reassignments; an error and message per partition,
        or None when this broker is not the controller."""
        future: asyncio.Future[AlterResult | None] = asyncio.get_running_loop().create_future()
        self.put(ApiPartitionReassignment(targets, future))
        return await future

    def list_partition_reassignments(
        self, partitions: set[TopicPartition] | None
    ) -> dict[TopicPartition, Reassignment] | None:
        """The reassignments in progress (of ``partitions``, or all); None when not the controller,
        or not yet done with its failover (it has not loaded the reassignments to resume: Kafka
        answers only after the failover, its event queue being one)."""
        if not self.initialized:
            return None
        return {tp: r for tp, r in self.reassignments.items() if partitions is None or tp in partitions}

    async def _on_alter_reassignments(
        self, targets: dict[TopicPartition, list[int] | None], future: asyncio.Future[AlterResult | None]
    ) -> None:
        results: AlterResult = {}
        try:
            if not self.active:
                return
            for tp, target in sorted(targets.items()):
                results[tp] = await self._request_reassignment(tp, target)
        finally:
            if not future.done():
                future.set_result(results if self.active else None)

    async def _request_reassignment(self, tp: TopicPartition, target: list[int] | None) -> tuple[ErrorCode, str | None]:
        current = self.ctx.assignments.get(tp.topic, {}).get(tp.partition)
        if current is None or tp not in self.ctx.states:
            return ErrorCode.unknown_topic_or_partition, f"unknown partition {tp.topic}-{tp.partition}"
        ongoing = self.reassignments.get(tp)
        if target is None:
            if ongoing is None:
                return ErrorCode.no_reassignment_in_progress, "No reassignment in progress"
            target = list(ongoing.original)
        error = self._invalid_target(target)
        if error is not None:
            return ErrorCode.invalid_replica_assignment, error
        await self._start(tp, target)
        return ErrorCode.none, None

    def _invalid_target(self, target: list[int]) -> str | None:
        if not target:
            return "The manual partition assignment includes an empty replica list."
        if len(set(target)) != len(target):
            return f"The manual partition assignment includes duplicate replicas {target}."
        unknown = [r for r in target if r not in self.ctx.live_brokers]
        if unknown:
            return f"The manual partition assignment includes brokers that are not alive: {unknown}."
        return None

    # --- znode -------------------------------------------------------------------------------

    async def _on_reassign_partitions_znode(self) -> None:
        """``/admin/reassign_partitions`` was created or changed: start what it asks for; entries
        that cannot start (unknown partition, invalid replicas) are dropped with a log line."""
        entries = await self.zk.get_partition_reassignment()
        keep: list[PartitionAssignment] = []
        for entry in entries:
            tp = TopicPartition(entry.topic, entry.partition)
            target = list(entry.replicas)
            ongoing = self.reassignments.get(tp)
            if ongoing is not None and ongoing.target == target:
                keep.append(entry)
                continue
            error, message = await self._request_reassignment(tp, target)
            if error is ErrorCode.none:
                if tp in self.reassignments:
                    keep.append(entry)
            else:
                log.warning("controller %d: reassignment of %s-%d refused: %s", self.broker_id, *tp, message)
        if len(keep) != len(entries):
            await self._write_znode(keep)

    async def _write_znode(self, entries: list[PartitionAssignment]) -> None:
        if entries:
            await self.zk.set_partition_reassignment(entries)
        else:
            await self.zk.delete_partition_reassignment()

    async def _leave_znode(self, tp: TopicPartition) -> None:
        entries = await self.zk.get_partition_reassignment()
        keep = [e for e in entries if (e.topic, e.partition) != (tp.topic, tp.partition)]
        if entries and len(keep) != len(entries):
            await self._write_znode(keep)

    async def _resume_reassignments(self) -> None:
        """After a controller failover: reassignments recorded in the topic znodes, then the znode's."""
        for topic in sorted(self.ctx.assignments):
            value = await self.zk.get_replica_assignment_and_topic_id(topic)
            if value is None:
                continue
            for partition, adding in value.adding_replicas.items():
                replicas = list(value.partitions.get(partition, ()))
                removing = list(value.removing_replicas.get(partition, ()))
                if replicas:
                    target = [r for r in replicas if r not in removing]
                    original = [r for r in replicas if r not in adding]
                    self.reassignments[TopicPartition(topic, partition)] = Reassignment(target, original)
            for partition, dropped in value.removing_replicas.items():
                tp = TopicPartition(topic, partition)
                replicas = list(value.partitions.get(partition, ()))
                if tp not in self.reassignments and replicas:
                    self.reassignments[tp] = Reassignment([r for r in replicas if r not in dropped], replicas)
        for tp in sorted(self.reassignments):
            log.info("controller %d resumes the reassignment of %s-%d", self.broker_id, tp.topic, tp.partition)
            await self._maybe_complete(tp)
        await self._on_reassign_partitions_znode()

    # --- the move ----------------------------------------------------------------------------

    async def _start(self, tp: TopicPartition, target: list[int]) -> None:
        ongoing = self.reassignments.get(tp)
        original = ongoing.original if ongoing is not None else list(self.ctx.assignments[tp.topic][tp.partition])
        superseded = [r for r in ongoing.replicas if r not in original] if ongoing is not None else []
        move = Reassignment(list(target), original, superseded)
        if not move.adding and not move.removing:  # the same replicas (a cancelled shrink, a new order)
            if self.reassignments.pop(tp, None) is not None or target != original:
                self.ctx.assignments[tp.topic][tp.partition] = list(target)
                await self._write_assignment(tp.topic)
                self.ctx.states[tp] = dataclasses.replace(self.ctx.states[tp], replicas=list(target))
                self.batch.add_update_metadata((tp,))
            return
        self.reassignments[tp] = move
        self.ctx.assignments[tp.topic][tp.partition] = move.replicas
        await self._write_assignment(tp.topic)
        self.replica_state_machine.settle(tp, move.replicas, "reassignment started")  # NewReplica -> OnlineReplica
        # LeaderAndIsr to every replica of RS (the new ones create their logs), UpdateMetadata to all
        await self.partition_state_machine.bump_leader_epoch(tp, move.replicas, "reassignment started")
        log.info(
            "controller %d: reassigning %s-%d from %s to %s (adding %s, removing %s)",
            self.broker_id,
            tp.topic,
            tp.partition,
            move.original,
            move.target,
            move.adding,
            move.removing,
        )
        await self._maybe_complete(tp)

    async def _on_reassignment_progress(self, partitions: set[TopicPartition]) -> None:
        """ISRs changed (or brokers came and went): complete the moves whose targets are all in sync."""
        for tp in sorted(partitions & set(self.reassignments)):
            await self._maybe_complete(tp)

    async def _maybe_complete(self, tp: TopicPartition) -> None:
        move = self.reassignments.get(tp)
        state = self.ctx.states.get(tp)
        if move is None or state is None or not all(r in state.isr for r in move.target):
            return
        live = set(self.ctx.live_brokers) - self.ctx.shutting_down
        strategy = ReassignPartitionLeaderElectionStrategy(tuple(move.target))
        cause = "reassignment completed"
        # LeaderAndIsr to TRS and UpdateMetadata to every broker (the election), StopReplica with
        # delete to the removed replicas (their deletion): all in this event's batch
        new = await self.partition_state_machine.elect(tp, list(move.target), strategy, live, cause)
        if isinstance(new, ErrorCode):
            return
        del self.reassignments[tp]
        self.replica_state_machine.start_deletion({tp: move.removing}, cause)
        self.ctx.assignments[tp.topic][tp.partition] = list(move.target)
        await self._write_assignment(tp.topic)
        # odradek does not wait for these StopReplica answers (a topic deletion does)
        self.replica_state_machine.complete_deletion({tp: move.removing}, cause)
        await self._leave_znode(tp)
        log.info(
            "controller %d: reassignment of %s-%d to %s completed", self.broker_id, tp.topic, tp.partition, move.target
        )

    async def _write_assignment(self, topic: str) -> None:
        """``/brokers/topics/<t>`` from the controller's assignment, with the moves in progress."""
        moves = {tp.partition: m for tp, m in self.reassignments.items() if tp.topic == topic}
        try:
            await self.zk.set_topic_assignment(
                topic,
                self.ctx.assignments[topic],
                self.ctx.topic_ids.get(topic, uuid.UUID(int=0)),
                adding_replicas={p: m.adding for p, m in moves.items() if m.adding},
                removing_replicas={p: m.removing for p, m in moves.items() if m.removing},
            )
        except NoNodeError:
            log.warning("controller %d: topic %s vanished during a reassignment", self.broker_id, topic)
