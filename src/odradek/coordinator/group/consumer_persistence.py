"""A consumer group's state (KIP-848) as ``__consumer_offsets`` records, and back: what the
coordinator writes after each change and what a new coordinator loads.

A group is written as Kafka 4.x's group coordinator writes it (record formats in
:mod:`.consumer_schemas`):

- ``ConsumerGroupMetadata`` (group epoch, and a hash of the subscribed topics' partition counts);
- ``ConsumerGroupTargetAssignmentMetadata`` (assignment epoch);
- per member: ``ConsumerGroupMemberMetadata`` (subscription, client, timeouts, assignor; for a
  member of the classic protocol also its ``ClassicMemberMetadata``: session timeout and
  supported protocols),
  ``ConsumerGroupTargetAssignmentMember`` (its target) and
  ``ConsumerGroupCurrentMemberAssignment`` (member epoch, previous epoch, state, assigned and
  pending-revocation partitions);
- per regular expression a member subscribes with: ``ConsumerGroupRegularExpression`` (the
  topic names it resolved to, the group epoch and the time it last changed); tombstoned once no
  member uses it.

:func:`group_records` gives every record of a group as (key bytes -> value bytes); the
coordinator writes those whose bytes changed since its last write and tombstones (null values)
for the keys that went (a member that left), so a group costs one small batch per change and the
topic's compaction keeps one record per key. :func:`load_groups` rebuilds the groups from the
last value of every key read from a partition. Partitions travel by topic id: a topic the
metadata does not know (deleted, or not known yet) is left out of what is written and loaded.

After a load the members' timers start again (a member gone meanwhile expires after its session
timeout); a group whose subscribed topics' partition counts differ from the hash it was written
with gets a new epoch at its next heartbeat. The regexes keep their resolved topics until a member
using one heartbeats again (it is then resolved again, with that member's principal).

Pure functions; event loop only (the groups they read are the coordinator's).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Mapping

from odradek.coordinator.group.consumer_group import Assignment, ConsumerGroup, ConsumerGroupMember, MemberState
from odradek.coordinator.group.consumer_schemas import (
    MEMBER_STATE_STABLE,
    MEMBER_STATE_UNRELEASED_PARTITIONS,
    MEMBER_STATE_UNREVOKED_PARTITIONS,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerKey,
    ConsumerValue,
    TopicPartitions,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from odradek.coordinator.group.schemas import SchemaError

__all__ = ["group_records", "load_groups", "metadata_hash"]

log = logging.getLogger(__name__)

TopicId = Callable[[str], uuid.UUID | None]
TopicName = Callable[[uuid.UUID], str | None]

_STATES = {
    MemberState.STABLE: MEMBER_STATE_STABLE,
    MemberState.UNREVOKED_PARTITIONS: MEMBER_STATE_UNREVOKED_PARTITIONS,
    MemberState.UNRELEASED_PARTITIONS: MEMBER_STATE_UNRELEASED_PARTITIONS,
}
_FROM_STATES = {code: state for state, code in _STATES.items()}


def metadata_hash(topics: Mapping[str, int]) -> int:
    """A signed 64-bit digest of the subscribed topics and their partition counts (the group's
    record keeps it, as Kafka's KIP-1101 hash, to tell whether the metadata moved while nobody
    coordinated the group; the digest is odradek's own)."""
    text = ";".join(f"{name}:{count}" for name, count in sorted(topics.items()))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


def _partitions(assignment: Assignment, topic_id: TopicId) -> tuple[TopicPartitions, ...]:
    out = []
    for name, partitions in sorted(assignment.items()):
        tid = topic_id(name)
        if tid is not None and partitions:
            out.append(TopicPartitions(tid, tuple(sorted(partitions))))
    return tuple(out)


def _assignment(topics: tuple[TopicPartitions, ...], topic_name: TopicName) -> Assignment:
    out: Assignment = {}
    for t in topics:
        name = topic_name(t.topic_id)
        if name is not None and t.partitions:
            out[name] = frozenset(t.partitions)
    return out


def group_records(group: ConsumerGroup, topic_id: TopicId) -> dict[bytes, bytes]:
    """Every record of ``group``'s state: key bytes -> value bytes."""
    gid = group.group_id
    records = {
        encode_consumer_key(ConsumerGroupMetadataKey(gid)): encode_consumer_value(
            ConsumerGroupMetadataValue(group.group_epoch, metadata_hash(group.subscribed_topics))
        ),
        encode_consumer_key(ConsumerGroupTargetAssignmentMetadataKey(gid)): encode_consumer_value(
            ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch)
        ),
    }
    for mid, m in group.members.items():
        records[encode_consumer_key(ConsumerGroupMemberMetadataKey(gid, mid))] = encode_consumer_value(
            ConsumerGroupMemberMetadataValue(
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                server_assignor=m.server_assignor,
                classic_member_metadata=m.classic,
            )
        )
        records[encode_consumer_key(ConsumerGroupTargetAssignmentMemberKey(gid, mid))] = encode_consumer_value(
            ConsumerGroupTargetAssignmentMemberValue(_partitions(group.target.get(mid, {}), topic_id))
        )
        records[encode_consumer_key(ConsumerGroupCurrentMemberAssignmentKey(gid, mid))] = encode_consumer_value(
            ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=m.member_epoch,
                previous_member_epoch=m.previous_member_epoch,
                state=_STATES[m.state],
                assigned_partitions=_partitions(m.assigned, topic_id),
                partitions_pending_revocation=_partitions(m.pending_revocation, topic_id),
            )
        )
    in_use = {m.subscribed_topic_regex for m in group.members.values()}
    for regex, topics in sorted(group.resolved_regexes.items()):
        if regex in in_use:
            version, timestamp = group.regex_versions.get(regex, (group.group_epoch, 0))
            records[encode_consumer_key(ConsumerGroupRegularExpressionKey(gid, regex))] = encode_consumer_value(
                ConsumerGroupRegularExpressionValue(tuple(sorted(topics)), version, timestamp)
            )
    return records


def load_groups(
    raw: Mapping[bytes, bytes | None], topic_name: TopicName, topics: Callable[[str], int | None], default: str
) -> dict[str, tuple[ConsumerGroup, dict[bytes, bytes]]]:
    """The groups a partition's records describe, each with the records it was loaded from (what
    the coordinator last wrote). ``raw``: the last value of each key (None: a tombstone);
    ``topics``: a topic's partition count now; ``default``: the default assignor. Unreadable
    records are logged and skipped; a member without its metadata record is left out."""
    groups: dict[str, ConsumerGroup] = {}
    written: dict[str, dict[bytes, bytes]] = {}
    members: dict[tuple[str, str], ConsumerGroupMember] = {}
    hashes: dict[str, int] = {}
    pending: list[tuple[ConsumerKey, ConsumerValue]] = []
    for key_bytes, value_bytes in raw.items():
        if value_bytes is None:
            continue
        try:
            key = decode_consumer_key(key_bytes)
            value = decode_consumer_value(key, value_bytes)
        except SchemaError as exc:
            log.warning("skipping an unreadable consumer group record of __consumer_offsets: %s", exc)
            continue
        group = groups.get(key.group_id)
        if group is None:
            group = groups[key.group_id] = ConsumerGroup(key.group_id, default)
            written[key.group_id] = {}
        written[key.group_id][key_bytes] = value_bytes
        if isinstance(key, ConsumerGroupMemberMetadataKey) and isinstance(value, ConsumerGroupMemberMetadataValue):
            member = members.setdefault((key.group_id, key.member_id), ConsumerGroupMember(key.member_id))
            member.instance_id, member.rack_id = value.instance_id, value.rack_id
            member.client_id, member.client_host = value.client_id, value.client_host
            member.subscribed_topic_names = tuple(value.subscribed_topic_names)
            member.subscribed_topic_regex = value.subscribed_topic_regex
            member.server_assignor = value.server_assignor
            member.classic = value.classic_member_metadata
            if value.rebalance_timeout_ms > 0:
                member.rebalance_timeout_ms = value.rebalance_timeout_ms
            group.members[key.member_id] = member
        else:
            pending.append((key, value))
    for key, value in pending:  # the member-level records once every member is known
        if isinstance(key, ConsumerGroupMetadataKey) and isinstance(value, ConsumerGroupMetadataValue):
            groups[key.group_id].group_epoch = value.epoch
            hashes[key.group_id] = value.metadata_hash
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey) and isinstance(
            value, ConsumerGroupTargetAssignmentMetadataValue
        ):
            groups[key.group_id].assignment_epoch = value.assignment_epoch
        elif isinstance(key, ConsumerGroupRegularExpressionKey) and isinstance(
            value, ConsumerGroupRegularExpressionValue
        ):
            groups[key.group_id].resolved_regexes[key.regular_expression] = frozenset(value.topics)
            groups[key.group_id].regex_versions[key.regular_expression] = (value.version, value.timestamp)
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey) and isinstance(
            value, ConsumerGroupTargetAssignmentMemberValue
        ):
            groups[key.group_id].target[key.member_id] = _assignment(value.topic_partitions, topic_name)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey) and isinstance(
            value, ConsumerGroupCurrentMemberAssignmentValue
        ):
            current = members.get((key.group_id, key.member_id))
            if current is not None:
                member = current
                member.member_epoch = value.member_epoch
                member.previous_member_epoch = value.previous_member_epoch
                member.state = _FROM_STATES.get(value.state, MemberState.STABLE)
                member.assigned = _assignment(value.assigned_partitions, topic_name)
                member.pending_revocation = _assignment(value.partitions_pending_revocation, topic_name)
    for group in groups.values():
        for mid in [m for m in group.target if m not in group.members]:
            del group.target[mid]
        in_use = {m.subscribed_topic_regex for m in group.members.values()}
        for regex in [r for r in group.resolved_regexes if r not in in_use]:
            del group.resolved_regexes[regex]
        counts = {t: n for t in group.subscribed_topic_names() if (n := topics(t)) is not None}
        # the topics moved while nobody coordinated the group: the next heartbeat bumps its epoch
        group.subscribed_topics = counts if hashes.get(group.group_id) == metadata_hash(counts) else {}
    return {gid: (group, written[gid]) for gid, group in groups.items()}
