"""Fakes of the services request handlers use (odradek.server.services.ApiServices), and a builder
of a handler's RequestContext from a kio request object: handler tests decode nothing from a
socket and start no broker."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any, cast

from odradek.coordinator.group.group import GroupSummary, MemberSummary
from odradek.coordinator.group.group_config import GroupConfigs
from odradek.coordinator.group.manager import OffsetFetchEntry
from odradek.errors import ErrorCode, KafkaError, TopicExistsError
from odradek.metadata.authorizer import AclAuthorizer
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol.codec import RequestHeader, api_schema
from odradek.replication.partition import PartitionState
from odradek.replication.replica_manager import FetchPartitionResult
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.server.client_quotas import ClientQuotas
from odradek.server.config import KafkaConfig
from odradek.server.dynamic_config import DynamicBrokerConfig
from odradek.server.fetch_context import FetchManager
from odradek.server.fetch_session import FetchSessionCache
from odradek.server.metadata_cache import TopicMetadata
from odradek.server.request import RequestContext
from odradek.server.services import ApiServices
from odradek.server.session import Session
from odradek.storage import TopicPartition

CONFIG = KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "broker.id": "1"})


class FakeMetadataCache:
    """Topics by name, each with the partitions given (led by broker 1, ISR [1]); broker 1 is live,
    reachable on every listener and the controller."""

    def __init__(self, topics: dict[str, int] | None = None) -> None:
        self.topics: dict[str, TopicMetadata] = {}
        self.brokers: dict[int, Any] = {1: BrokerInfo(1, "broker-1", 9092)}
        self.controller_id = 1
        self.topic_names: dict[uuid.UUID, str] = {}
        for name, count in (topics or {}).items():
            self.add(name, count)

    def add(self, name: str, partitions: int) -> None:
        states = {p: PartitionState(leader=1, leader_epoch=0, isr=[1], replicas=[1]) for p in range(partitions)}
        meta = TopicMetadata(name, uuid.uuid4(), states)
        self.topics[name] = meta
        self.topic_names[meta.topic_id] = name

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        meta = self.topics.get(tp.topic)
        return None if meta is None else meta.partitions.get(tp.partition)

    def brokers_on(self, _listener: str) -> dict[int, Any]:
        return dict(self.brokers)


@dataclass
class FakeReplicaManager:
    """Appends and offset lookups answered from ``offsets`` (partition -> next offset) or, for a
    partition in ``errors``, refused with that Kafka error."""

    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    errors: dict[TopicPartition, KafkaError] = field(default_factory=dict)
    appended: list[tuple[TopicPartition, bytes, int]] = field(default_factory=list)
    partitions: dict[TopicPartition, Any] = field(default_factory=dict)
    records: dict[TopicPartition, bytes] = field(default_factory=dict)
    fetched: list[tuple[list[Any], dict[str, Any]]] = field(default_factory=list)

    def _check(self, tp: TopicPartition) -> None:
        if tp in self.errors:
            raise self.errors[tp]

    async def append_produced_records(self, tp: TopicPartition, records: bytes, acks: int) -> Any:
        self._check(tp)
        self.appended.append((tp, records, acks))
        first = self.offsets.get(tp, 0)
        self.offsets[tp] = first + 1
        return SimpleNamespace(
            first_offset=first,
            last_offset=first,
            records_count=1,
            valid_bytes=len(records),
            log_start_offset=0,
            log_append_time=-1,
        )

    async def fetch_messages(self, requests: Any, **options: Any) -> list[FetchPartitionResult]:
        """Each requested partition's records (``records[tp]``, high watermark = its next offset)
        or its error; the requests and options are recorded in ``fetched``."""
        self.fetched.append((list(requests), options))
        results = []
        for r in requests:
            tp = r.topic_partition
            if tp in self.errors:
                results.append(FetchPartitionResult(tp, self.errors[tp].error_code))
            else:
                hw = self.offsets.get(tp, 0)
                results.append(FetchPartitionResult(tp, ErrorCode.none, hw, hw, 0, self.records.get(tp, b"")))
        return results

    def get_partition(self, tp: TopicPartition) -> Any:
        self._check(tp)
        return SimpleNamespace(leader_epoch=3, log=SimpleNamespace(log_start_offset=0))

    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int, isolation: int) -> tuple[int, int]:
        self._check(tp)
        return self.offsets.get(tp, 0), -1


@dataclass
class FakeGroupCoordinator:
    """Records what the handlers ask; answers with ``join_result`` / ``sync_result`` and commits
    every offset (``commit_error`` for each when set)."""

    join_result: Any = None
    sync_result: Any = None
    commit_error: ErrorCode = ErrorCode.none
    fetch_error: ErrorCode = ErrorCode.none
    committed: dict[TopicPartition, OffsetFetchEntry] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    async def join_group(self, request: Any) -> Any:
        self.calls.append(("join", request))
        return self.join_result

    async def sync_group(self, *args: Any) -> Any:
        self.calls.append(("sync", args))
        return self.sync_result

    async def commit_offsets(self, group: str, member: str, instance: str | None, generation: int, offsets: Any) -> Any:
        self.calls.append(("commit", (group, member, instance, generation, dict(offsets))))
        return dict.fromkeys(offsets, self.commit_error)

    def describe_group(self, group_id: str, api_version: int) -> Any:
        """A Stable group of one member whose metadata is 1 KiB; counts the calls."""
        self.calls.append(("describe", group_id))
        member = MemberSummary("m-1", None, "client", "/127.0.0.1", b"x" * 1024, b"")
        return ErrorCode.none, None, GroupSummary("Stable", "consumer", "range", (member,))

    def fetch_offsets(self, group: str, require_stable: bool, partitions: list[TopicPartition] | None) -> Any:
        """``(fetch_error, entries)``: ``committed`` for the partitions asked (every committed one
        for None), an empty entry for one without a commit, nothing at all with ``fetch_error``."""
        self.calls.append(("fetch", (group, require_stable, partitions)))
        if self.fetch_error is not ErrorCode.none:
            return self.fetch_error, {}
        wanted = list(self.committed) if partitions is None else partitions
        return ErrorCode.none, {tp: self.committed.get(tp, OffsetFetchEntry()) for tp in wanted}


@dataclass
class FakeAdmin:
    """The admin manager's topic calls: auto-creations and overrides recorded, overrides stored by
    topic in ``overrides``."""

    auto_created: list[str] = field(default_factory=list)
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    validated: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    created: list[tuple[str, int, int, dict[str, Any]]] = field(default_factory=list)

    async def maybe_auto_create(self, name: str, allowed: bool) -> ErrorCode:
        """Records the request; the topic is not created (LEADER_NOT_AVAILABLE, as while its leaders
        are elected), or UNKNOWN_TOPIC_OR_PARTITION when auto-creation is not allowed."""
        self.auto_created.append(name)
        return ErrorCode.leader_not_available if allowed else ErrorCode.unknown_topic_or_partition

    async def create_topic(self, name: str, num_partitions: int = -1, replication_factor: int = -1, **kw: Any) -> Any:
        """Assigns every partition to broker 1; a name in ``overrides`` exists already."""
        if name in self.overrides:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        self.created.append((name, num_partitions, replication_factor, kw))
        return {p: [1] * replication_factor for p in range(num_partitions)}, None

    async def topic_overrides(self, name: str) -> dict[str, str]:
        return dict(self.overrides.get(name, {}))

    async def set_topic_overrides(self, name: str, overrides: dict[str, str], validate_only: bool) -> None:
        if validate_only:
            self.validated.append((name, overrides))
        else:
            self.overrides[name] = overrides


@dataclass
class FakeZk:
    """The metadata store client: the topics it lists and the entity configs it holds (by
    ``(entity type, entity name)``)."""

    topics: set[str] = field(default_factory=set)
    entity_configs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    async def get_all_topics(self) -> set[str]:
        return set(self.topics)

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        return dict(self.entity_configs.get((entity_type, entity_name), {}))

    async def set_entity_configs(self, entity_type: str, entity_name: str, configs: dict[str, str]) -> None:
        self.entity_configs[(entity_type, entity_name)] = dict(configs)


@dataclass
class FakeServices:
    """The members of ApiServices the handler tests reach; the rest are absent on purpose (a
    handler reaching one fails its test with AttributeError)."""

    config: KafkaConfig = CONFIG
    broker_id: int = 1
    cluster_id: str = "cluster-1"
    endpoints: list[Any] = field(default_factory=list)
    authorizer: AclAuthorizer | None = None
    metadata_cache: FakeMetadataCache = field(default_factory=FakeMetadataCache)
    replica_manager: FakeReplicaManager = field(default_factory=FakeReplicaManager)
    group_coordinator: FakeGroupCoordinator = field(default_factory=FakeGroupCoordinator)
    admin: FakeAdmin = field(default_factory=FakeAdmin)
    zk: FakeZk = field(default_factory=FakeZk)
    dynamic_config: DynamicBrokerConfig = field(default_factory=lambda: DynamicBrokerConfig(CONFIG))
    client_quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas(11, 1))
    topic_stats: None = None
    schema_id_validator: None = None
    fetch_manager: FetchManager = field(default_factory=lambda: FetchManager(FetchSessionCache.sharded(1000, 120000)))
    group_configs: GroupConfigs = field(default_factory=lambda: GroupConfigs(CONFIG))


def context(
    services: FakeServices, api_key: int, version: int, request: Any, principal: KafkaPrincipal = ANONYMOUS
) -> RequestContext[Any]:
    """The context a handler gets for ``request`` (a kio request object of ``version``)."""
    header = RequestHeader(api_key, version, 7, "client-1", 0)
    session = Session(principal, "10.0.0.1", "PLAINTEXT", "PLAINTEXT")
    return RequestContext(
        cast(ApiServices, services), header, api_schema(api_key, version), request, "10.0.0.1:5", "c-1", session
    )


def call(handler: ModuleType, services: FakeServices, version: int, request: Any) -> Any:
    """``handler.handle`` (an odradek.server.apis module) run on ``request`` to its response."""
    return asyncio.run(handler.handle(context(services, handler.API_KEY, version, request)))
