"""The leader's ISR writes to ZooKeeper and their change notifications (Kafka's ``ZkAlterPartitionManager``).

A :class:`~odradek.replication.partition.Partition` that expands or shrinks its ISR calls its
:data:`~odradek.replication.partition.IsrWriter`; :class:`ZkIsrWriter` is the one the broker
wires in. It replaces the partition state znode ``/brokers/topics/<t>/partitions/<p>/state`` with
a conditional set on the version the leader last knew (``PartitionState.zk_version``):

- the version still matches: written, the new version is returned;
- the znode moved but still names the same leader and leader epoch (an ISR write this broker lost
  track of, a controller rewrite within the same term): written again on the version found there;
- the znode moved to another leader or epoch, or is gone: None, nothing written (the controller
  announces the new term with LeaderAndIsr);
- ZooKeeper unreachable or the session expired: logged, None.

The writes asked for in one turn of the event loop go to ZooKeeper together, in one pipelined
batch (:meth:`~odradek.metadata.store.CoordinationStore.multi_many`): a broker that comes back
and rejoins the ISR of a thousand partitions it follows makes their leaders write a thousand ISR
expansions within moments, which one awaited write each made a loop stall of their own. Only a
write whose version moved takes the re-read path, on its own.

:meth:`ZkIsrWriter.propagate_isr_changes` batches the partitions whose ISR changed (each
partition reports its successful writes to the replica manager's ``isr_changed``) into one
sequential ``/isr_change_notification/isr_change_<n>`` per run, from which the controller
refreshes the brokers' metadata.

Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from odradek.metadata.errors import CoordinationError
from odradek.metadata.store import BadVersionError, NoNodeError
from odradek.metadata.znodes import LeaderAndIsr
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = ["ISR_CHANGE_PROPAGATION_MS", "PartitionStateZk", "ZkIsrWriter"]

log = logging.getLogger(__name__)

ISR_CHANGE_PROPAGATION_MS = 500
"""How often a broker writes one ``/isr_change_notification`` for the ISR changes it made (Kafka
checks every 2,500 ms and batches; the cluster tests want the controller to learn fast)."""


class PartitionStateZk(Protocol):
    """What the ISR writer needs of :class:`~odradek.metadata.kafka_zk_client.KafkaZkClient`."""

    async def update_leader_and_isr(self, tp: TopicPartition, state: LeaderAndIsr, expected_zk_version: int) -> int:
        """The znode's new version; raises BadVersionError (it moved) or NoNodeError."""
        ...

    async def update_leader_and_isrs(
        self, updates: Sequence[tuple[TopicPartition, LeaderAndIsr, int]]
    ) -> list[int | CoordinationError]:
        """Per update, the znode's new version or the error it failed with."""
        ...

    async def get_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None: ...

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str: ...


class ZkIsrWriter:
    """Broker ``broker_id``'s writes of its leaders' ISR changes, over ``zk`` (see the module docstring)."""

    def __init__(self, broker_id: int, zk: PartitionStateZk) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self._queued: list[tuple[TopicPartition, LeaderAndIsr, int, asyncio.Future[int | CoordinationError]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def write_isr(self, tp: TopicPartition, state: PartitionState) -> int | None:
        """An :data:`~odradek.replication.partition.IsrWriter`: ``state`` (the proposed ISR, on
        the version the leader knows) to the state znode; the new version, or None when not written."""
        znode = state.to_znode()
        try:
            result = await self._queue(tp, znode, state.zk_version)
            if isinstance(result, BadVersionError):
                current = await self.zk.get_partition_state(tp)
                if current is None or (current.leader, current.leader_epoch) != (state.leader, state.leader_epoch):
                    return None  # a new term: the controller's to announce
                return await self.zk.update_leader_and_isr(tp, znode, current.zk_version)
            if isinstance(result, CoordinationError):
                raise result
            return result
        except (BadVersionError, NoNodeError):
            return None
        except CoordinationError as exc:
            log.warning("broker %d: cannot write the ISR of %s-%d: %s", self.broker_id, tp.topic, tp.partition, exc)
            return None

    def _queue(self, tp: TopicPartition, znode: LeaderAndIsr, version: int) -> asyncio.Future[int | CoordinationError]:
        """The write joins the batch of this loop turn (sent at the next one)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int | CoordinationError] = loop.create_future()
        self._queued.append((tp, znode, version, future))
        if len(self._queued) == 1:
            loop.call_soon(self._send_queued)
        return future

    def _send_queued(self) -> None:
        batch, self._queued = self._queued, []
        task = asyncio.get_running_loop().create_task(self._write(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(
        self, batch: list[tuple[TopicPartition, LeaderAndIsr, int, asyncio.Future[int | CoordinationError]]]
    ) -> None:
        """One pipelined batch; each caller gets its own outcome (all the same error when the
        session was lost)."""
        try:
            results: Sequence[int | CoordinationError] = await self.zk.update_leader_and_isrs(
                [(tp, znode, version) for tp, znode, version, _ in batch]
            )
        except CoordinationError as exc:
            results = [exc] * len(batch)
        for (*_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def propagate_isr_changes(self, changed: set[TopicPartition]) -> None:
        """isr-change-propagation, every :data:`ISR_CHANGE_PROPAGATION_MS`: one notification naming
        the partitions in ``changed`` (the replica manager's ``isr_changed``: ISR changes since the
        last run), which is emptied; nothing when it is empty. When the write fails (logged) the
        partitions go back into ``changed`` for the next run."""
        if not changed:
            return
        partitions = sorted(changed)
        changed.clear()
        try:
            await self.zk.propagate_isr_changes(partitions)
        except Exception as exc:
            log.warning("broker %d: cannot write an ISR change notification: %s", self.broker_id, exc)
            changed.update(partitions)
