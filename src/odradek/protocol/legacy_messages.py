"""Message versions Kafka 4 removed and kio therefore lacks: OffsetCommit v0/v1, OffsetFetch v0,
ListOffsets v0.

Defined as kio entities (frozen dataclasses with ``kafka_type`` metadata, the same shape as kio's
generated classes) from Kafka 3.9's ``OffsetCommitRequest.json``/``OffsetFetchRequest.json`` and
their responses (``ListOffsetsRequest.json``/``ListOffsetsResponse.json`` for ListOffsets), so
kio's native reader and writer handle them and
:func:`odradek.protocol.codec.api_schema` finds them through :func:`load`.

- OffsetCommit v0 (Kafka 0.8.1/0.8.2): group_id, topics [name, partitions [partition_index,
  committed_offset, committed_metadata]]; the broker stores these offsets in ZooKeeper
  (``/consumers/<group>/offsets/<topic>/<partition>``).
- OffsetCommit v1: adds generation_id and member_id, and a per-partition commit_timestamp
  (int64, -1 = now); stored in ``__consumer_offsets``.
- Responses v0/v1: topics [name, partitions [partition_index, error_code]].
- OffsetFetch v0: group_id, topics [name, partition_indexes]; response topics [name, partitions
  [partition_index, committed_offset, metadata, error_code]]; read from ZooKeeper.
- ListOffsets v0 (Kafka 0.8-0.10.0 consumers): replica_id, topics [name, partitions
  [partition_index, timestamp, max_num_offsets]]; response (no throttle time) topics [name,
  partitions [partition_index, error_code, old_style_offsets [int64]]].

This module deliberately has no ``from __future__ import annotations``: kio inspects real types.
Immutable module data: safe from any thread.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

__all__ = [
    "ListOffsetsPartitionResponseV0",
    "ListOffsetsPartitionV0",
    "ListOffsetsRequestV0",
    "ListOffsetsResponseV0",
    "ListOffsetsTopicResponseV0",
    "ListOffsetsTopicV0",
    "OffsetCommitRequestV0",
    "OffsetCommitRequestV1",
    "OffsetCommitResponsePartitionV0",
    "OffsetCommitResponseTopicV0",
    "OffsetCommitResponseV0",
    "OffsetFetchRequestV0",
    "OffsetFetchResponsePartitionV0",
    "OffsetFetchResponseTopicV0",
    "OffsetFetchResponseV0",
    "load",
]


# --- OffsetCommit v0 --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestPartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    committed_offset: i64 = field(metadata={"kafka_type": "int64"})
    committed_metadata: str | None = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[OffsetCommitRequestPartitionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    topics: tuple[OffsetCommitRequestTopicV0, ...]


# --- OffsetCommit v1 --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestPartitionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    committed_offset: i64 = field(metadata={"kafka_type": "int64"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    committed_metadata: str | None = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestTopicV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[OffsetCommitRequestPartitionV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    generation_id_or_member_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    member_id: str = field(metadata={"kafka_type": "string"})
    topics: tuple[OffsetCommitRequestTopicV1, ...]


# --- OffsetCommit responses v0/v1 (same layout) -----------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponsePartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponseTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[OffsetCommitResponsePartitionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(8)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topics: tuple[OffsetCommitResponseTopicV0, ...]


# --- OffsetFetch v0 ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_indexes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    topics: tuple[OffsetFetchRequestTopicV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponsePartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    committed_offset: i64 = field(metadata={"kafka_type": "int64"})
    metadata: str | None = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponseTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[OffsetFetchResponsePartitionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topics: tuple[OffsetFetchResponseTopicV0, ...]


# --- ListOffsets v0 ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(2)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    timestamp: i64 = field(metadata={"kafka_type": "int64"})
    max_num_offsets: i32 = field(metadata={"kafka_type": "int32"}, default=i32(1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(2)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[ListOffsetsPartitionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(2)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    replica_id: BrokerId = field(metadata={"kafka_type": "int32"})
    topics: tuple[ListOffsetsTopicV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(2)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    old_style_offsets: tuple[i64, ...] = field(metadata={"kafka_type": "int64"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsTopicResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(2)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[ListOffsetsPartitionResponseV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(2)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topics: tuple[ListOffsetsTopicResponseV0, ...]


_SCHEMAS: dict[tuple[int, int], tuple[type, type]] = {
    (8, 0): (OffsetCommitRequestV0, OffsetCommitResponseV0),
    (8, 1): (OffsetCommitRequestV1, OffsetCommitResponseV0),
    (9, 0): (OffsetFetchRequestV0, OffsetFetchResponseV0),
    (2, 0): (ListOffsetsRequestV0, ListOffsetsResponseV0),
}


def load(api_key: int, version: int) -> tuple[type, type] | None:
    """(request class, response class) of a legacy version, or None."""
    return _SCHEMAS.get((api_key, version))
