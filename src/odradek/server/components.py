"""What a broker's start-up builds once its logs are loaded and its metadata store session is open.

:func:`build_components` makes, in dependency order, the producer id manager, the replica manager
and, over it, the group, transaction and share coordinators from their typed dependencies (each
coordinator's settings, its internal topic's partitions through :class:`ReplicaInternalLog`, the
metadata cache as their :class:`~odradek.coordinator.runtime.MetadataView`, internal-topic
creation, for the transaction coordinator producer ids and the marker channel, for the share
coordinator the metadata cache's topic ids and DeleteRecords on its partitions), then the share
persister (:class:`~odradek.share.persister.DefaultStatePersister`: the local share coordinator
for the keys this broker coordinates, inter-broker connections for the others). The result,
:class:`BrokerComponents`, is immutable; ``Broker`` reads it through typed properties and raises
:class:`BrokerNotStartedError` before start-up has built it. Event loop only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.client.security import ClientSecurity
from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.config import GroupCoordinatorConfig
from odradek.coordinator.group.consumer_membership import ConsumerGroupConfig
from odradek.coordinator.group.coordinator import GroupCoordinatorDeps
from odradek.coordinator.group.group_config import GroupConfigs
from odradek.coordinator.group.schemas import GROUP_METADATA_TOPIC
from odradek.coordinator.group.share_membership import ShareGroupConfig
from odradek.coordinator.runtime import CreateInternalTopic, ReplicaInternalLog, RuntimeDeps
from odradek.coordinator.share import ShareCoordinator, ShareCoordinatorConfig, ShareCoordinatorDeps
from odradek.coordinator.share.records import SHARE_GROUP_STATE_TOPIC
from odradek.coordinator.transaction import TransactionCoordinator
from odradek.coordinator.transaction.config import TransactionCoordinatorConfig
from odradek.coordinator.transaction.coordinator import TransactionCoordinatorDeps
from odradek.coordinator.transaction.markers import MarkerWriter
from odradek.coordinator.transaction.metadata import TRANSACTION_STATE_TOPIC
from odradek.metadata.authorizer import AclAuthorizer, is_acl_authorizer
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.store import CoordinationStore
from odradek.replication.fetcher import FetcherConfig
from odradek.replication.partition import IsrWriter
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.acl import ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG, SUPER_USERS_CONFIG
from odradek.server.config import KafkaConfig
from odradek.server.metadata_cache import MetadataCache
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.share.manager import SharePartitionManager, ShareSettings
from odradek.share.persister import DefaultStatePersister, MetadataLocator
from odradek.storage import LogManager, TopicPartition
from odradek.storage.config import LogConfig

__all__ = ["BrokerComponents", "BrokerNotStartedError", "build_components"]


class BrokerNotStartedError(RuntimeError):
    """A component that start-up builds was asked for before start-up built it."""


@dataclass(frozen=True, slots=True)
class BrokerComponents:
    """See the module docstring; fields in the order they are built."""

    zk: KafkaZkClient
    producer_ids: ProducerIdManager
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    share_coordinator: ShareCoordinator
    share_persister: DefaultStatePersister
    share_partitions: SharePartitionManager


def fetcher_config(config: KafkaConfig, security: ClientSecurity) -> FetcherConfig:
    """The replica fetchers' settings (``num.replica.fetchers``, ``replica.fetch.*``); their
    connections use ``security`` (the broker's inter-broker client security)."""
    return FetcherConfig(
        num_fetchers=config.get_int("num.replica.fetchers"),
        max_bytes=config.get_int("replica.fetch.max.bytes"),
        response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
        min_bytes=config.get_int("replica.fetch.min.bytes"),
        backoff_ms=config.get_int("replica.fetch.backoff.ms"),
        request_timeout_ms=config.get_int("replica.socket.timeout.ms"),
        security=security,
    )


def build_components(
    config: KafkaConfig,
    zk: KafkaZkClient,
    log_manager: LogManager,
    metadata_cache: MetadataCache,
    *,
    log_config_for: Callable[[str], LogConfig],
    isr_writer: IsrWriter,
    endpoint_for: Callable[[int], tuple[str, int] | None],
    create_internal_topic: CreateInternalTopic,
    local_address: Callable[[], tuple[str, int] | None],
    inter_broker_security: ClientSecurity,
    group_configs: GroupConfigs | None = None,
) -> BrokerComponents:
    """The components of broker ``config.broker_id``. ``log_config_for(topic)`` gives a topic's
    log config, ``isr_writer`` writes a leader's ISR change, ``endpoint_for(broker_id)`` is where
    followers fetch from, ``local_address()`` this broker's own (host, port) for its markers,
    ``inter_broker_security`` how the fetchers, the share persister and the transaction markers
    reach the other brokers (owned and closed by the caller, the broker),
    ``group_configs`` each group's configs (the group coordinator reads them)."""
    broker_id = config.broker_id
    replica_manager = ReplicaManager(
        broker_id,
        log_manager,
        log_config_for,
        io_threads=config.get_int("num.io.threads"),
        replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
        producer_id_expiration_ms=config.get_int("producer.id.expiration.ms"),
        isr_writer=isr_writer,
        endpoint_for=endpoint_for,
        fetcher_config=fetcher_config(config, inter_broker_security),
        partition_exists=lambda tp: metadata_cache.partition_state(tp) is not None,
    )
    producer_ids = ProducerIdManager(broker_id, zk)

    def runtime_deps(topic: str) -> RuntimeDeps:
        return RuntimeDeps(ReplicaInternalLog(replica_manager, topic), metadata_cache, create_internal_topic)

    share_config = ShareCoordinatorConfig.from_broker(config)
    share_coordinator = ShareCoordinator(
        ShareCoordinatorDeps(
            share_config,
            runtime_deps(SHARE_GROUP_STATE_TOPIC),
            metadata_cache,
            lambda p, offset: replica_manager.delete_records(TopicPartition(SHARE_GROUP_STATE_TOPIC, p), offset),
        )
    )
    share_persister = DefaultStatePersister(
        MetadataLocator(broker_id, share_coordinator.find_coordinator, endpoint_for, local_address),
        local=share_coordinator,
        local_broker_id=broker_id,
        security=inter_broker_security,
        client_id=f"broker-{broker_id}-share-persister",
        request_timeout_ms=share_config.write_timeout_ms + 5000,
    )
    group_coordinator = GroupCoordinator(
        GroupCoordinatorDeps(
            GroupCoordinatorConfig.from_broker(config),
            runtime_deps(GROUP_METADATA_TOPIC),
            ConsumerGroupConfig.from_broker(config),
            metadata_cache,
            group_configs=group_configs,
            share=ShareGroupConfig.from_broker(config),
            share_persister=share_persister,
        )
    )
    transaction_coordinator = TransactionCoordinator(
        TransactionCoordinatorDeps(
            TransactionCoordinatorConfig.from_broker(config),
            runtime_deps(TRANSACTION_STATE_TOPIC),
            producer_ids.generate_producer_id,
            MarkerWriter(broker_id, metadata_cache, local_address, inter_broker_security, endpoint_for),
        )
    )
    share_partitions = SharePartitionManager(
        replica_manager,
        share_persister,
        _share_settings(config, group_configs or GroupConfigs(config)),
        max_sessions=config.get_int("group.share.max.share.sessions"),
    )
    group_coordinator.share_groups.on_member_removed = share_partitions.member_removed
    coordinators = (group_coordinator, transaction_coordinator, share_coordinator)
    return BrokerComponents(zk, producer_ids, replica_manager, *coordinators, share_persister, share_partitions)


async def start_authorizer(config: KafkaConfig, store: CoordinationStore) -> AclAuthorizer | None:
    """Kafka's AclAuthorizer, loaded from the store and following its change folders, when
    ``authorizer.class.name`` names it; None when the key is blank (no authorization). The class
    name was checked when the configuration was read."""
    if not is_acl_authorizer(config["authorizer.class.name"]):
        return None
    authorizer = AclAuthorizer(
        store,
        {
            SUPER_USERS_CONFIG: str(config["super.users"] or ""),
            ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG: "true" if config["allow.everyone.if.no.acl.found"] else "false",
        },
    )
    await authorizer.start()
    return authorizer


def _share_settings(config: KafkaConfig, group_configs: GroupConfigs) -> Callable[[str], ShareSettings]:
    """A share group's settings: its group configs, and the broker's share-partition limits."""
    limit = config.get_int("group.share.delivery.count.limit")
    locks = config.get_int("group.share.partition.max.record.locks")
    return lambda group_id: ShareSettings.of(group_configs.get(group_id), limit, locks)
