"""Kafka's record schemas of ``__consumer_offsets`` and of the consumer protocol, byte for byte.

Every record of ``__consumer_offsets`` has a key and a value, each starting with an int16 schema
version. Strings are an int16 length then UTF-8 bytes (length -1 = null where nullable); bytes are
an int32 length then the bytes; arrays an int32 count then the elements. All big-endian.

Keys (the key version tells the record type):

- ``OffsetCommitKey`` v0/v1 (odradek writes v1): group string, topic string, partition int32.
- ``GroupMetadataKey`` v2: group string.

Values (null value = tombstone: the offset or the group was deleted):

- ``OffsetCommitValue``:
  v0 offset int64, metadata string, commit_timestamp int64;
  v1 adds expire_timestamp int64 (written only for commits with an explicit retention time,
  OffsetCommit v2..v4); v2 = v0's fields; v3 inserts leader_epoch int32 after offset.
  odradek writes v3, or v1 when the commit carries an expire timestamp (as Kafka 2.1+).
- ``GroupMetadataValue``: protocol_type string, generation int32, protocol nullable string,
  leader nullable string, [v2+] current_state_timestamp int64, members array of
  (member_id string, [v3+] group_instance_id nullable string, client_id string, client_host string,
  [v1+] rebalance_timeout int32, session_timeout int32, subscription bytes, assignment bytes).
  odradek writes v3.

The consumer protocol (group protocol type ``consumer``), read to show assignments, to know a
group's subscribed topics and to serve classic members of consumer groups:
``ConsumerProtocolSubscription`` version int16, topics [string], user_data nullable bytes, v1+
owned partitions [(topic string, [int32])], v2+ generation int32, v3+ rack nullable string;
``ConsumerProtocolAssignment`` version int16, partitions [(topic string, [int32])], user_data
(the same in v0..v3). A version above 3 is read as 3 (later fields are ignored), as Kafka's
``ConsumerProtocol`` reads it; a negative one is a SchemaError.

A group's ``__consumer_offsets`` partition is ``abs(java_hash(group)) % partitions`` with Java's
``String.hashCode`` over UTF-16 code units and Kafka's ``Utils.abs`` (MIN_VALUE -> 0).

Malformed bytes raise :class:`SchemaError`. Pure functions: safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from odradek.protocol.java_hash import java_string_hash
from odradek.protocol.java_hash import key_partition as partition_for

__all__ = [
    "CONSUMER_PROTOCOL_MAX_VERSION",
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_TOPIC",
    "OFFSET_COMMIT_KEY_VERSION",
    "BinaryReader",
    "ConsumerSubscription",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberRecord",
    "OffsetAndMetadata",
    "OffsetCommitKey",
    "SchemaError",
    "consumer_protocol_version",
    "decode_assignment",
    "decode_consumer_subscription",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_subscription",
    "encode_assignment",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "encode_subscription",
    "java_string_hash",
    "partition_for",
]

GROUP_METADATA_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class SchemaError(ValueError):
    """Bytes that do not follow the schema they claim (truncated, bad length, unknown version)."""


# --- primitive writer / reader --------------------------------------------------------------------


class BinaryWriter:
    """Big-endian writes of a record's fields (:mod:`.consumer_schemas` builds on it)."""

    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> BinaryWriter:
        self.out += _I16.pack(v)
        return self

    def i32(self, v: int) -> BinaryWriter:
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> BinaryWriter:
        self.out += _I64.pack(v)
        return self

    def string(self, v: str | None) -> BinaryWriter:
        if v is None:
            return self.i16(-1)
        raw = v.encode("utf-8")
        if len(raw) > 32767:
            raise SchemaError(f"string of {len(raw)} bytes is longer than 32767")
        self.i16(len(raw))
        self.out += raw
        return self

    def bytes_(self, v: bytes | None) -> BinaryWriter:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.out += v
        return self


class BinaryReader:
    """Big-endian fixed-size reads over a record's bytes; every overrun is a SchemaError naming
    ``what`` (the record) and the byte position (:mod:`.consumer_schemas` builds on it)."""

    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def fail(self, message: str) -> SchemaError:
        return SchemaError(f"{self.what}: {message} (at byte {self.pos})")

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> memoryview:
        if n < 0 or n > self.remaining():
            raise self.fail(f"needs {n} bytes, has {self.remaining()}")
        view = self.data[self.pos : self.pos + n]
        self.pos += n
        return view

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])


class _Reader(BinaryReader):
    def nullable_string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return bytes(self.take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SchemaError(f"{self.what}: string is not UTF-8") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise SchemaError(f"{self.what}: null where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else bytes(self.take(n))

    def bytes_(self) -> bytes:
        value = self.nullable_bytes()
        return b"" if value is None else value

    def count(self) -> int:
        n = self.i32()
        if n < -1 or n > len(self.data) - self.pos:
            raise SchemaError(f"{self.what}: invalid array length {n}")
        return max(n, 0)

    def remaining(self) -> int:
        return len(self.data) - self.pos


# --- keys -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(BinaryWriter().i16(OFFSET_COMMIT_KEY_VERSION).string(group).string(topic).i32(partition).out)


def encode_group_metadata_key(group: str) -> bytes:
    return bytes(BinaryWriter().i16(GROUP_METADATA_KEY_VERSION).string(group).out)


def decode_key(data: bytes | memoryview) -> OffsetCommitKey | GroupMetadataKey:
    """The key of a ``__consumer_offsets`` record. Raises SchemaError for another key version
    (Kafka 3.x+ uses 3..: consumer-protocol records odradek does not write)."""
    r = _Reader(data, "__consumer_offsets key")
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    raise SchemaError(f"unknown __consumer_offsets key version {version}")


# --- offset commit value ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset. ``leader_epoch`` -1 = unknown; ``expire_timestamp_ms`` None unless the
    commit asked for its own retention (OffsetCommit v2..v4 ``retention_time``)."""

    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1
    leader_epoch: int = -1
    expire_timestamp_ms: int | None = None


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    w = BinaryWriter()
    if value.expire_timestamp_ms is not None:
        w.i16(1).i64(value.offset).string(value.metadata).i64(value.commit_timestamp_ms)
        w.i64(value.expire_timestamp_ms)
    else:
        w.i16(3).i64(value.offset).i32(value.leader_epoch).string(value.metadata).i64(value.commit_timestamp_ms)
    return bytes(w.out)


def decode_offset_commit_value(data: bytes | memoryview) -> OffsetAndMetadata:
    """Versions 0..3 (see the module docstring). A null metadata string reads as ``""``."""
    r = _Reader(data, "OffsetCommitValue")
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise SchemaError(f"unknown OffsetCommitValue version {version}")
    offset = r.i64()
    leader_epoch = r.i32() if version == 3 else -1
    metadata = r.nullable_string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else None
    if expire_ts is not None and expire_ts < 0:
        expire_ts = None
    return OffsetAndMetadata(offset, metadata, commit_ts, leader_epoch, expire_ts)


# --- group metadata value ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = BinaryWriter().i16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type).i32(value.generation).string(value.protocol).string(value.leader)
    w.i64(value.current_state_timestamp_ms).i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.out)


def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    """Versions 0..3. Fields a version lacks get Kafka's defaults (rebalance timeout = session
    timeout for v0, no state timestamp before v2, no instance ids before v3)."""
    r = _Reader(data, "GroupMetadataValue")
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise SchemaError(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.nullable_string() or ""
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.count()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        subscription = r.bytes_()
        assignment = r.bytes_()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# --- consumer protocol ------------------------------------------------------------------------------


def decode_subscription(data: bytes | memoryview) -> list[str]:
    """The topics of a ``consumer`` protocol subscription (any version: v0 is a prefix of all)."""
    r = _Reader(data, "ConsumerProtocolSubscription")
    r.i16()
    return [r.string() for _ in range(r.count())]


CONSUMER_PROTOCOL_MAX_VERSION = 3


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    """A ``consumer`` protocol subscription, every version's fields (defaults where absent)."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


def _protocol_version(r: _Reader) -> int:
    version = r.i16()
    if version < 0:
        raise r.fail(f"unsupported version {version}")
    return min(version, CONSUMER_PROTOCOL_MAX_VERSION)


def consumer_protocol_version(data: bytes | memoryview) -> int:
    """The version a ``consumer`` protocol metadata starts with, as an assignment is written back
    to its member (3 for later ones); SchemaError for a negative one or too few bytes."""
    return _protocol_version(_Reader(data, "ConsumerProtocolSubscription"))


def decode_consumer_subscription(data: bytes | memoryview) -> ConsumerSubscription:
    """Every field of a ``consumer`` protocol subscription; bytes past the version's fields are ignored."""
    r = _Reader(data, "ConsumerProtocolSubscription")
    version = _protocol_version(r)
    topics = tuple(r.string() for _ in range(r.count()))
    user_data = r.nullable_bytes()
    owned: dict[str, tuple[int, ...]] = {}
    if version >= 1:
        for _ in range(r.count()):
            topic = r.string()
            owned[topic] = owned.get(topic, ()) + tuple(r.i32() for _ in range(r.count()))
    generation = r.i32() if version >= 2 else -1
    rack = r.nullable_string() if version >= 3 else None
    return ConsumerSubscription(version, topics, user_data, owned, generation, rack)


def encode_subscription(
    topics: Sequence[str],
    user_data: bytes | None = None,
    *,
    version: int = 0,
    owned: Mapping[str, Sequence[int]] | None = None,
    generation_id: int = -1,
    rack_id: str | None = None,
) -> bytes:
    """A ``consumer`` protocol subscription of ``version`` (0..3; the fields it has)."""
    w = BinaryWriter().i16(version).i32(len(topics))
    for topic in topics:
        w.string(topic)
    w.bytes_(user_data)
    if version >= 1:
        w.i32(len(owned or {}))
        for topic, partitions in (owned or {}).items():
            w.string(topic).i32(len(partitions))
            for p in partitions:
                w.i32(p)
    if version >= 2:
        w.i32(generation_id)
    if version >= 3:
        w.string(rack_id)
    return bytes(w.out)


def decode_assignment(data: bytes | memoryview) -> dict[str, list[int]]:
    """Topic -> partitions of a ``consumer`` protocol assignment; ``{}`` for empty bytes."""
    if len(data) == 0:
        return {}
    r = _Reader(data, "ConsumerProtocolAssignment")
    r.i16()
    out: dict[str, list[int]] = {}
    for _ in range(r.count()):
        topic = r.string()
        out.setdefault(topic, []).extend(r.i32() for _ in range(r.count()))
    return out


def encode_assignment(
    assignment: Mapping[str, Sequence[int]], user_data: bytes | None = None, version: int = 0
) -> bytes:
    """A ``consumer`` protocol assignment (every version 0..3 has these fields; ``version`` is
    only written)."""
    w = BinaryWriter().i16(version).i32(len(assignment))
    for topic, partitions in assignment.items():
        w.string(topic).i32(len(partitions))
        for p in partitions:
            w.i32(p)
    return bytes(w.bytes_(user_data).out)
