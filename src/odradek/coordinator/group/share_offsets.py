"""A share group's start offsets, as its coordinator describes, alters and deletes them (KIP-932's
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, which Kafka's
``kafka-share-groups.sh`` uses for ``--describe``, ``--reset-offsets`` and ``--delete-offsets``).

A share group has no committed offsets: each share-partition's state, kept by the share coordinator
(:mod:`odradek.coordinator.share`), starts at its *start offset*; records before it are done.

- Describe reads each share-partition's state through the persister: its start offset (-1 when
  never placed: the first fetch places it), the leader epoch that last wrote it, and the records
  in flight already done (acknowledged or archived), from which the lag is computed when the
  caller knows the partition's high watermark (``lag = high watermark - start offset - done``;
  -1 otherwise). ``topics`` None: every topic whose state the group initialized.
- Alter needs the group empty (NON_EMPTY_GROUP; an unknown group is created empty, as Kafka does):
  each share-partition's state is initialized again at a new state epoch (one above the kept one)
  with the new start offset, which fences the partition's leader's in-memory share-partition
  (its next write is FENCED_STATE_EPOCH and it loads the new state). A start offset below 0 is
  INVALID_REQUEST; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION.
- Delete needs the group empty too: every share-partition of the topics loses its state and the
  topics are no longer initialized for the group (a member subscribing again starts them anew).

Event loop only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from odradek.coordinator.group.share_group import InitTopic, ShareGroup
from odradek.coordinator.group.share_groups import ShareGroups
from odradek.errors import ErrorCode
from odradek.share.state import DeliveryState, SharePartitionKey, ShareStateError

__all__ = ["PartitionOffset", "ShareGroupOffsets", "TopicOffsets"]


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """One share-partition's answer to DescribeShareGroupOffsets."""

    partition: int
    start_offset: int = -1
    leader_epoch: int = -1
    lag: int = -1
    error: ErrorCode = ErrorCode.none
    message: str | None = None


TopicOffsets = list[tuple[str, uuid.UUID | None, list[PartitionOffset]]]


class ShareGroupOffsets:
    """See the module docstring. ``high_watermark(topic, partition)``: the partition's high
    watermark where this broker knows it (a replica here), else None (lag -1)."""

    def __init__(self, groups: ShareGroups, high_watermark: Callable[[str, int], int | None]) -> None:
        self.groups = groups
        self.high_watermark = high_watermark

    def _share_group(self, group_id: str, create: bool = False) -> tuple[ErrorCode, str | None, ShareGroup | None]:
        """ShareGroupDescribe's answer for the group; with ``create`` an unknown id (not another
        kind of group) becomes a new empty share group."""
        error, message, group = self.groups.describe(group_id)
        if group is None and create and error is ErrorCode.group_id_not_found and not self.groups.other_kind(group_id):
            group = ShareGroup(group_id)
            self.groups.membership.install(group)
            return ErrorCode.none, None, group
        return error, message, group

    # --- describe ---------------------------------------------------------------------------------

    async def describe(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> tuple[ErrorCode, str | None, TopicOffsets]:
        error, message, group = self._share_group(group_id)
        if group is None:
            return error, message, []
        if topics is None:
            topics = [(t.name, sorted(t.partitions)) for t in group.initialized.values()]
        out: TopicOffsets = []
        for name, partitions in topics:
            topic = self.groups.topic(name)
            if topic is None:
                unknown = [PartitionOffset(p, error=ErrorCode.unknown_topic_or_partition) for p in partitions]
                out.append((name, None, unknown))
                continue
            answers = await asyncio.gather(*(self._describe_one(group_id, name, topic.topic_id, p) for p in partitions))
            out.append((name, topic.topic_id, list(answers)))
        return ErrorCode.none, None, out

    async def _describe_one(self, group_id: str, name: str, topic_id: uuid.UUID, partition: int) -> PartitionOffset:
        persister = self.groups.persister
        if persister is None:
            return PartitionOffset(partition)
        try:
            state = await persister.read_state(SharePartitionKey(group_id, topic_id, partition), -1)
        except ShareStateError as exc:
            return PartitionOffset(partition, error=exc.error_code, message=exc.message)
        if state is None or state.start_offset < 0:
            return PartitionOffset(partition)
        done = sum(
            b.last_offset - b.first_offset + 1
            for b in state.batches
            if b.delivery_state in (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED)
        )
        hw = self.high_watermark(name, partition)
        lag = max(0, hw - state.start_offset - done) if hw is not None else -1
        return PartitionOffset(partition, state.start_offset, state.leader_epoch, lag)

    # --- alter -----------------------------------------------------------------------------------

    async def alter(
        self, group_id: str, offsets: Mapping[str, Mapping[int, int]]
    ) -> tuple[ErrorCode, str | None, dict[str, tuple[uuid.UUID | None, dict[int, ErrorCode]]]]:
        error, message, group = self._share_group(group_id, create=True)
        if group is None:
            return error, message, {}
        if group.members:
            return ErrorCode.non_empty_group, f"Group {group_id} is not empty.", {}
        persister = self.groups.persister
        out: dict[str, tuple[uuid.UUID | None, dict[int, ErrorCode]]] = {}
        initialized: dict[uuid.UUID, InitTopic] = {}
        for name, partitions in offsets.items():
            topic = self.groups.topic(name)
            if topic is None:
                out[name] = (None, dict.fromkeys(partitions, ErrorCode.unknown_topic_or_partition))
                continue
            results: dict[int, ErrorCode] = {}
            for p, offset in partitions.items():
                if p < 0 or p >= topic.partitions:
                    results[p] = ErrorCode.unknown_topic_or_partition
                elif offset < 0:
                    results[p] = ErrorCode.invalid_request
                elif persister is None:
                    results[p] = ErrorCode.none
                else:
                    results[p] = await self._reinitialize(SharePartitionKey(group_id, topic.topic_id, p), offset)
            done = frozenset(p for p, e in results.items() if e is ErrorCode.none)
            if done:
                initialized[topic.topic_id] = InitTopic(name, done)
            out[name] = (topic.topic_id, results)
        if initialized:
            group.mark_initialized(initialized)
            error = await self.groups.persist(group_id)
            if error is not ErrorCode.none:
                return error, None, out
        return ErrorCode.none, None, out

    async def _reinitialize(self, key: SharePartitionKey, offset: int) -> ErrorCode:
        persister = self.groups.persister
        assert persister is not None
        try:
            summary = await persister.read_summary(key, -1)
            epoch = (summary.state_epoch if summary is not None else 0) + 1
            await persister.initialize_state(key, epoch, offset)
        except ShareStateError as exc:
            return exc.error_code
        return ErrorCode.none

    # --- delete ----------------------------------------------------------------------------------

    async def delete(
        self, group_id: str, names: Sequence[str]
    ) -> tuple[ErrorCode, str | None, dict[str, tuple[uuid.UUID | None, ErrorCode]]]:
        error, message, group = self._share_group(group_id)
        if group is None:
            return error, message, {}
        if group.members:
            return ErrorCode.non_empty_group, f"Group {group_id} is not empty.", {}
        persister = self.groups.persister
        out: dict[str, tuple[uuid.UUID | None, ErrorCode]] = {}
        gone: dict[uuid.UUID, frozenset[int]] = {}
        for name in names:
            topic = self.groups.topic(name)
            if topic is None:
                out[name] = (None, ErrorCode.unknown_topic_or_partition)
                continue
            known = group.initialized.get(topic.topic_id)
            partitions = sorted(known.partitions) if known is not None else []
            result = ErrorCode.none
            if persister is not None:
                outcomes = await asyncio.gather(
                    *(persister.delete_state(SharePartitionKey(group_id, topic.topic_id, p)) for p in partitions),
                    return_exceptions=True,
                )
                failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
                if isinstance(failed, ShareStateError):
                    result = failed.error_code
                elif failed is not None:
                    result = ErrorCode.unknown_server_error
            if result is ErrorCode.none:
                gone[topic.topic_id] = frozenset(partitions)
            out[name] = (topic.topic_id, result)
        if gone:
            for tid in gone:
                group.initialized.pop(tid, None)
                group.initializing.pop(tid, None)
            error = await self.groups.persist(group_id)
            if error is not ErrorCode.none:
                return error, None, out
        return ErrorCode.none, None, out
