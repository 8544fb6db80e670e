"""Kafka's ``__consumer_offsets`` records of share groups (KIP-932), byte for byte (Kafka 4.2).

Framing as for the consumer-protocol records (:mod:`.consumer_schemas`): a key is an int16 *record
type* then non-flexible fields (a string: int16 length then UTF-8); a value an int16 *value
version* (0 for every type here; version 0 is flexible) then compact fields (a string: unsigned
varint ``length + 1`` then UTF-8, ``0`` = null where nullable; an array: unsigned varint
``count + 1`` then the elements; a uuid: 16 bytes), each struct ending with a tagged-field
buffer (none are defined here: written empty, unknown tags skipped on read). A null value is a
tombstone and is not decoded here.

Record types and layouts:

- 10 ``ShareGroupMemberMetadata``: key group_id, member_id. Value: rack_id nullable string,
  client_id string, client_host string, subscribed_topic_names [string].
- 11 ``ShareGroupMetadata``: key group_id. Value: epoch int32, metadata_hash int64 (a hash of
  the subscribed topics' metadata; a plain field here, not tagged as in the consumer record).
- 12 ``ShareGroupTargetAssignmentMetadata``: key group_id. Value: assignment_epoch int32.
- 13 ``ShareGroupTargetAssignmentMember``: key group_id, member_id. Value: topic_partitions
  [topic_id uuid, partitions [int32], tags].
- 14 ``ShareGroupCurrentMemberAssignment``: key group_id, member_id. Value: member_epoch int32,
  previous_member_epoch int32, state int8 (always 0, stable: share members do not reconcile),
  assigned_partitions [topic_id uuid, partitions [int32], tags].
- 15 ``ShareGroupStatePartitionMetadata``: key group_id. Value: initializing_topics and
  initialized_topics, each [topic_id uuid, topic_name string, partitions [int32], tags], then
  deleting_topics [topic_id uuid, topic_name string, tags]: which share-partitions of the group
  have their state being created, created, or being deleted by the share coordinator.

Decoders raise :class:`SchemaError` for malformed bytes (truncation, a length past the end, a
null where not allowed, an unknown record type or version, bytes left over); encoders for values
the schema cannot carry. Pure functions: safe from any thread.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

from odradek.coordinator.group.consumer_schemas import CompactReader, CompactWriter
from odradek.coordinator.group.schemas import SchemaError

__all__ = [
    "SHARE_RECORD_TYPES",
    "SHARE_VALUE_VERSION",
    "ShareGroupCurrentMemberAssignmentKey",
    "ShareGroupCurrentMemberAssignmentValue",
    "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue",
    "ShareGroupMetadataKey",
    "ShareGroupMetadataValue",
    "ShareGroupStatePartitionMetadataKey",
    "ShareGroupStatePartitionMetadataValue",
    "ShareGroupTargetAssignmentMemberKey",
    "ShareGroupTargetAssignmentMemberValue",
    "ShareGroupTargetAssignmentMetadataKey",
    "ShareGroupTargetAssignmentMetadataValue",
    "ShareKey",
    "ShareTopicInfo",
    "ShareTopicPartitions",
    "ShareTopicPartitionsInfo",
    "ShareValue",
    "decode_share_key",
    "decode_share_value",
    "encode_share_key",
    "encode_share_value",
]

SHARE_RECORD_TYPES = frozenset(range(10, 16))
SHARE_VALUE_VERSION = 0


# --- keys -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    RECORD_TYPE: ClassVar[int] = 10
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = 11
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    RECORD_TYPE: ClassVar[int] = 12
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    RECORD_TYPE: ClassVar[int] = 13
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    RECORD_TYPE: ClassVar[int] = 14
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    RECORD_TYPE: ClassVar[int] = 15
    group_id: str


ShareKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)

_MEMBER_KEYS = (ShareGroupMemberMetadataKey, ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey)
_GROUP_KEYS = (ShareGroupMetadataKey, ShareGroupTargetAssignmentMetadataKey, ShareGroupStatePartitionMetadataKey)
_MEMBER_KEY_TYPES = {cls.RECORD_TYPE: cls for cls in _MEMBER_KEYS}
_GROUP_KEY_TYPES = {cls.RECORD_TYPE: cls for cls in _GROUP_KEYS}


def encode_share_key(key: ShareKey) -> bytes:
    """int16 record type, group_id string, then member_id string for the per-member types."""
    w = CompactWriter().i16(key.RECORD_TYPE).string(key.group_id)
    if isinstance(key, _MEMBER_KEYS):
        w.string(key.member_id)
    return bytes(w.out)


def decode_share_key(data: bytes | memoryview) -> ShareKey:
    """The key of one of the six record types; SchemaError for any other record type."""
    r = CompactReader(data, "share group record key")
    record_type = r.i16()
    key: ShareKey
    if record_type in _GROUP_KEY_TYPES:
        key = _GROUP_KEY_TYPES[record_type](r.key_string())
    elif record_type in _MEMBER_KEY_TYPES:
        key = _MEMBER_KEY_TYPES[record_type](r.key_string(), r.key_string())
    else:
        raise SchemaError(f"unknown share group record type {record_type}")
    r.end()
    return key


# --- values -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareTopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareTopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareTopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[ShareTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int = 0
    assigned_partitions: tuple[ShareTopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[ShareTopicPartitionsInfo, ...] = ()
    initialized_topics: tuple[ShareTopicPartitionsInfo, ...] = ()
    deleting_topics: tuple[ShareTopicInfo, ...] = ()


ShareValue = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)


def _write_partitions(w: CompactWriter, topics: tuple[ShareTopicPartitions, ...]) -> None:
    w.uvarint(len(topics) + 1)
    for t in topics:
        w.uuid(t.topic_id).compact_i32s(t.partitions).tags([])


def _read_partitions(r: CompactReader) -> tuple[ShareTopicPartitions, ...]:
    out = []
    for _ in range(r.count(18)):  # uuid + empty array + empty tags
        topic_id = r.uuid()
        partitions = r.compact_i32s()
        r.tags()
        out.append(ShareTopicPartitions(topic_id, partitions))
    return tuple(out)


def _write_infos(w: CompactWriter, topics: tuple[ShareTopicPartitionsInfo, ...]) -> None:
    w.uvarint(len(topics) + 1)
    for t in topics:
        w.uuid(t.topic_id).compact_string(t.topic_name).compact_i32s(t.partitions).tags([])


def _read_infos(r: CompactReader) -> tuple[ShareTopicPartitionsInfo, ...]:
    out = []
    for _ in range(r.count(19)):  # uuid + empty string + empty array + empty tags
        topic_id = r.uuid()
        name = r.compact_string()
        partitions = r.compact_i32s()
        r.tags()
        out.append(ShareTopicPartitionsInfo(topic_id, name, partitions))
    return tuple(out)


def encode_share_value(value: ShareValue) -> bytes:
    """int16 value version (0), then the fields of the module docstring and an empty tag buffer."""
    w = CompactWriter().i16(SHARE_VALUE_VERSION)
    if isinstance(value, ShareGroupMemberMetadataValue):
        w.compact_string(value.rack_id).compact_string(value.client_id).compact_string(value.client_host)
        w.uvarint(len(value.subscribed_topic_names) + 1)
        for topic in value.subscribed_topic_names:
            w.compact_string(topic)
    elif isinstance(value, ShareGroupMetadataValue):
        w.i32(value.epoch).i64(value.metadata_hash)
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        w.i32(value.assignment_epoch)
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        _write_partitions(w, value.topic_partitions)
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        w.i32(value.member_epoch).i32(value.previous_member_epoch).i8(value.state)
        _write_partitions(w, value.assigned_partitions)
    else:
        _write_infos(w, value.initializing_topics)
        _write_infos(w, value.initialized_topics)
        w.uvarint(len(value.deleting_topics) + 1)
        for t in value.deleting_topics:
            w.uuid(t.topic_id).compact_string(t.topic_name).tags([])
    return bytes(w.tags([]).out)


def decode_share_value(key: ShareKey, data: bytes | memoryview) -> ShareValue:
    """The (non-tombstone) value of the record whose key is ``key``; version 0 only."""
    r = CompactReader(data, f"{type(key).__name__.removesuffix('Key')}Value")
    version = r.i16()
    if version != SHARE_VALUE_VERSION:
        raise r.fail(f"unknown value version {version}")
    value: ShareValue
    if isinstance(key, ShareGroupMemberMetadataKey):
        rack_id = r.nullable_compact_string()
        client_id = r.compact_string()
        client_host = r.compact_string()
        topics = tuple(r.compact_string() for _ in range(r.count(1)))
        value = ShareGroupMemberMetadataValue(rack_id, client_id, client_host, topics)
    elif isinstance(key, ShareGroupMetadataKey):
        epoch = r.i32()
        value = ShareGroupMetadataValue(epoch, r.i64())
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        value = ShareGroupTargetAssignmentMetadataValue(r.i32())
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        value = ShareGroupTargetAssignmentMemberValue(_read_partitions(r))
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        member_epoch = r.i32()
        previous_epoch = r.i32()
        state = r.i8()
        value = ShareGroupCurrentMemberAssignmentValue(member_epoch, previous_epoch, state, _read_partitions(r))
    else:
        initializing = _read_infos(r)
        initialized = _read_infos(r)
        deleting = []
        for _ in range(r.count(18)):  # uuid + empty string + empty tags
            topic_id = r.uuid()
            name = r.compact_string()
            r.tags()
            deleting.append(ShareTopicInfo(topic_id, name))
        value = ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(deleting))
    r.tags()
    r.end()
    return value
