"""Kafka's ``__share_group_state`` records (the share coordinator's, KIP-932), byte for byte.

A record's key is an int16 *record type* then the key fields; its value an int16 *value version*
(0 for both types) then the value fields. A null value is a tombstone: the share-partition's
state was deleted (Kafka writes it under a ShareSnapshot key).

Keys are not flexible: GroupId string (int16 length, UTF-8), TopicId uuid (16 bytes, most
significant half first), Partition int32. Both types have the same key fields:

- 0 ``ShareSnapshotKey``: the complete state of one share-partition;
- 1 ``ShareUpdateKey``: an incremental update merged over the last snapshot.

Values are flexible (see :mod:`odradek.coordinator.group.consumer_schemas` for the encoding of
compact arrays and tagged fields), from Kafka 4.2's ``ShareSnapshotValue.json`` and
``ShareUpdateValue.json``:

- ``ShareSnapshotValue`` v0: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32,
  StartOffset int64, CreateTimestamp int64, WriteTimestamp int64, StateBatches [FirstOffset int64,
  LastOffset int64, DeliveryState int8, DeliveryCount int16, tags]; tagged 0
  DeliveryCompleteCount int32 (default -1, KIP-1226).
- ``ShareUpdateValue`` v0: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1: not
  moved), StateBatches as above; tagged 0 DeliveryCompleteCount int32 (default -1).

A share-partition's coordinator key (FindCoordinator key type SHARE) is Kafka's
``"groupId:topicId:partition"`` with the topic id in Kafka's base64 form
(:func:`share_coordinator_key`, :func:`parse_share_coordinator_key`); its ``__share_group_state``
partition is ``abs(java hash of that key) % partitions`` (:func:`partition_for`).

Decoders raise :class:`SchemaError` on malformed bytes (truncation, an unknown record type,
value version or delivery state, bytes left over); encoders on values the schema cannot carry.
Pure functions: safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass

from odradek.coordinator.group.consumer_schemas import CompactReader, CompactWriter, SchemaError
from odradek.protocol.java_hash import key_partition
from odradek.share.state import DeliveryState, SharePartitionKey, StateBatch

__all__ = [
    "SHARE_GROUP_STATE_TOPIC",
    "SHARE_SNAPSHOT_TYPE",
    "SHARE_UPDATE_TYPE",
    "SchemaError",
    "ShareSnapshotValue",
    "ShareUpdateValue",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "parse_share_coordinator_key",
    "partition_for",
    "share_coordinator_key",
]

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
SHARE_SNAPSHOT_TYPE = 0
SHARE_UPDATE_TYPE = 1
VALUE_VERSION = 0
_BATCH_SIZE = 8 + 8 + 1 + 2 + 1
"""The smallest encoded state batch (its fields and an empty tag buffer)."""
_DELIVERY_COMPLETE_COUNT_TAG = 0


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    """Kafka's ``ShareSnapshotValue``; ``state_batches`` sorted and disjoint when the coordinator
    writes them."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    """Kafka's ``ShareUpdateValue``: ``start_offset`` -1 leaves the start offset as it is."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


ShareValue = ShareSnapshotValue | ShareUpdateValue


# --- coordinator keys ---------------------------------------------------------------------------------


def share_coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``"groupId:topicId:partition"``."""
    topic = base64.urlsafe_b64encode(key.topic_id.bytes).rstrip(b"=").decode("ascii")
    return f"{key.group_id}:{topic}:{key.partition}"


def parse_share_coordinator_key(text: str) -> SharePartitionKey:
    """The key :func:`share_coordinator_key` wrote; ValueError for anything else (Kafka's
    ``SharePartitionKey.validate``: three ``:``-separated parts, a 22-character base64 topic id,
    an int32 partition)."""
    parts = text.split(":")
    if not text or len(parts) != 3:
        raise ValueError(f"Invalid key format: expected - <String>:<Uuid>:<int>, found - {text}")
    group_id, topic, partition = parts
    try:
        raw = base64.urlsafe_b64decode(topic + "==") if len(topic) == 22 else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"Invalid topic id in share partition key {text!r}")
    try:
        index = int(partition)
    except ValueError:
        raise ValueError(f"Invalid partition in share partition key {text!r}") from None
    if not -(2**31) <= index < 2**31:
        raise ValueError(f"Invalid partition in share partition key {text!r}")
    return SharePartitionKey(group_id.strip(), uuid.UUID(bytes=raw), index)


def partition_for(key: SharePartitionKey, partitions: int) -> int:
    """The ``__share_group_state`` partition of ``key`` among ``partitions``."""
    return key_partition(share_coordinator_key(key), max(1, partitions))


# --- keys ---------------------------------------------------------------------------------------------


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    """int16 record type, then GroupId, TopicId, Partition."""
    if record_type not in (SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE):
        raise SchemaError(f"unknown share coordinator record type {record_type}")
    w = CompactWriter().i16(record_type)
    w.string(key.group_id)
    w.uuid(key.topic_id).i32(key.partition)
    return bytes(w.out)


def decode_key(data: bytes | memoryview) -> tuple[int, SharePartitionKey]:
    """(record type, key) of a ``__share_group_state`` record key."""
    r = CompactReader(data, "share coordinator record key")
    record_type = r.i16()
    if record_type not in (SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE):
        raise SchemaError(f"unknown share coordinator record type {record_type}")
    key = SharePartitionKey(r.key_string(), r.uuid(), r.i32())
    r.end()
    return record_type, key


# --- values -------------------------------------------------------------------------------------------


def _write_batches(w: CompactWriter, batches: tuple[StateBatch, ...]) -> None:
    w.uvarint(len(batches) + 1)
    for b in batches:
        w.i64(b.first_offset).i64(b.last_offset).i8(int(b.delivery_state)).i16(b.delivery_count)
        w.tags([])


def _read_batches(r: CompactReader) -> tuple[StateBatch, ...]:
    batches = []
    for _ in range(r.count(_BATCH_SIZE)):
        first, last, state, count = r.i64(), r.i64(), r.i8(), r.i16()
        r.tags()
        try:
            delivery_state = DeliveryState(state)
        except ValueError:
            raise r.fail(f"unknown delivery state {state}") from None
        batches.append(StateBatch(first, last, delivery_state, count))
    return tuple(batches)


def _count_tag(count: int) -> list[tuple[int, bytes]]:
    if count == -1:
        return []
    return [(_DELIVERY_COMPLETE_COUNT_TAG, bytes(CompactWriter().i32(count).out))]


def _read_count_tag(r: CompactReader) -> int:
    field = r.tags().get(_DELIVERY_COMPLETE_COUNT_TAG)
    if field is None:
        return -1
    value = int(field.i32())
    field.end()
    return value


def encode_value(value: ShareValue) -> bytes:
    """int16 value version 0, then the value's fields (see the module docstring)."""
    w = CompactWriter().i16(VALUE_VERSION)
    if isinstance(value, ShareSnapshotValue):
        w.i32(value.snapshot_epoch).i32(value.state_epoch).i32(value.leader_epoch).i64(value.start_offset)
        w.i64(value.create_timestamp).i64(value.write_timestamp)
    else:
        w.i32(value.snapshot_epoch).i32(value.leader_epoch).i64(value.start_offset)
    _write_batches(w, value.state_batches)
    w.tags(_count_tag(value.delivery_complete_count))
    return bytes(w.out)


def decode_value(record_type: int, data: bytes | memoryview) -> ShareValue:
    """The value of a record of ``record_type`` (not a tombstone)."""
    what = "ShareSnapshotValue" if record_type == SHARE_SNAPSHOT_TYPE else "ShareUpdateValue"
    r = CompactReader(data, what)
    version = r.i16()
    if version != VALUE_VERSION:
        raise SchemaError(f"{what}: unknown version {version}")
    value: ShareValue
    if record_type == SHARE_SNAPSHOT_TYPE:
        snapshot_epoch, state_epoch, leader_epoch, start_offset = r.i32(), r.i32(), r.i32(), r.i64()
        create_timestamp, write_timestamp = r.i64(), r.i64()
        batches = _read_batches(r)
        count = _read_count_tag(r)
        value = ShareSnapshotValue(
            snapshot_epoch, state_epoch, leader_epoch, start_offset, create_timestamp, write_timestamp, batches, count
        )
    elif record_type == SHARE_UPDATE_TYPE:
        snapshot_epoch, leader_epoch, start_offset = r.i32(), r.i32(), r.i64()
        batches = _read_batches(r)
        value = ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches, _read_count_tag(r))
    else:
        raise SchemaError(f"unknown share coordinator record type {record_type}")
    r.end()
    return value
