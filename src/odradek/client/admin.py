"""An asyncio admin client: topics, partitions, configs, offsets, records and the cluster.

``async with AdminClient("127.0.0.1:9092") as admin: ...``. Every batch operation answers each
item (topic, partition, config resource) on its own: results carry an ``error`` that is None on
success or the :mod:`odradek.errors` exception for the broker's error code (see
:func:`odradek.client.errors.error_for`); nothing is raised for per-item errors. Exceptions are
raised only for failures of the whole call: :class:`~odradek.client.errors.KafkaConnectionError`
when no broker can be reached, :class:`~odradek.client.errors.KafkaTimeoutError`,
``UnsupportedVersionError``.

Routing (as Kafka's ``KafkaAdminClient``): CreateTopics, DeleteTopics and CreatePartitions go to
the controller; DescribeConfigs / AlterConfigs of a broker resource go to that broker, of topics to
any broker; ListOffsets and DeleteRecords go to each partition's leader, retried after a
metadata refresh when leadership moved (:meth:`Cluster.route`). Versions are negotiated per
broker (the highest both sides support).

Belongs to the event loop that created it; call it only from that loop.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.client.cluster import Cluster, PartitionInfo, TopicDescription, TopicPartition, group_by_topic
from odradek.client.connection import KafkaConnection
from odradek.client.errors import error_for
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey

__all__ = [
    "AdminClient",
    "AlterConfigOp",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "CreateTopicResult",
    "DeleteRecordsResult",
    "DescribeConfigsResult",
    "ListOffsetsResult",
    "NewPartitions",
    "NewTopic",
    "PartitionInfo",
    "TopicDescription",
    "TopicPartition",
]


EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
"""ListOffsets timestamps: the log start offset, the high watermark, the largest timestamp."""

ZERO_UUID = uuid.UUID(int=0)


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


@dataclass(slots=True)
class NewTopic:
    """A topic to create. -1 takes the broker's default; ``replica_assignment`` replaces both."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int = -1
    is_sensitive: bool = False
    read_only: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)
    config_type: int = 0
    documentation: str | None = None


@dataclass(slots=True)
class CreateTopicResult:
    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, ConfigEntry] = field(default_factory=dict)


@dataclass(slots=True)
class NewPartitions:
    """A new total partition count, optionally with the replicas of each new partition."""

    total_count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A config resource: type 2 (topic), 4 (broker) or 32 (group) and its name."""

    TOPIC = 2
    BROKER = 4
    GROUP = 32

    type: int
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(cls.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | str) -> ConfigResource:
        return cls(cls.BROKER, str(broker_id))

    @classmethod
    def group(cls, group_id: str) -> ConfigResource:
        return cls(cls.GROUP, group_id)


@dataclass(slots=True)
class DescribeConfigsResult:
    resource: ConfigResource
    configs: dict[str, ConfigEntry] = field(default_factory=dict)
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One IncrementalAlterConfigs operation: SET 0, DELETE 1, APPEND 2, SUBTRACT 3."""

    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

    name: str
    op: int
    value: str | None = None


@dataclass(slots=True)
class ListOffsetsResult:
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    error: KafkaError | None = None


@dataclass(slots=True)
class DeleteRecordsResult:
    low_watermark: int = -1
    error: KafkaError | None = None


@dataclass(slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[tuple[int, str, int, str | None]]
    """(broker id, host, port, rack) by ascending id."""


def _error(code: int, message: str | None, context: str) -> KafkaError | None:
    return error_for(code, message, context) if code else None


class AdminClient:
    """Admin operations against one cluster; ``await close()`` (or use ``async with``)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "odradek-admin",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        retries: int = 5,
        security: ClientSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        self.cluster = Cluster(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            retries=retries,
            security=security,
        )
        self.request_timeout_ms = request_timeout_ms

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()

    async def _controller_send(self, make: Any, timeout_ms: int) -> Any:
        """Send ``make(conn)`` to the controller; once more after NOT_CONTROLLER answers."""
        for attempt in range(2):
            conn = await self.cluster.controller_connection()
            response = await conn.send(make(conn), timeout_ms=timeout_ms + self.request_timeout_ms)
            codes = [getattr(r, "error_code", 0) for r in _items(response)]
            if ErrorCode.not_controller not in codes or attempt == 1:
                return response
            await self.cluster.refresh(topics=[])
        raise AssertionError("unreachable")

    # --- topics ------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False, timeout_ms: int = 30000
    ) -> dict[str, CreateTopicResult]:
        """Create (or with ``validate_only`` only check) topics; a result per topic name."""

        def make(conn: KafkaConnection) -> Any:
            rb = conn.builder(ApiKey.CREATE_TOPICS, 2, 7)
            return rb(
                topics=tuple(
                    rb.make(
                        "CreatableTopic",
                        name=t.name,
                        num_partitions=t.num_partitions,
                        replication_factor=t.replication_factor,
                        assignments=tuple(
                            rb.make("CreatableReplicaAssignment", partition_index=p, broker_ids=tuple(rs))
                            for p, rs in sorted((t.replica_assignment or {}).items())
                        ),
                        configs=tuple(rb.make("CreatableTopicConfig", name=k, value=v) for k, v in t.configs.items()),
                    )
                    for t in topics
                ),
                timeout=_ms(timeout_ms),
                validate_only=validate_only,
            )

        response = await self._controller_send(make, timeout_ms)
        results = {}
        for r in response.topics:
            results[r.name] = CreateTopicResult(
                name=r.name,
                error=_error(r.error_code, r.error_message, r.name),
                topic_id=getattr(r, "topic_id", None) or ZERO_UUID,
                num_partitions=int(getattr(r, "num_partitions", -1)),
                replication_factor=int(getattr(r, "replication_factor", -1)),
                configs={
                    c.name: ConfigEntry(c.name, c.value, int(c.config_source), c.is_sensitive, c.read_only)
                    for c in (getattr(r, "configs", None) or ())
                },
            )
        return results

    async def delete_topics(self, names: Sequence[str], *, timeout_ms: int = 30000) -> dict[str, KafkaError | None]:
        """Delete topics by name; None or the error per name."""

        def make(conn: KafkaConnection) -> Any:
            rb = conn.builder(ApiKey.DELETE_TOPICS, 1, 6)
            if rb.version >= 6:
                states = tuple(rb.make("DeleteTopicState", name=n, topic_id=ZERO_UUID) for n in names)
                return rb(topics=states, timeout=_ms(timeout_ms))
            return rb(topic_names=tuple(names), timeout=_ms(timeout_ms))

        response = await self._controller_send(make, timeout_ms)
        return {r.name: _error(r.error_code, getattr(r, "error_message", None), r.name) for r in response.responses}

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """Names of all topics, sorted; internal topics (``__consumer_offsets``) only on request."""
        topics = await self.cluster.refresh(None)
        return sorted(
            name
            for name, t in topics.items()
            if t.error_code == ErrorCode.none and (include_internal or not t.is_internal)
        )

    async def describe_topics(self, names: Sequence[str] | None = None) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of ``names`` (None: every topic).

        An unknown topic is answered with ``error_code`` UNKNOWN_TOPIC_OR_PARTITION and no partitions.
        """
        return await self.cluster.refresh(None if names is None else list(names))

    async def create_partitions(
        self,
        new_partitions: Mapping[str, int | NewPartitions],
        *,
        validate_only: bool = False,
        timeout_ms: int = 30000,
    ) -> dict[str, KafkaError | None]:
        """Raise topics' partition counts to the given totals; None or the error per topic."""
        specs = {
            name: spec if isinstance(spec, NewPartitions) else NewPartitions(spec)
            for name, spec in new_partitions.items()
        }

        def make(conn: KafkaConnection) -> Any:
            rb = conn.builder(ApiKey.CREATE_PARTITIONS, 0, 3)
            return rb(
                topics=tuple(
                    rb.make(
                        "CreatePartitionsTopic",
                        name=name,
                        count=spec.total_count,
                        assignments=None
                        if spec.assignments is None
                        else tuple(
                            rb.make("CreatePartitionsAssignment", broker_ids=tuple(rs)) for rs in spec.assignments
                        ),
                    )
                    for name, spec in specs.items()
                ),
                timeout=_ms(timeout_ms),
                validate_only=validate_only,
            )

        response = await self._controller_send(make, timeout_ms)
        return {r.name: _error(r.error_code, r.error_message, r.name) for r in response.results}

    # --- configs -----------------------------------------------------------------------------

    async def _resource_connection(self, resource: ConfigResource) -> KafkaConnection:
        """The broker a broker resource names (any broker when it is not a live broker id)."""
        if resource.type == ConfigResource.BROKER and resource.name.isdigit():
            broker_id = int(resource.name)
            if broker_id not in self.cluster.brokers:
                await self.cluster.refresh(topics=[])
            if broker_id in self.cluster.brokers:
                return await self.cluster.connection(broker_id)
        return await self.cluster.any_connection()

    async def _by_destination(
        self, resources: Sequence[ConfigResource]
    ) -> list[tuple[KafkaConnection, list[ConfigResource]]]:
        groups: dict[int, tuple[KafkaConnection, list[ConfigResource]]] = {}
        for resource in resources:
            conn = await self._resource_connection(resource)
            groups.setdefault(id(conn), (conn, []))[1].append(resource)
        return list(groups.values())

    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        keys: Sequence[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, DescribeConfigsResult]:
        """Configs of topics, brokers and groups (``keys`` None: every key)."""

        async def one(conn: KafkaConnection, group: list[ConfigResource]) -> list[Any]:
            rb = conn.builder(ApiKey.DESCRIBE_CONFIGS, 1, 4)
            request = rb(
                resources=tuple(
                    rb.make(
                        "DescribeConfigsResource",
                        resource_type=r.type,
                        resource_name=r.name,
                        configuration_keys=None if keys is None else tuple(keys),
                    )
                    for r in group
                ),
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            return list((await conn.send(request)).results)

        answers = await asyncio.gather(*(one(c, g) for c, g in await self._by_destination(resources)))
        results = {}
        for r in (item for answer in answers for item in answer):
            resource = ConfigResource(int(r.resource_type), r.resource_name)
            results[resource] = DescribeConfigsResult(
                resource=resource,
                error=_error(r.error_code, r.error_message, r.resource_name),
                configs={
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=int(c.config_source),
                        is_sensitive=c.is_sensitive,
                        read_only=c.read_only,
                        synonyms=[(s.name, s.value, int(s.source)) for s in c.synonyms],
                        config_type=int(getattr(c, "config_type", 0)),
                        documentation=getattr(c, "documentation", None),
                    )
                    for c in r.configs
                },
            )
        return results

    async def _alter(
        self, api_key: int, max_version: int, resources: Sequence[ConfigResource], entries: Any, validate_only: bool
    ) -> dict[ConfigResource, KafkaError | None]:
        async def one(conn: KafkaConnection, group: list[ConfigResource]) -> list[Any]:
            rb = conn.builder(api_key, 0, max_version)
            request = rb(
                resources=tuple(
                    rb.make(
                        "AlterConfigsResource",
                        resource_type=r.type,
                        resource_name=r.name,
                        configs=tuple(rb.make("AlterableConfig", **e) for e in entries(r)),
                    )
                    for r in group
                ),
                validate_only=validate_only,
            )
            return list((await conn.send(request)).responses)

        answers = await asyncio.gather(*(one(c, g) for c, g in await self._by_destination(resources)))
        return {
            ConfigResource(int(r.resource_type), r.resource_name): _error(
                r.error_code, r.error_message, r.resource_name
            )
            for answer in answers
            for r in answer
        }

    async def alter_configs(
        self, configs: Mapping[ConfigResource, Mapping[str, str]], *, validate_only: bool = False
    ) -> dict[ConfigResource, KafkaError | None]:
        """Replace the overrides of each resource with the given ones (keys left out are reset)."""
        return await self._alter(
            ApiKey.ALTER_CONFIGS,
            2,
            list(configs),
            lambda r: [{"name": k, "value": v} for k, v in configs[r].items()],
            validate_only,
        )

    async def incremental_alter_configs(
        self, ops: Mapping[ConfigResource, Sequence[AlterConfigOp]], *, validate_only: bool = False
    ) -> dict[ConfigResource, KafkaError | None]:
        """Apply SET / DELETE / APPEND / SUBTRACT operations to each resource's overrides."""
        return await self._alter(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            list(ops),
            lambda r: [{"name": o.name, "config_operation": o.op, "value": o.value} for o in ops[r]],
            validate_only,
        )

    # --- offsets and records -----------------------------------------------------------------

    async def list_offsets(
        self, specs: Mapping[TopicPartition, int], *, isolation_level: int = 0
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """Offsets by timestamp per partition: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3) or a
        timestamp in ms (the first offset whose record timestamp is at least it; -1 if none)."""

        async def call(
            conn: KafkaConnection, group: dict[TopicPartition, int]
        ) -> dict[TopicPartition, tuple[int, Any]]:
            rb = conn.builder(ApiKey.LIST_OFFSETS, 1, 8)
            request = rb(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=tuple(
                    rb.make(
                        "ListOffsetsTopic",
                        name=topic,
                        partitions=tuple(
                            rb.make("ListOffsetsPartition", partition_index=p, current_leader_epoch=-1, timestamp=ts)
                            for p, ts in parts
                        ),
                    )
                    for topic, parts in group_by_topic(group.items()).items()
                ),
            )
            response = await conn.send(request)
            return {
                TopicPartition(t.name, int(p.partition_index)): (int(p.error_code), p)
                for t in response.topics
                for p in t.partitions
            }

        answers = await self.cluster.route(specs, call)
        out = {}
        for tp, (code, p) in answers.items():
            if code or p is None:
                out[tp] = ListOffsetsResult(error=error_for(code or ErrorCode.unknown_server_error, None, str(tp)))
            else:
                out[tp] = ListOffsetsResult(int(p.offset), int(p.timestamp), int(getattr(p, "leader_epoch", -1)))
        return out

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int = 30000
    ) -> dict[TopicPartition, DeleteRecordsResult]:
        """Delete records before the given offsets (-1: the high watermark); the new low watermarks."""

        async def call(
            conn: KafkaConnection, group: dict[TopicPartition, int]
        ) -> dict[TopicPartition, tuple[int, Any]]:
            rb = conn.builder(ApiKey.DELETE_RECORDS, 0, 2)
            request = rb(
                topics=tuple(
                    rb.make(
                        "DeleteRecordsTopic",
                        name=topic,
                        partitions=tuple(
                            rb.make("DeleteRecordsPartition", partition_index=p, offset=o) for p, o in parts
                        ),
                    )
                    for topic, parts in group_by_topic(group.items()).items()
                ),
                timeout=_ms(timeout_ms),
            )
            response = await conn.send(request, timeout_ms=timeout_ms + self.request_timeout_ms)
            return {
                TopicPartition(t.name, int(p.partition_index)): (int(p.error_code), int(p.low_watermark))
                for t in response.topics
                for p in t.partitions
            }

        answers = await self.cluster.route(offsets, call)
        return {
            tp: DeleteRecordsResult(-1, error_for(code, None, str(tp))) if code else DeleteRecordsResult(int(low or 0))
            for tp, (code, low) in answers.items()
        }

    # --- cluster -----------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller id and live brokers (DescribeCluster; Metadata on older brokers)."""
        conn = await self.cluster.any_connection()
        if ApiKey.DESCRIBE_CLUSTER not in conn.api_versions:
            await self.cluster.refresh(topics=[])
            brokers = [
                (b.id, b.host, b.port, b.rack) for b in sorted(self.cluster.brokers.values(), key=lambda b: b.id)
            ]
            return ClusterDescription(self.cluster.cluster_id, self.cluster.controller_id, brokers)
        rb = conn.builder(ApiKey.DESCRIBE_CLUSTER, 0, 2)
        response = await conn.send(
            rb(include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False)
        )
        if response.error_code:
            raise error_for(response.error_code, response.error_message, "DescribeCluster")
        return ClusterDescription(
            cluster_id=response.cluster_id,
            controller_id=int(response.controller_id),
            brokers=sorted((int(b.broker_id), b.host, int(b.port), b.rack) for b in response.brokers),
        )


def _items(response: Any) -> tuple[Any, ...]:
    """The per-topic entries of a CreateTopics / DeleteTopics / CreatePartitions response."""
    for name in ("topics", "responses", "results"):
        if hasattr(response, name):
            return tuple(getattr(response, name))
    return ()
