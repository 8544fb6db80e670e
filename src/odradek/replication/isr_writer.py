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

:meth:`ZkIsrWriter.propagate_isr_changes` batches the partitions whose ISR changed (each
partition reports its successful writes to the replica manager's ``isr_changed``) into one
sequential ``/isr_change_notification/isr_change_<n>`` per run, from which the controller
refreshes the brokers' metadata.

Event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
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

    async def get_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None: ...

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str: ...


class ZkIsrWriter:
    """Broker ``broker_id``'s writes of its leaders' ISR changes, over ``zk`` (see the module docstring)."""

    def __init__(self, broker_id: int, zk: PartitionStateZk) -> None:
        self.broker_id = broker_id
        self.zk = zk

    async def write_isr(self, tp: TopicPartition, state: PartitionState) -> int | None:
        """An :data:`~odradek.replication.partition.IsrWriter`: ``state`` (the proposed ISR, on
        the version the leader knows) to the state znode; the new version, or None when not written."""
        znode = state.to_znode()
        try:
            try:
                return await self.zk.update_leader_and_isr(tp, znode, state.zk_version)
            except BadVersionError:
                current = await self.zk.get_partition_state(tp)
                if current is None or (current.leader, current.leader_epoch) != (state.leader, state.leader_epoch):
                    return None  # a new term: the controller's to announce
                return await self.zk.update_leader_and_isr(tp, znode, current.zk_version)
        except (BadVersionError, NoNodeError):
            return None
        except CoordinationError as exc:
            log.warning("broker %d: cannot write the ISR of %s-%d: %s", self.broker_id, tp.topic, tp.partition, exc)
            return None

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
