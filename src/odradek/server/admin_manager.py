"""Topic administration (Kafka's ``ZkAdminManager``): create, delete, add partitions, configs.

Writes go to the metadata store only; the controller notices them (watches on
``/brokers/topics`` and ``/admin/delete_topics``), elects leaders and tells the brokers.
Operations that clients expect to be visible when they return (CreateTopics, auto-creation,
DeleteTopics, CreatePartitions) then wait, up to the request's timeout, until this broker's
metadata cache shows the result.

Validation as Kafka: topic names of 1..249 characters from ``[a-zA-Z0-9._-]``, not ``.`` or
``..``; partitions >= 1; replication factor between 1 and the number of live brokers; explicit
assignments must name live brokers, without duplicates, all partitions the same size; configs are
checked against the topic config table.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from odradek.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.server.policies import AlterConfigRequest, CreateTopicRequest, Policies
from odradek.server.replica_assignment import assign_replicas, check_replication_factor
from odradek.server.request_limits import PartitionLimits
from odradek.storage.config import TOPIC_CONFIGS, LogConfig

if TYPE_CHECKING:
    from odradek.metadata.kafka_zk_client import KafkaZkClient
    from odradek.server.config import KafkaConfig
    from odradek.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )


class AdminBroker(Protocol):
    """What the admin manager uses of its broker (read when used, on the event loop)."""

    @property
    def config(self) -> KafkaConfig: ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def zk(self) -> KafkaZkClient: ...

    async def reload_topic_config(self, topic: str) -> None: ...


class AdminManager:
    def __init__(self, broker: AdminBroker) -> None:
        self.broker = broker
        self.limits = PartitionLimits(broker.config, broker.metadata_cache)
        """What one topic may add and the cluster may hold (:mod:`odradek.server.request_limits`)."""
        config = broker.config
        self.policies = Policies(config if isinstance(config, Mapping) else config.values)
        """``create.topic.policy.class.name`` and ``alter.config.policy.class.name``."""

    @property
    def config(self) -> KafkaConfig:
        return self.broker.config

    async def _live_brokers(self) -> list[int]:
        return [b.id for b in await self.broker.zk.get_all_brokers()]

    async def _racks(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in await self.broker.zk.get_all_brokers()}

    # --- create ------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
        timeout_ms: int = 30000,
    ) -> tuple[dict[int, list[int]], LogConfig]:
        """Create a topic (or only validate it). Returns (assignment, effective config).

        Raises TopicExistsError, InvalidTopicError, InvalidPartitionsError,
        InvalidReplicationFactorError, InvalidConfigError, InvalidRequestError.
        """
        validate_topic_name(name)
        live = await self._live_brokers()
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time."
                )
            partitions, rf = len(assignments), len(next(iter(assignments.values())))
        else:
            partitions = self.config["num.partitions"] if num_partitions == -1 else num_partitions
            rf = self.config["default.replication.factor"] if replication_factor == -1 else replication_factor
            if partitions < 1:
                raise InvalidPartitionsError(f"Number of partitions must be larger than 0, got {partitions}.")
            if rf < 1:
                raise InvalidReplicationFactorError(f"Replication factor must be larger than 0, got {rf}.")
            check_replication_factor(rf, len(live))
        with self.limits.reserve(name, partitions, rf, len(live)):
            if assignments:
                assignment = {int(p): [int(r) for r in rs] for p, rs in assignments.items()}
                self._validate_assignment(assignment, live, 0)
            else:
                assignment = assign_replicas(live, partitions, rf, racks=await self._racks())
            overrides = {k: v for k, v in (configs or {}).items() if v is not None}
            log_config = LogConfig.from_props(overrides, self.config.log_config_defaults())
            if name in await self.broker.zk.get_all_topics():
                raise TopicExistsError(f"Topic '{name}' already exists.")
            explicit = bool(assignments)
            self.policies.check_create_topic(
                CreateTopicRequest(
                    name,
                    None if explicit else partitions,
                    None if explicit else rf,
                    assignment if explicit else None,
                    overrides,
                )
            )
            if validate_only:
                return assignment, log_config
            await self.broker.zk.create_topic_assignment(name, assignment, overrides)
            log.info("created topic %s with %d partitions", name, len(assignment))
            await self.wait_for_metadata(lambda: self._has_leaders(name, len(assignment)), timeout_ms)
        return assignment, log_config

    def _has_leaders(self, name: str, partitions: int) -> bool:
        meta = self.broker.metadata_cache.topic(name)
        return (
            meta is not None
            and len(meta.partitions) >= partitions
            and all(s.leader >= 0 for s in meta.partitions.values())
        )

    @staticmethod
    def _validate_assignment(assignment: Mapping[int, Sequence[int]], live: Sequence[int], first: int) -> None:
        if sorted(assignment) != list(range(first, first + len(assignment))):
            raise InvalidPartitionsError("Partitions should be a consecutive 0-based integer sequence")
        sizes = {len(rs) for rs in assignment.values()}
        if len(sizes) > 1:
            raise InvalidReplicationFactorError("All partitions should have the same number of replicas")
        for p, replicas in assignment.items():
            if not replicas:
                raise InvalidReplicationFactorError(f"Partition {p} has no replicas")
            if len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(
                    f"Duplicate brokers not allowed in replica assignment: {replicas} for partition {p}"
                )
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker(s) {unknown} in replica assignment of partition {p}"
                )

    async def maybe_auto_create(self, name: str, allowed: bool) -> ErrorCode:
        """Auto-create ``name`` if the broker and request allow it; the error code to answer
        while the topic is not (yet) there."""
        try:
            validate_topic_name(name)
        except InvalidTopicError:
            return ErrorCode.invalid_topic_exception
        if not (allowed and self.config["auto.create.topics.enable"]) or name.startswith("__"):
            return ErrorCode.unknown_topic_or_partition
        try:
            await self.create_topic(name, timeout_ms=3000)
        except TopicExistsError:
            await self.wait_for_metadata(lambda: self.broker.metadata_cache.topic(name) is not None, 3000)
        except KafkaError as exc:
            log.warning("auto-creation of topic %s failed: %s", name, exc)
            return exc.error_code
        return ErrorCode.none if self.broker.metadata_cache.topic(name) else ErrorCode.leader_not_available

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        """Create an internal topic (``__consumer_offsets``...) if missing, RF capped at live brokers."""
        if self.broker.metadata_cache.topic(name) is not None or name in await self.broker.zk.get_all_topics():
            return
        live = await self._live_brokers()
        rf = max(1, min(replication_factor, len(live)))
        try:
            await self.create_topic(name, partitions, rf, configs=configs)
        except TopicExistsError:
            pass

    # --- delete ------------------------------------------------------------------------------

    async def delete_topic(self, name: str, timeout_ms: int = 30000) -> None:
        if not self.config["delete.topic.enable"]:
            raise TopicDeletionDisabledError("Topic deletion is disabled (delete.topic.enable=false).")
        if name not in await self.broker.zk.get_all_topics():
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        await self.broker.zk.request_topic_deletion(name)
        await self.wait_for_metadata(lambda: self.broker.metadata_cache.topic(name) is None, timeout_ms)

    # --- partitions --------------------------------------------------------------------------

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        validate_only: bool,
        timeout_ms: int = 30000,
    ) -> None:
        try:
            validate_topic_name(name)  # no znode path can hold an illegal name
        except InvalidTopicError:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.") from None
        current, topic_id = await self.broker.zk.get_topic_assignment(name)
        if current is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        existing = len(current)
        if count < existing:
            raise InvalidPartitionsError(
                f"Topic currently has {existing} partitions, which is higher than the requested {count}."
            )
        if count == existing:
            raise InvalidPartitionsError(f"Topic already has {existing} partitions.")
        rf = len(next(iter(current.values())))
        live = await self._live_brokers()
        with self.limits.reserve(name, count - existing, rf, len(live)):
            await self._add_partitions(name, current, topic_id, count, assignments, live, validate_only, timeout_ms)

    async def _add_partitions(
        self,
        name: str,
        current: Mapping[int, Sequence[int]],
        topic_id: uuid.UUID,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        live: Sequence[int],
        validate_only: bool,
        timeout_ms: int,
    ) -> None:
        existing = len(current)
        rf = len(next(iter(current.values())))
        if assignments:
            if len(assignments) != count - existing:
                raise InvalidRequestError(
                    f"Increasing the number of partitions by {count - existing} but {len(assignments)} "
                    "assignments provided."
                )
            new = {existing + i: [int(r) for r in rs] for i, rs in enumerate(assignments)}
            self._validate_assignment(new, live, existing)
            if len(next(iter(new.values()))) != rf:
                raise InvalidReplicationFactorError(
                    f"Inconsistent replication factor between partitions, partition 0 has {rf}"
                )
        else:
            new = assign_replicas(live, count - existing, rf, start_partition=existing, racks=await self._racks())
        if validate_only:
            return
        merged = {**current, **new}
        await self.broker.zk.set_topic_assignment(name, merged, topic_id)
        await self.wait_for_metadata(lambda: self._has_leaders(name, count), timeout_ms)

    # --- configs -----------------------------------------------------------------------------

    async def topic_overrides(self, name: str) -> dict[str, str]:
        return await self.broker.zk.get_entity_configs("topics", name)

    async def set_topic_overrides(self, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
        """Replace a topic's overrides (validated) and notify brokers of the change."""
        if self.broker.metadata_cache.topic(name) is None and name not in await self.broker.zk.get_all_topics():
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        for key, value in overrides.items():
            if key not in TOPIC_CONFIGS:
                raise InvalidConfigError(f"Unknown topic config name: {key}")
            TOPIC_CONFIGS.validate_one(key, value)
        self.policies.check_alter_config(AlterConfigRequest("TOPIC", name, dict(overrides)))
        if validate_only:
            return
        await self.broker.zk.set_entity_configs("topics", name, dict(overrides))
        await self.broker.reload_topic_config(name)

    async def wait_for_metadata(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        """Poll ``predicate`` (every 5 ms) until true or ``timeout_ms`` passes; returns whether it became true."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        while not predicate():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.005)
        return True
