"""Kafka's ``__consumer_offsets`` records of consumer groups (KIP-848 protocol), byte for byte.

A record's key is an int16 *record type* then the key fields; its value an int16 *value version*
(0 for every type here) then the value fields. A null value is a tombstone and is not decoded here.

Keys are not flexible: a string is an int16 length then UTF-8 bytes (never null here).

Values are flexible (version 0 is flexible): a string is an unsigned varint ``length + 1`` then
UTF-8 bytes (``0`` = null, where nullable); bytes the same; an array an unsigned varint
``count + 1`` then the elements (``0`` = null); a uuid 16 bytes (most significant half first);
int8/int16/int32/int64 big-endian. Every struct (the value and each nested struct) ends with a
tagged-field buffer: an unsigned varint count, then per field an unsigned varint tag, an
unsigned varint size and ``size`` bytes. A tagged field is written only when it differs from its
default, in ascending tag order; a field left at its default costs nothing, so a writer that does
not know it produces the same bytes. Tags this module does not know are skipped on read.

Record types (key int16 prefix) and their layouts:

- 3 ``ConsumerGroupMetadata``: key group_id string. Value v0: epoch int32; tagged
  0 metadata_hash int64 (default 0; hash of the subscribed topics' metadata, KIP-1101),
  1 creation_time_ms int64 (default -1, KIP-1282).
- 5 ``ConsumerGroupMemberMetadata``: key group_id string, member_id string. Value v0:
  instance_id nullable string, rack_id nullable string, client_id string, client_host string,
  subscribed_topic_names [string], subscribed_topic_regex nullable string,
  rebalance_timeout_ms int32 (default -1), server_assignor nullable string; tagged
  0 classic_member_metadata nullable struct (default null) written as size, int8 1 (present; a
  negative marker is null), then session_timeout_ms int32, supported_protocols [name string,
  metadata bytes, tags], tags.
- 6 ``ConsumerGroupTargetAssignmentMetadata``: key group_id string. Value v0:
  assignment_epoch int32; tagged 0 assignment_timestamp_ms int64 (default 0, KIP-1263).
- 7 ``ConsumerGroupTargetAssignmentMember``: key group_id string, member_id string. Value v0:
  topic_partitions [topic_id uuid, partitions [int32], tags].
- 8 ``ConsumerGroupCurrentMemberAssignment``: key group_id string, member_id string. Value v0:
  member_epoch int32, previous_member_epoch int32, state int8 (``MEMBER_STATE_*``),
  assigned_partitions and partitions_pending_revocation, each [topic_id uuid,
  partitions [int32], tagged 0 assignment_epochs nullable [int32] (default null; aligned with
  partitions, KIP-1251), tags].

- 16 ``ConsumerGroupRegularExpression``: key group_id string, regular_expression string. Value
  v0: topics [string] (the topic names it resolved to), version int64, timestamp int64 (when it
  was resolved, ms).

(Type 4 was an earlier partition-metadata record; it is not decoded here.)

Decoders reject malformed bytes (truncation, a length past the end, a null where the schema does
not allow one, an unknown record type or value version, a tagged field whose size disagrees with
its contents, bytes left over) with :class:`SchemaError`. Encoders raise :class:`SchemaError` for
values the schema cannot carry (an int out of range, a string longer than an int16 length in a
key, epochs not aligned with partitions). Pure functions: safe from any thread.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import ClassVar

from odradek.coordinator.group.schemas import BinaryReader, BinaryWriter, SchemaError

__all__ = [
    "CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE",
    "CONSUMER_GROUP_MEMBER_METADATA_TYPE",
    "CONSUMER_GROUP_METADATA_TYPE",
    "CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE",
    "CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE",
    "CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE",
    "CONSUMER_RECORD_TYPES",
    "CONSUMER_VALUE_VERSION",
    "MEMBER_STATE_STABLE",
    "MEMBER_STATE_UNKNOWN",
    "MEMBER_STATE_UNRELEASED_PARTITIONS",
    "MEMBER_STATE_UNREVOKED_PARTITIONS",
    "ClassicMemberMetadata",
    "ClassicProtocol",
    "CompactReader",
    "CompactWriter",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerKey",
    "ConsumerValue",
    "SchemaError",
    "TopicPartitions",
    "decode_consumer_key",
    "decode_consumer_value",
    "encode_consumer_key",
    "encode_consumer_value",
]

CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_GROUP_MEMBER_METADATA_TYPE = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE = 8
CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE = 16

CONSUMER_RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
"""Key versions of consumer-group records (4: partition metadata, before KIP-1101)."""

CONSUMER_VALUE_VERSION = 0

MEMBER_STATE_STABLE = 0
MEMBER_STATE_UNREVOKED_PARTITIONS = 1
MEMBER_STATE_UNRELEASED_PARTITIONS = 2
MEMBER_STATE_UNKNOWN = 127

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_VARINT = 0xFFFFFFFF
_MAX_LENGTH = 0x7FFFFFFF


# --- primitive writer / reader --------------------------------------------------------------------


class CompactWriter(BinaryWriter):
    """Range-checked integers (SchemaError, not struct.error), varints, uuids, compact fields
    (the flexible values' encoding; :mod:`.share_schemas` writes with it too)."""

    def _pack(self, fmt: struct.Struct, v: int) -> CompactWriter:
        try:
            self.out += fmt.pack(v)
        except struct.error as exc:
            raise SchemaError(f"{v} does not fit {fmt.format!r}") from exc
        return self

    def i8(self, v: int) -> CompactWriter:
        return self._pack(_I8, v)

    def i16(self, v: int) -> CompactWriter:
        return self._pack(_I16, v)

    def i32(self, v: int) -> CompactWriter:
        return self._pack(_I32, v)

    def i64(self, v: int) -> CompactWriter:
        return self._pack(_I64, v)

    def uvarint(self, v: int) -> CompactWriter:
        if v < 0 or v > _MAX_VARINT:
            raise SchemaError(f"{v} does not fit an unsigned varint")
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)
        return self

    def uuid(self, v: uuid.UUID) -> CompactWriter:
        self.out += v.bytes
        return self

    def compact_bytes(self, v: bytes | None) -> CompactWriter:
        if v is None:
            return self.uvarint(0)
        self.uvarint(len(v) + 1)
        self.out += v
        return self

    def compact_string(self, v: str | None) -> CompactWriter:
        return self.compact_bytes(None if v is None else v.encode("utf-8"))

    def compact_i32s(self, values: tuple[int, ...]) -> CompactWriter:
        self.uvarint(len(values) + 1)
        for v in values:
            self.i32(v)
        return self

    def tags(self, fields: list[tuple[int, bytes]]) -> CompactWriter:
        """The tagged-field buffer of ``(tag, data)`` pairs, already in ascending tag order."""
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag).uvarint(len(data))
            self.out += data
        return self


class CompactReader(BinaryReader):
    """The reads matching :class:`CompactWriter`, each checked against the bytes left."""

    def i8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value > _MAX_VARINT:
                    raise self.fail("unsigned varint larger than 32 bits")
                return value
        raise self.fail("unsigned varint longer than 5 bytes")

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    def _utf8(self, raw: memoryview) -> str:
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail("string is not UTF-8") from exc

    def key_string(self) -> str:
        n = self.i16()
        if n < 0:
            raise self.fail(f"string length {n} where a string is required")
        return self._utf8(self.take(n))

    def _compact_length(self) -> int | None:  # None: the null marker
        n = self.uvarint()
        if n == 0:
            return None
        if n - 1 > _MAX_LENGTH:
            raise self.fail(f"length {n - 1} out of range")
        return n - 1

    def nullable_compact_bytes(self) -> bytes | None:
        n = self._compact_length()
        return None if n is None else bytes(self.take(n))

    def compact_bytes(self) -> bytes:
        value = self.nullable_compact_bytes()
        if value is None:
            raise self.fail("null where bytes are required")
        return value

    def nullable_compact_string(self) -> str | None:
        n = self._compact_length()
        return None if n is None else self._utf8(self.take(n))

    def compact_string(self) -> str:
        value = self.nullable_compact_string()
        if value is None:
            raise self.fail("null where a string is required")
        return value

    def nullable_count(self, min_element_size: int) -> int | None:
        """An array's element count, ``None`` for null; checked against the bytes left."""
        n = self._compact_length()
        if n is not None and n * min_element_size > self.remaining():
            raise self.fail(f"array of {n} elements runs past the end")
        return n

    def count(self, min_element_size: int) -> int:
        n = self.nullable_count(min_element_size)
        if n is None:
            raise self.fail("null where an array is required")
        return n

    def nullable_compact_i32s(self) -> tuple[int, ...] | None:
        n = self.nullable_count(4)
        return None if n is None else tuple(self.i32() for _ in range(n))

    def compact_i32s(self) -> tuple[int, ...]:
        return tuple(self.i32() for _ in range(self.count(4)))

    def tags(self) -> dict[int, CompactReader]:
        """The tagged-field buffer: tag -> a reader over that field's bytes (unknown ones unused)."""
        fields: dict[int, CompactReader] = {}
        n = self.uvarint()
        if n * 2 > self.remaining():
            raise self.fail(f"{n} tagged fields run past the end")
        for _ in range(n):
            tag = self.uvarint()
            size = self.uvarint()
            if tag in fields:
                raise self.fail(f"tagged field {tag} appears twice")
            fields[tag] = CompactReader(self.take(size), f"{self.what} tag {tag}")
        return fields

    def end(self) -> None:
        if self.remaining():
            raise self.fail(f"{self.remaining()} bytes left over")


def _tag_i64(fields: dict[int, CompactReader], tag: int, default: int) -> int:
    field = fields.get(tag)
    if field is None:
        return default
    value = field.i64()
    field.end()
    return value


# --- keys -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    RECORD_TYPE: ClassVar[int] = CONSUMER_GROUP_METADATA_TYPE
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    RECORD_TYPE: ClassVar[int] = CONSUMER_GROUP_MEMBER_METADATA_TYPE
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    RECORD_TYPE: ClassVar[int] = CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    RECORD_TYPE: ClassVar[int] = CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    RECORD_TYPE: ClassVar[int] = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    RECORD_TYPE: ClassVar[int] = CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE
    group_id: str
    regular_expression: str


ConsumerKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)

_GROUP_KEYS = (ConsumerGroupMetadataKey, ConsumerGroupTargetAssignmentMetadataKey)
_MEMBER_KEYS = (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)


_GROUP_KEY_TYPES = {cls.RECORD_TYPE: cls for cls in _GROUP_KEYS}
_MEMBER_KEY_TYPES = {cls.RECORD_TYPE: cls for cls in _MEMBER_KEYS}


def encode_consumer_key(key: ConsumerKey) -> bytes:
    """int16 record type, group_id string, then member_id string for the per-member types."""
    w = CompactWriter().i16(key.RECORD_TYPE).string(key.group_id)
    if isinstance(key, _MEMBER_KEYS):
        w.string(key.member_id)
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        w.string(key.regular_expression)
    return bytes(w.out)


def decode_consumer_key(data: bytes | memoryview) -> ConsumerKey:
    """The key of one of the six record types; SchemaError for any other record type (the
    classic types 0..2 are :func:`odradek.coordinator.group.schemas.decode_key`'s)."""
    r = CompactReader(data, "consumer group record key")
    record_type = r.i16()
    key: ConsumerKey
    if record_type in _GROUP_KEY_TYPES:
        key = _GROUP_KEY_TYPES[record_type](r.key_string())
    elif record_type in _MEMBER_KEY_TYPES:
        key = _MEMBER_KEY_TYPES[record_type](r.key_string(), r.key_string())
    elif record_type == CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE:
        key = ConsumerGroupRegularExpressionKey(r.key_string(), r.key_string())
    else:
        raise SchemaError(f"unknown consumer group record type {record_type}")
    r.end()
    return key


# --- values -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Set for a member that joined with the classic protocol (JoinGroup) into a consumer group."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """A topic's partitions. ``assignment_epochs`` (current assignments only) is None or one epoch
    per partition, in the same order; target assignments must leave it None."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int = MEMBER_STATE_STABLE
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...] = ()
    version: int = 0
    timestamp: int = 0


ConsumerValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)


def _i64_tag(tag: int, value: int, default: int) -> list[tuple[int, bytes]]:
    return [] if value == default else [(tag, bytes(CompactWriter().i64(value).out))]


def _write_topic_partitions(w: CompactWriter, topics: tuple[TopicPartitions, ...], with_epochs: bool) -> None:
    w.uvarint(len(topics) + 1)
    for tp in topics:
        w.uuid(tp.topic_id).compact_i32s(tp.partitions)
        epochs = tp.assignment_epochs
        if epochs is None:
            w.tags([])
            continue
        if not with_epochs:
            raise SchemaError("a target assignment carries no assignment epochs")
        if len(epochs) != len(tp.partitions):
            raise SchemaError(f"{len(epochs)} assignment epochs for {len(tp.partitions)} partitions")
        w.tags([(0, bytes(CompactWriter().compact_i32s(epochs).out))])


def _read_topic_partitions(r: CompactReader, with_epochs: bool) -> tuple[TopicPartitions, ...]:
    topics = []
    for _ in range(r.count(18)):  # uuid + empty array + empty tags
        topic_id = r.uuid()
        partitions = r.compact_i32s()
        epochs = None
        tags = r.tags()
        field = tags.get(0) if with_epochs else None
        if field is not None:
            epochs = field.nullable_compact_i32s()
            field.end()
            if epochs is not None and len(epochs) != len(partitions):
                raise r.fail(f"{len(epochs)} assignment epochs for {len(partitions)} partitions")
        topics.append(TopicPartitions(topic_id, partitions, epochs))
    return tuple(topics)


def _write_classic(meta: ClassicMemberMetadata) -> bytes:
    w = CompactWriter().i8(1).i32(meta.session_timeout_ms)  # presence marker of a nullable struct
    w.uvarint(len(meta.supported_protocols) + 1)
    for protocol in meta.supported_protocols:
        w.compact_string(protocol.name).compact_bytes(protocol.metadata).tags([])
    return bytes(w.tags([]).out)


def _read_classic(r: CompactReader) -> ClassicMemberMetadata | None:
    if r.i8() < 0:  # a null struct
        r.end()
        return None
    session_timeout = r.i32()
    protocols = []
    for _ in range(r.count(3)):
        name = r.compact_string()
        metadata = r.compact_bytes()
        r.tags()
        protocols.append(ClassicProtocol(name, metadata))
    r.tags()
    r.end()
    return ClassicMemberMetadata(session_timeout, tuple(protocols))


def encode_consumer_value(value: ConsumerValue) -> bytes:
    """int16 value version (0), then the fields and tagged fields of the module docstring."""
    w = CompactWriter().i16(CONSUMER_VALUE_VERSION)
    if isinstance(value, ConsumerGroupMetadataValue):
        w.i32(value.epoch)
        w.tags(_i64_tag(0, value.metadata_hash, 0) + _i64_tag(1, value.creation_time_ms, -1))
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.compact_string(value.instance_id).compact_string(value.rack_id)
        w.compact_string(value.client_id).compact_string(value.client_host)
        w.uvarint(len(value.subscribed_topic_names) + 1)
        for topic in value.subscribed_topic_names:
            w.compact_string(topic)
        w.compact_string(value.subscribed_topic_regex).i32(value.rebalance_timeout_ms)
        w.compact_string(value.server_assignor)
        classic = value.classic_member_metadata
        w.tags([] if classic is None else [(0, _write_classic(classic))])
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.i32(value.assignment_epoch).tags(_i64_tag(0, value.assignment_timestamp_ms, 0))
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _write_topic_partitions(w, value.topic_partitions, with_epochs=False)
        w.tags([])
    elif isinstance(value, ConsumerGroupRegularExpressionValue):
        w.uvarint(len(value.topics) + 1)
        for topic in value.topics:
            w.compact_string(topic)
        w.i64(value.version).i64(value.timestamp).tags([])
    else:
        w.i32(value.member_epoch).i32(value.previous_member_epoch).i8(value.state)
        _write_topic_partitions(w, value.assigned_partitions, with_epochs=True)
        _write_topic_partitions(w, value.partitions_pending_revocation, with_epochs=True)
        w.tags([])
    return bytes(w.out)


def decode_consumer_value(key: ConsumerKey, data: bytes | memoryview) -> ConsumerValue:
    """The (non-tombstone) value of the record whose key is ``key``; version 0 only."""
    r = CompactReader(data, f"{type(key).__name__.removesuffix('Key')}Value")
    version = r.i16()
    if version != CONSUMER_VALUE_VERSION:
        raise r.fail(f"unknown value version {version}")
    value: ConsumerValue
    if isinstance(key, ConsumerGroupMetadataKey):
        epoch = r.i32()
        tags = r.tags()
        value = ConsumerGroupMetadataValue(epoch, _tag_i64(tags, 0, 0), _tag_i64(tags, 1, -1))
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id = r.nullable_compact_string()
        rack_id = r.nullable_compact_string()
        client_id = r.compact_string()
        client_host = r.compact_string()
        topics = tuple(r.compact_string() for _ in range(r.count(1)))
        regex = r.nullable_compact_string()
        rebalance_timeout = r.i32()
        assignor = r.nullable_compact_string()
        field = r.tags().get(0)
        classic = None if field is None else _read_classic(field)
        value = ConsumerGroupMemberMetadataValue(
            instance_id, rack_id, client_id, client_host, topics, regex, rebalance_timeout, assignor, classic
        )
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        epoch = r.i32()
        value = ConsumerGroupTargetAssignmentMetadataValue(epoch, _tag_i64(r.tags(), 0, 0))
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        value = ConsumerGroupTargetAssignmentMemberValue(_read_topic_partitions(r, with_epochs=False))
        r.tags()
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        topics = tuple(r.compact_string() for _ in range(r.count(1)))
        value = ConsumerGroupRegularExpressionValue(topics, r.i64(), r.i64())
        r.tags()
    else:
        member_epoch = r.i32()
        previous_epoch = r.i32()
        state = r.i8()
        assigned = _read_topic_partitions(r, with_epochs=True)
        pending = _read_topic_partitions(r, with_epochs=True)
        r.tags()
        value = ConsumerGroupCurrentMemberAssignmentValue(member_epoch, previous_epoch, state, assigned, pending)
    r.end()
    return value
