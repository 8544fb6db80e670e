"""A share group's state (KIP-932) as ``__consumer_offsets`` records, and back: what the
coordinator writes after each change and what a new coordinator loads (record formats in
:mod:`.share_schemas`), as Kafka 4.2 keeps share groups:

- ``ShareGroupMetadata`` (group epoch; a hash of the subscribed topics' metadata);
- ``ShareGroupTargetAssignmentMetadata`` (assignment epoch);
- ``ShareGroupStatePartitionMetadata`` (initializing, initialized and deleting share-partitions),
  once the group has had any (then kept, even empty, until the group goes);
- per member: ``ShareGroupMemberMetadata`` (rack, client, subscription),
  ``ShareGroupTargetAssignmentMember`` (its target) and ``ShareGroupCurrentMemberAssignment``
  (member epoch, previous epoch, assigned partitions).

:func:`group_records` gives every record of a group as (key bytes -> value bytes); the coordinator
writes those whose bytes changed since its last write and tombstones for the keys that went (a
member that left; everything when the group is deleted). :func:`load_groups` rebuilds the groups
from the last value of every key. Partitions are kept by topic id in both, as on the wire.

After a load the members' sessions start again; initializing share-partitions count as started
at load time (retried after ``group.share.initialize.retry.interval.ms`` if nothing completes
them); a group whose subscribed topics' metadata differs from the hash it was written with gets a
new epoch at its next heartbeat.

Pure functions; event loop only (the groups they read are the coordinator's).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Mapping

from odradek.coordinator.group.schemas import SchemaError
from odradek.coordinator.group.share_assignor import ShareAssignment
from odradek.coordinator.group.share_group import InitTopic, ShareGroup, ShareGroupMember, ShareTopic
from odradek.coordinator.group.share_schemas import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareKey,
    ShareTopicInfo,
    ShareTopicPartitions,
    ShareTopicPartitionsInfo,
    ShareValue,
    decode_share_key,
    decode_share_value,
    encode_share_key,
    encode_share_value,
)

__all__ = ["TopicLookup", "group_records", "load_groups", "metadata_hash"]

log = logging.getLogger(__name__)

TopicLookup = Callable[[str], ShareTopic | None]
"""A topic's id and partition count now, by name (None: unknown)."""


def metadata_hash(topics: Mapping[str, ShareTopic]) -> int:
    """A signed 64-bit digest of the subscribed topics' names, ids and partition counts (odradek's
    own digest, kept where Kafka keeps its KIP-1101 hash)."""
    text = ";".join(f"{name}:{t.topic_id}:{t.partitions}" for name, t in sorted(topics.items()))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


def _partitions(assignment: Mapping[uuid.UUID, frozenset[int]]) -> tuple[ShareTopicPartitions, ...]:
    return tuple(ShareTopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def _assignment(topics: tuple[ShareTopicPartitions, ...]) -> ShareAssignment:
    return {t.topic_id: frozenset(t.partitions) for t in topics if t.partitions}


def _infos(topics: Mapping[uuid.UUID, InitTopic]) -> tuple[ShareTopicPartitionsInfo, ...]:
    return tuple(
        ShareTopicPartitionsInfo(tid, t.name, tuple(sorted(t.partitions))) for tid, t in sorted(topics.items())
    )


def _init_topics(infos: tuple[ShareTopicPartitionsInfo, ...], since_ms: int) -> dict[uuid.UUID, InitTopic]:
    return {i.topic_id: InitTopic(i.topic_name, frozenset(i.partitions), since_ms) for i in infos}


def group_records(group: ShareGroup) -> dict[bytes, bytes]:
    """Every record of ``group``'s state: key bytes -> value bytes."""
    gid = group.group_id
    epoch = ShareGroupMetadataValue(group.group_epoch, metadata_hash(group.subscribed_topics))
    values: list[tuple[ShareKey, ShareValue]] = [
        (ShareGroupMetadataKey(gid), epoch),
        (ShareGroupTargetAssignmentMetadataKey(gid), ShareGroupTargetAssignmentMetadataValue(group.assignment_epoch)),
    ]
    if group.has_state_metadata:
        deleting = tuple(ShareTopicInfo(tid, name) for tid, name in sorted(group.deleting.items()))
        values.append(
            (
                ShareGroupStatePartitionMetadataKey(gid),
                ShareGroupStatePartitionMetadataValue(_infos(group.initializing), _infos(group.initialized), deleting),
            )
        )
    for mid, m in group.members.items():
        values += [
            (
                ShareGroupMemberMetadataKey(gid, mid),
                ShareGroupMemberMetadataValue(m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names),
            ),
            (
                ShareGroupTargetAssignmentMemberKey(gid, mid),
                ShareGroupTargetAssignmentMemberValue(_partitions(group.target.get(mid, {}))),
            ),
            (
                ShareGroupCurrentMemberAssignmentKey(gid, mid),
                ShareGroupCurrentMemberAssignmentValue(
                    m.member_epoch, m.previous_member_epoch, 0, _partitions(m.assigned)
                ),
            ),
        ]
    return {encode_share_key(k): encode_share_value(v) for k, v in values}


def load_groups(
    raw: Mapping[bytes, bytes | None], topic: TopicLookup, now_ms: int
) -> dict[str, tuple[ShareGroup, dict[bytes, bytes]]]:
    """The groups a partition's share records describe, each with the records it was loaded from
    (what the coordinator last wrote). ``raw``: the last value of each key (None: tombstone);
    ``topic``: the metadata now. Unreadable records are logged and skipped; a member without its
    metadata record is left out."""
    groups: dict[str, ShareGroup] = {}
    written: dict[str, dict[bytes, bytes]] = {}
    hashes: dict[str, int] = {}
    pending: list[tuple[ShareKey, ShareValue]] = []
    for key_bytes, value_bytes in raw.items():
        if value_bytes is None:
            continue
        try:
            key = decode_share_key(key_bytes)
            value = decode_share_value(key, value_bytes)
        except SchemaError as exc:
            log.warning("skipping an unreadable share group record of __consumer_offsets: %s", exc)
            continue
        group = groups.get(key.group_id)
        if group is None:
            group = groups[key.group_id] = ShareGroup(key.group_id)
            written[key.group_id] = {}
        written[key.group_id][key_bytes] = value_bytes
        if isinstance(key, ShareGroupMemberMetadataKey) and isinstance(value, ShareGroupMemberMetadataValue):
            member = group.members.setdefault(key.member_id, ShareGroupMember(key.member_id))
            member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
            member.subscribed_topic_names = tuple(sorted(set(value.subscribed_topic_names)))
        else:
            pending.append((key, value))
    for key, value in pending:  # the member-level records once every member is known
        group = groups[key.group_id]
        if isinstance(value, ShareGroupMetadataValue):
            group.group_epoch = value.epoch
            hashes[key.group_id] = value.metadata_hash
        elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(value, ShareGroupStatePartitionMetadataValue):
            group.initializing = _init_topics(value.initializing_topics, now_ms)
            group.initialized = _init_topics(value.initialized_topics, -1)
            group.deleting = {t.topic_id: t.topic_name for t in value.deleting_topics}
            group.has_state_metadata = True
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey) and isinstance(
            value, ShareGroupTargetAssignmentMemberValue
        ):
            group.target[key.member_id] = _assignment(value.topic_partitions)
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey) and isinstance(
            value, ShareGroupCurrentMemberAssignmentValue
        ):
            current = group.members.get(key.member_id)
            if current is not None:
                current.member_epoch = value.member_epoch
                current.previous_member_epoch = value.previous_member_epoch
                current.assigned = _assignment(value.assigned_partitions)
    for group in groups.values():
        for mid in [m for m in group.target if m not in group.members]:
            del group.target[mid]
        now = {name: info for name in sorted(group.subscribed_topic_names()) if (info := topic(name)) is not None}
        # the topics moved while nobody coordinated the group: the next heartbeat bumps its epoch
        group.subscribed_topics = now if hashes.get(group.group_id) == metadata_hash(now) else {}
    return {gid: (group, written[gid]) for gid, group in groups.items()}
