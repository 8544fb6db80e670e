"""The services a request handler may use, as typed read-only views (Kafka's ``KafkaApis``
collaborators: replica manager, coordinators, metadata cache, authorizer, quotas, admin manager,
controller, metadata store client, configuration, fetch sessions).

:class:`ApiServices` is what :attr:`odradek.server.request.RequestContext.services` holds; a handler
in :mod:`odradek.server.apis` sees only these members, never the broker that implements them, and
unit tests hand in a fake with the members a handler touches. Every member is a read-only property,
read when the handler runs (not when the context is built), so a value start-up sets or a
re-registration changes (``controller``, ``broker_epoch``, ``cluster_id``, ``config`` after a
dynamic update) is current. Members that start-up builds (``zk``, ``replica_manager``, the
coordinators, ``producer_ids``) raise :class:`odradek.server.components.BrokerNotStartedError`
before start-up has built them; handlers that may run earlier (controller requests) check
``serving`` first or do not touch them.

:class:`HandlerServices` adds what the request dispatch (:mod:`odradek.server.request_handler`)
needs on top: the "start-up complete" event. All members are used from the broker's event loop only.

This module imports the services' types for annotations only, so it adds no import edge at run
time; the architecture test checks that no module of ``odradek.server`` imports the broker module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from odradek.controller.controller import KafkaController
    from odradek.coordinator.group import GroupCoordinator
    from odradek.coordinator.group.group_config import GroupConfigs
    from odradek.coordinator.share import ShareCoordinator
    from odradek.coordinator.transaction import TransactionCoordinator
    from odradek.metadata.authorizer import AclAuthorizer
    from odradek.metadata.kafka_zk_client import KafkaZkClient
    from odradek.metrics.broker_topic import BrokerTopicStats
    from odradek.replication.replica_manager import ReplicaManager
    from odradek.server.admin_manager import AdminManager
    from odradek.server.client_quotas import ClientQuotas
    from odradek.server.config import Endpoint, KafkaConfig
    from odradek.server.delegation_token_manager import DelegationTokenManager
    from odradek.server.fetch_context import FetchManager
    from odradek.server.metadata_cache import MetadataCache
    from odradek.server.producer_id_manager import ProducerIdManager
    from odradek.server.schema_validation import SchemaIdValidator
    from odradek.share.manager import SharePartitionManager

__all__ = ["ApiServices", "DynamicConfigLayers", "HandlerServices"]


class DynamicConfigLayers(Protocol):
    """The broker configuration's layers (Kafka's ``DynamicBrokerConfig``), highest priority first:
    this broker's dynamic keys, the cluster-wide dynamic defaults, the static properties."""

    @property
    def per_broker(self) -> dict[str, str]: ...

    @property
    def default(self) -> dict[str, str]: ...

    @property
    def static(self) -> KafkaConfig: ...


class ApiServices(Protocol):
    """What handlers in :mod:`odradek.server.apis` use; see the module docstring."""

    @property
    def config(self) -> KafkaConfig:
        """The broker's current configuration (replaced as a whole by a dynamic update)."""
        ...

    @property
    def broker_id(self) -> int: ...

    @property
    def cluster_id(self) -> str:
        """The cluster id from the metadata store; empty before start-up reads it."""
        ...

    @property
    def broker_epoch(self) -> int:
        """This broker's registration's epoch (KIP-380); -1 before it registers."""
        ...

    @property
    def endpoints(self) -> list[Endpoint]:
        """The listeners this broker bound (empty before start-up binds them)."""
        ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def group_coordinator(self) -> GroupCoordinator: ...

    @property
    def transaction_coordinator(self) -> TransactionCoordinator: ...

    @property
    def group_configs(self) -> GroupConfigs:
        """Each group's configs as this broker applies them (``/config/groups``)."""
        ...

    @property
    def share_coordinator(self) -> ShareCoordinator:
        """The share coordinator (KIP-932's ``__share_group_state``)."""
        ...

    @property
    def producer_ids(self) -> ProducerIdManager: ...

    @property
    def zk(self) -> KafkaZkClient: ...

    @property
    def admin(self) -> AdminManager:
        """Topic creation, deletion, partition additions and config changes in the metadata store."""
        ...

    @property
    def controller(self) -> KafkaController | None:
        """This broker's controller component (active or not); None before start-up builds it."""
        ...

    @property
    def authorizer(self) -> AclAuthorizer | None:
        """Kafka's AclAuthorizer; None when ``authorizer.class.name`` is blank (no authorization)."""
        ...

    @property
    def client_quotas(self) -> ClientQuotas: ...

    @property
    def token_manager(self) -> DelegationTokenManager:
        """The delegation tokens (KIP-48): create, renew, expire, describe."""
        ...

    @property
    def share_partition_manager(self) -> SharePartitionManager:
        """The share-partitions this broker leads and its share sessions (KIP-932)."""
        ...

    @property
    def fetch_manager(self) -> FetchManager:
        """The incremental fetch sessions (KIP-227) the Fetch handler keeps."""
        ...

    @property
    def topic_stats(self) -> BrokerTopicStats | None:
        """The per-topic byte and message meters; None without ``metrics.listener``."""
        ...

    @property
    def schema_id_validator(self) -> SchemaIdValidator | None:
        """Produce's check of ``confluent.value.schema.validation`` topics (:mod:`.schema_validation`);
        the broker always has one."""
        ...

    @property
    def dynamic_config(self) -> DynamicConfigLayers:
        """The dynamic broker config layers (per broker, cluster default) DescribeConfigs reports."""
        ...

    async def broker_overrides(self, name: str) -> dict[str, str]:
        """The stored dynamic keys of broker resource ``name`` (``""``: the cluster default),
        passwords decrypted."""
        ...

    async def set_broker_overrides(self, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
        """Validate and (unless ``validate_only``) store the complete dynamic keys of broker
        resource ``name`` and apply them here; raises the Kafka error a bad key or value gives."""
        ...


class HandlerServices(ApiServices, Protocol):
    """What the request dispatch needs besides :class:`ApiServices`."""

    @property
    def serving(self) -> asyncio.Event:
        """Set once start-up is complete; requests outside the start-up set wait for it."""
        ...
