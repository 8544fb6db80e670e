"""Transactional offset commits (TxnOffsetCommit) of the group coordinator.

Kafka's ``GroupMetadataManager.storeOffsets`` with a producer id and ``handleTxnCompletion``:
the offsets are written to the group's ``__consumer_offsets`` partition as one transactional batch
(the producer's id and epoch, transactional flag), kept aside per producer id, and become the
group's committed offsets only when the COMMIT marker of that producer is written to the
partition (WriteTxnMarkers calls :meth:`TxnOffsetCommits.complete`); an ABORT drops them. While
a producer's offsets for a partition are pending, OffsetFetch with ``require_stable`` answers that
partition UNSTABLE_OFFSET_COMMIT. After a coordinator failover the loader decides them from the
markers in the log; offsets of a transaction the log leaves open are pending again after the load.
Event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from odradek.coordinator.group.group import CommitRecord, GroupMetadata
from odradek.coordinator.group.schemas import OffsetAndMetadata, encode_offset_commit_key, encode_offset_commit_value
from odradek.coordinator.group.state import GroupState
from odradek.errors import ErrorCode
from odradek.protocol.records import Record
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.coordinator.group.manager import GroupMetadataManager

__all__ = ["TxnOffsetCommits"]


class TxnOffsetCommits:
    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self.pending: dict[int, dict[tuple[str, TopicPartition], tuple[OffsetAndMetadata, int]]] = {}
        """producer id -> (group, partition) -> (offset, its record's offset in __consumer_offsets)."""

    def is_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any((group_id, tp) in by_key for by_key in self.pending.values())

    def has_group(self, group_id: str) -> bool:
        """Some producer's offsets for ``group_id`` are pending (the group must not go Dead)."""
        return any(key[0] == group_id for by_key in self.pending.values() for key in by_key)

    async def store(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """Write the offsets transactionally; NONE per partition once durable (not yet visible)."""
        records = [
            Record(encode_offset_commit_key(group.group_id, tp.topic, tp.partition), encode_offset_commit_value(v))
            for tp, v in offsets.items()
        ]
        error, base = await self.manager.write_transactional(group.group_id, records, producer_id, producer_epoch)
        if error != ErrorCode.none:
            return dict.fromkeys(offsets, error)
        mine = self.pending.setdefault(producer_id, {})
        for i, (tp, value) in enumerate(offsets.items()):
            mine[(group.group_id, tp)] = (value, base + i)
        return dict.fromkeys(offsets, ErrorCode.none)

    def restore(self, loaded: Mapping[int, Mapping[tuple[str, TopicPartition], tuple[OffsetAndMetadata, int]]]) -> None:
        """Take the offsets of transactions a partition's load found without their marker (still
        open when the log ends) as pending, as Kafka's ``loadGroup`` does with its pending
        transactional offsets; a later COMMIT or ABORT marker decides them."""
        for producer_id, by_key in loaded.items():
            if by_key:
                self.pending.setdefault(producer_id, {}).update(by_key)

    def forget(self, is_unloaded: Callable[[str], bool]) -> None:
        """Drop the pending offsets of the groups ``is_unloaded`` names (their partition is unloaded)."""
        for producer_id in list(self.pending):
            mine = self.pending[producer_id]
            for key in [k for k in mine if is_unloaded(k[0])]:
                del mine[key]
            if not mine:
                del self.pending[producer_id]

    def complete(self, producer_id: int, partitions: Iterable[int], commit: bool) -> int:
        """The producer's marker was written on ``partitions`` of ``__consumer_offsets``: its
        offsets there become committed (``commit``) or are dropped. Returns how many changed."""
        mine = self.pending.get(producer_id)
        if not mine:
            return 0
        wanted = set(partitions)
        done = [key for key in mine if self.manager.partition_for(key[0]) in wanted]
        for group_id, tp in done:
            value, record_offset = mine.pop((group_id, tp))
            group = self.manager.get_group(group_id)
            if commit and group is not None and not group.is_(GroupState.DEAD):
                current = group.offsets.get(tp)
                if current is None or current.record_offset is None or current.record_offset < record_offset:
                    group.offsets[tp] = CommitRecord(value, record_offset)
        if not mine:
            del self.pending[producer_id]
        return len(done)
