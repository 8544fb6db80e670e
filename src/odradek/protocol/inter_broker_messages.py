"""The ZooKeeper-era inter-broker messages Kafka 4 removed and kio therefore lacks.

LeaderAndIsr (key 4, v0..v7), StopReplica (5, v0..v4), UpdateMetadata (6, v0..v8) and
ControlledShutdown (7, v0..v3), requests and responses, as Kafka 3.9 defines them. Each version is
a kio entity: a frozen, slotted, keyword-only dataclass whose fields carry ``kafka_type`` metadata
(and ``tag`` for tagged fields), with the class variables kio's native reader and writer look at
(``__type__``, ``__version__``, ``__flexible__``, ``__api_key__``, ``__header_schema__``). So the
codec, the bounded walk (:mod:`odradek.protocol.bounded`) and hypothesis handle them like kio's own
classes, and :func:`odradek.protocol.codec.api_schema` finds them through :func:`load`.

The field tables below transcribe Kafka 3.9's message specs: per field its name, Kafka type, the
versions that carry it, its default and, where the spec says so, its nullable versions and tag.
A version's classes are built from the fields present at that version; version 4 of LeaderAndIsr,
2 of StopReplica, 6 of UpdateMetadata and 3 of ControlledShutdown are the first flexible ones
(compact strings and arrays, a tagged-field section after every struct). Only UpdateMetadata's
``rack`` is nullable; ``Type`` of UpdateMetadata v8 is tagged field 0. ControlledShutdown v0 uses
request header v0 (no client id), which :mod:`odradek.protocol.codec` special-cases.

Each version's request and response classes live in a namespace module of their own,
``odradek.protocol.inter_broker_messages.<api>_v<N>_<request|response>``, registered in
``sys.modules`` the way kio's per-version modules are, so
:func:`odradek.protocol.messages.nested` (and ``RequestContext.make``) find a nested entity by its
Kafka name (``"LeaderAndIsrPartitionError"``) beside the top-level class.

Layouts worth knowing (Kafka's, byte for byte):

- LeaderAndIsr v0/v1 list partitions flat (``ungrouped_partition_states``, each with its
  ``topic_name``); v2+ group them by topic (``topic_states``), v5+ add ``topic_id`` and ``type``
  (0 incremental, 1 full), v6+ ``leader_recovery_state``, v7 ``is_k_raft_controller``. Its response
  lists ``partition_errors`` with topic names up to v4 and per topic id from v5.
- StopReplica v0 lists (topic, partition) pairs, v1/v2 topics with partition indexes and one
  ``delete_partitions`` flag, v3+ per-partition ``leader_epoch`` and ``delete_partition``.
- UpdateMetadata v0 gives one host/port per broker, v1+ ``endpoints`` (v3+ with the listener name),
  v2+ ``rack``, v4+ ``offline_replicas``, v5+ groups partitions by topic, v7+ ``topic_id``.

This module deliberately has no ``from __future__ import annotations``: kio inspects real types.
A version's classes are built the first time :func:`load` (or :func:`request_class`,
:func:`response_class`) asks for it, under a lock, once per process; immutable afterwards, safe
from any thread.
"""

import dataclasses
import sys
import threading
import types
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from odradek.protocol.api_keys import ApiKey

__all__ = [
    "VERSIONS",
    "load",
    "request_class",
    "response_class",
]


@dataclass(frozen=True)
class F:
    """One field of a spec: ``kind`` is a Kafka type (``int32``, ``string``, ``[]int32``,
    ``[]StructName``); ``versions`` is ``"N+"``, ``"N"`` or ``"N-M"``; ``fields`` the inline
    struct of an array of structs; ``default`` the spec's default (None: the field is required)."""

    name: str
    kind: str
    versions: str
    default: Any = None
    nullable: str | None = None
    tag: int | None = None
    fields: tuple["F", ...] = ()
    entity: str | None = None
    """``brokerId`` or ``topicName``: kio's typed ids."""


def _in(versions: str, version: int) -> bool:
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


_PRIMITIVES: dict[str, tuple[str, type]] = {
    "int8": ("int8", i8),
    "int16": ("int16", i16),
    "int32": ("int32", i32),
    "int64": ("int64", i64),
    "bool": ("bool", bool),
    "string": ("string", str),
    "uuid": ("uuid", uuid.UUID),
    "error_code": ("error_code", ErrorCode),
}
_ENTITY_TYPES: dict[str, type] = {"brokerId": BrokerId, "topicName": TopicName}


@dataclass(frozen=True)
class Spec:
    """One message (request or response) of one API: its fields and shared structs."""

    api_key: int
    name: str
    kind: EntityType
    valid: range
    flexible_from: int
    fields: tuple[F, ...]
    common: dict[str, tuple[F, ...]] = dataclasses.field(default_factory=dict)


class _Builder:
    """Builds the classes of one message version into one namespace module."""

    def __init__(self, spec: Spec, version: int) -> None:
        self.spec = spec
        self.version = version
        self.flexible = version >= spec.flexible_from
        kind = "request" if spec.kind is EntityType.request else "response"
        snake = "".join("_" + c.lower() if c.isupper() else c for c in spec.name).lstrip("_")
        snake = snake.removesuffix("_" + kind)
        self.module = types.ModuleType(f"{__name__}.{snake}_v{version}_{kind}")
        if spec.kind is EntityType.request:
            header: type = RequestHeaderV2 if self.flexible else RequestHeaderV1
        else:
            header = ResponseHeaderV1 if self.flexible else ResponseHeaderV0
        self.header = header

    def struct(self, name: str, fields: tuple[F, ...], entity_type: EntityType) -> type:
        existing = getattr(self.module, name, None)
        if isinstance(existing, type):
            return existing
        specs: list[tuple[str, Any, dataclasses.Field[Any]]] = []
        for f in fields:
            if not _in(f.versions, self.version):
                continue
            specs.append(self.field(f))
        cls = dataclasses.make_dataclass(
            name,
            specs,
            frozen=True,
            slots=True,
            kw_only=True,
            namespace={
                "__module__": self.module.__name__,
                "__type__": entity_type,
                "__version__": i16(self.version),
                "__flexible__": self.flexible,
                "__api_key__": i16(int(self.spec.api_key)),
                "__header_schema__": self.header,
            },
        )
        setattr(self.module, name, cls)
        return cls

    def field(self, f: F) -> tuple[str, Any, "dataclasses.Field[Any]"]:
        metadata: dict[str, Any] = {}
        if f.tag is not None:
            metadata["tag"] = f.tag
        nullable = f.nullable is not None and _in(f.nullable, self.version)
        if f.kind.startswith("[]"):
            element = f.kind[2:]
            if element in _PRIMITIVES:
                kafka_type, py = _PRIMITIVES[element]
                py = _ENTITY_TYPES.get(f.entity or "", py)
                metadata["kafka_type"] = kafka_type
                tp: Any = tuple[py, ...]  # type: ignore[valid-type]
                default: Any = () if not nullable else None
            else:
                inner = f.fields or self.spec.common[element]
                tp = tuple[self.struct(element, inner, EntityType.nested), ...]  # type: ignore[misc]
                default = dataclasses.MISSING
            if nullable:
                tp = tp | None
            return f.name, tp, dataclasses.field(metadata=metadata, default=default)
        kafka_type, py = _PRIMITIVES[f.kind]
        py = _ENTITY_TYPES.get(f.entity or "", py)
        metadata["kafka_type"] = kafka_type
        tp = py | None if nullable or f.kind == "uuid" else py
        if f.default is None:
            default = None if f.tag is not None and nullable else dataclasses.MISSING
        elif py is bool:
            default = bool(f.default)
        else:
            default = py(f.default)
        return f.name, tp, dataclasses.field(metadata=metadata, default=default)

    def build(self) -> type:
        cls = self.struct(self.spec.name, self.spec.fields, self.spec.kind)
        sys.modules[self.module.__name__] = self.module
        return cls


# --- LeaderAndIsr (key 4) ----------------------------------------------------------------------

_LEADER_AND_ISR_PARTITION_STATE = (
    F("topic_name", "string", "0-1", entity="topicName"),
    F("partition_index", "int32", "0+"),
    F("controller_epoch", "int32", "0+"),
    F("leader", "int32", "0+", entity="brokerId"),
    F("leader_epoch", "int32", "0+"),
    F("isr", "[]int32", "0+", entity="brokerId"),
    F("partition_epoch", "int32", "0+"),
    F("replicas", "[]int32", "0+", entity="brokerId"),
    F("adding_replicas", "[]int32", "3+", entity="brokerId"),
    F("removing_replicas", "[]int32", "3+", entity="brokerId"),
    F("is_new", "bool", "1+", default=False),
    F("leader_recovery_state", "int8", "6+", default=0),
)
LEADER_AND_ISR_REQUEST = Spec(
    ApiKey.LEADER_AND_ISR,
    "LeaderAndIsrRequest",
    EntityType.request,
    range(8),
    4,
    (
        F("controller_id", "int32", "0+", entity="brokerId"),
        F("is_k_raft_controller", "bool", "7+", default=False),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "2+", default=-1),
        F("type", "int8", "5+"),
        F("ungrouped_partition_states", "[]LeaderAndIsrPartitionState", "0-1"),
        F(
            "topic_states",
            "[]LeaderAndIsrTopicState",
            "2+",
            fields=(
                F("topic_name", "string", "2+", entity="topicName"),
                F("topic_id", "uuid", "5+"),
                F("partition_states", "[]LeaderAndIsrPartitionState", "2+"),
            ),
        ),
        F(
            "live_leaders",
            "[]LeaderAndIsrLiveLeader",
            "0+",
            fields=(
                F("broker_id", "int32", "0+", entity="brokerId"),
                F("host_name", "string", "0+"),
                F("port", "int32", "0+"),
            ),
        ),
    ),
    {"LeaderAndIsrPartitionState": _LEADER_AND_ISR_PARTITION_STATE},
)
LEADER_AND_ISR_RESPONSE = Spec(
    ApiKey.LEADER_AND_ISR,
    "LeaderAndIsrResponse",
    EntityType.response,
    range(8),
    4,
    (
        F("error_code", "error_code", "0+"),
        F("partition_errors", "[]LeaderAndIsrPartitionError", "0-4"),
        F(
            "topics",
            "[]LeaderAndIsrTopicError",
            "5+",
            fields=(
                F("topic_id", "uuid", "5+"),
                F("partition_errors", "[]LeaderAndIsrPartitionError", "5+"),
            ),
        ),
    ),
    {
        "LeaderAndIsrPartitionError": (
            F("topic_name", "string", "0-4", entity="topicName"),
            F("partition_index", "int32", "0+"),
            F("error_code", "error_code", "0+"),
        )
    },
)

# --- StopReplica (key 5) -----------------------------------------------------------------------

STOP_REPLICA_REQUEST = Spec(
    ApiKey.STOP_REPLICA,
    "StopReplicaRequest",
    EntityType.request,
    range(5),
    2,
    (
        F("controller_id", "int32", "0+", entity="brokerId"),
        F("is_k_raft_controller", "bool", "4+", default=False),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "1+", default=-1),
        F("delete_partitions", "bool", "0-2"),
        F(
            "ungrouped_partitions",
            "[]StopReplicaPartitionV0",
            "0",
            fields=(
                F("topic_name", "string", "0", entity="topicName"),
                F("partition_index", "int32", "0"),
            ),
        ),
        F(
            "topics",
            "[]StopReplicaTopicV1",
            "1-2",
            fields=(
                F("name", "string", "1-2", entity="topicName"),
                F("partition_indexes", "[]int32", "1-2"),
            ),
        ),
        F(
            "topic_states",
            "[]StopReplicaTopicState",
            "3+",
            fields=(
                F("topic_name", "string", "3+", entity="topicName"),
                F(
                    "partition_states",
                    "[]StopReplicaPartitionState",
                    "3+",
                    fields=(
                        F("partition_index", "int32", "3+"),
                        F("leader_epoch", "int32", "3+", default=-1),
                        F("delete_partition", "bool", "3+"),
                    ),
                ),
            ),
        ),
    ),
)
STOP_REPLICA_RESPONSE = Spec(
    ApiKey.STOP_REPLICA,
    "StopReplicaResponse",
    EntityType.response,
    range(5),
    2,
    (
        F("error_code", "error_code", "0+"),
        F(
            "partition_errors",
            "[]StopReplicaPartitionError",
            "0+",
            fields=(
                F("topic_name", "string", "0+", entity="topicName"),
                F("partition_index", "int32", "0+"),
                F("error_code", "error_code", "0+"),
            ),
        ),
    ),
)

# --- UpdateMetadata (key 6) --------------------------------------------------------------------

UPDATE_METADATA_REQUEST = Spec(
    ApiKey.UPDATE_METADATA,
    "UpdateMetadataRequest",
    EntityType.request,
    range(9),
    6,
    (
        F("controller_id", "int32", "0+", entity="brokerId"),
        F("is_k_raft_controller", "bool", "8+", default=False),
        F("type", "int8", "8+", default=0, tag=0),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "5+", default=-1),
        F("ungrouped_partition_states", "[]UpdateMetadataPartitionState", "0-4"),
        F(
            "topic_states",
            "[]UpdateMetadataTopicState",
            "5+",
            fields=(
                F("topic_name", "string", "5+", entity="topicName"),
                F("topic_id", "uuid", "7+"),
                F("partition_states", "[]UpdateMetadataPartitionState", "5+"),
            ),
        ),
        F(
            "live_brokers",
            "[]UpdateMetadataBroker",
            "0+",
            fields=(
                F("id", "int32", "0+", entity="brokerId"),
                F("v0_host", "string", "0"),
                F("v0_port", "int32", "0"),
                F(
                    "endpoints",
                    "[]UpdateMetadataEndpoint",
                    "1+",
                    fields=(
                        F("port", "int32", "1+"),
                        F("host", "string", "1+"),
                        F("listener", "string", "3+"),
                        F("security_protocol", "int16", "1+"),
                    ),
                ),
                F("rack", "string", "2+", nullable="0+"),
            ),
        ),
    ),
    {
        "UpdateMetadataPartitionState": (
            F("topic_name", "string", "0-4", entity="topicName"),
            F("partition_index", "int32", "0+"),
            F("controller_epoch", "int32", "0+"),
            F("leader", "int32", "0+", entity="brokerId"),
            F("leader_epoch", "int32", "0+"),
            F("isr", "[]int32", "0+", entity="brokerId"),
            F("zk_version", "int32", "0+"),
            F("replicas", "[]int32", "0+", entity="brokerId"),
            F("offline_replicas", "[]int32", "4+", entity="brokerId"),
        )
    },
)
UPDATE_METADATA_RESPONSE = Spec(
    ApiKey.UPDATE_METADATA,
    "UpdateMetadataResponse",
    EntityType.response,
    range(9),
    6,
    (F("error_code", "error_code", "0+"),),
)

# --- ControlledShutdown (key 7) ----------------------------------------------------------------

CONTROLLED_SHUTDOWN_REQUEST = Spec(
    ApiKey.CONTROLLED_SHUTDOWN,
    "ControlledShutdownRequest",
    EntityType.request,
    range(4),
    3,
    (
        F("broker_id", "int32", "0+", entity="brokerId"),
        F("broker_epoch", "int64", "2+", default=-1),
    ),
)
CONTROLLED_SHUTDOWN_RESPONSE = Spec(
    ApiKey.CONTROLLED_SHUTDOWN,
    "ControlledShutdownResponse",
    EntityType.response,
    range(4),
    3,
    (
        F("error_code", "error_code", "0+"),
        F(
            "remaining_partitions",
            "[]RemainingPartition",
            "0+",
            fields=(
                F("topic_name", "string", "0+", entity="topicName"),
                F("partition_index", "int32", "0+"),
            ),
        ),
    ),
)

_PAIRS = (
    (LEADER_AND_ISR_REQUEST, LEADER_AND_ISR_RESPONSE),
    (STOP_REPLICA_REQUEST, STOP_REPLICA_RESPONSE),
    (UPDATE_METADATA_REQUEST, UPDATE_METADATA_RESPONSE),
    (CONTROLLED_SHUTDOWN_REQUEST, CONTROLLED_SHUTDOWN_RESPONSE),
)

_SPECS: dict[int, tuple[Spec, Spec]] = {request.api_key: (request, response) for request, response in _PAIRS}

VERSIONS: dict[int, range] = {request.api_key: request.valid for request, _ in _PAIRS}
"""API key -> the versions defined here (Kafka 3.9's ``validVersions``)."""

_SCHEMAS: dict[tuple[int, int], tuple[type, type]] = {}
"""(api key, version) -> its classes, built on first use: building all 46 versions' dataclasses
takes about 0.1 s, most of which a broker never needs (it speaks one version to its peers)."""
_BUILD_LOCK = threading.Lock()


def load(api_key: int, version: int) -> tuple[type, type] | None:
    """(request class, response class) of one version, or None if not defined here. The first
    call for a version builds its classes (and registers their modules); later calls return the
    same classes. Any thread."""
    classes = _SCHEMAS.get((api_key, version))
    if classes is not None:
        return classes
    specs = _SPECS.get(api_key)
    if specs is None or version not in specs[0].valid:
        return None
    with _BUILD_LOCK:  # one build per version, so every caller sees the same classes
        classes = _SCHEMAS.get((api_key, version))
        if classes is None:
            request, response = specs
            classes = (_Builder(request, version).build(), _Builder(response, version).build())
            _SCHEMAS[(api_key, version)] = classes
    return classes


def _classes(api_key: int, version: int) -> tuple[type, type]:
    classes = load(api_key, version)
    if classes is None:
        raise KeyError((api_key, version))
    return classes


def request_class(api_key: int, version: int) -> type:
    """The request class of one version; KeyError if not defined here."""
    return _classes(api_key, version)[0]


def response_class(api_key: int, version: int) -> type:
    """The response class of one version; KeyError if not defined here."""
    return _classes(api_key, version)[1]
