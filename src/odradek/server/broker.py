"""A broker: the one place that wires storage, metadata, controller and the socket server.

Start-up (Kafka's ``KafkaServer.startup`` order):

1. validate the config; load and recover every partition log (``LogManager.load_logs``);
2. open the metadata store session: Apache ZooKeeper when ``zookeeper.connect`` is set,
   otherwise the embedded store in ``<first log dir>/metadata`` (or a store passed in, so several
   brokers in one process share one tree); create the top-level znodes; read or create the
   cluster id and check it against each log dir's ``meta.properties``;
3. build the replica manager (its ISR writes go through a :class:`ZkIsrWriter`) and, over it, the
   group, transaction and share coordinators from their typed dependencies, and the share persister
   (:class:`BrokerComponents`; other code reaches the persister as :attr:`Broker.share_persister`);
   wire the replica manager's hooks: a topic's config overrides read before LeaderAndIsr creates
   its first partition here, the leadership listeners (the coordinators) told of each change
   LeaderAndIsr and StopReplica make, deleted topics' overrides and metrics forgotten;
4. load the SCRAM credentials and follow ``/config/changes`` for users; build each listener's
   security (TLS context, SASL mechanisms and JAAS users); bind the listeners (port 0 picks a
   free port) and work out the advertised endpoints;
5. register ``/brokers/ids/<id>`` (ephemeral) and join the controller election;
6. start housekeeping: retention every ``log.retention.check.interval.ms``, flushes per
   ``log.flush.*``, checkpoints of recovery points and high watermarks.

Shutdown reverses it, ending with a clean-shutdown marker in every log dir so the next start
skips recovery. Everything runs on one asyncio event loop; storage calls are synchronous on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from odradek.client.security import inter_broker_client_security
from odradek.controller.channel import ControllerChannelManager
from odradek.controller.controller import KafkaController
from odradek.controller.events import Reelect
from odradek.coordinator.group import GroupCoordinator
from odradek.coordinator.group.group_config import GroupConfigs
from odradek.coordinator.runtime import LeadershipListener
from odradek.coordinator.share import ShareCoordinator
from odradek.coordinator.transaction import TransactionCoordinator
from odradek.metadata.authorizer import AclAuthorizer
from odradek.metadata.config_entities import ZkConfigManager
from odradek.metadata.config_znodes import ConfigType
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.errors import BrokerIdAlreadyRegisteredError
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.scram_credentials import CredentialCache
from odradek.metadata.store import CoordinationStore, SessionState, WatchHandle
from odradek.replication.isr_writer import ISR_CHANGE_PROPAGATION_MS, ZkIsrWriter
from odradek.replication.partition import Partition
from odradek.replication.quota import apply_topic_throttles
from odradek.replication.replica_manager import ReplicaManager
from odradek.security.delegation_token import TokenSettings
from odradek.server.admin_manager import AdminManager
from odradek.server.broker_metrics import BrokerMetrics
from odradek.server.client_quotas import ClientQuotas, quota_config_handlers
from odradek.server.components import BrokerComponents, BrokerNotStartedError, build_components, start_authorizer
from odradek.server.config import Endpoint, KafkaConfig
from odradek.server.controlled_shutdown import request_controlled_shutdown
from odradek.server.delegation_token_manager import DelegationTokenManager
from odradek.server.dynamic_config import (
    DynamicBrokerConfig,
    broker_overrides,
    register_broker_reconfigurables,
    set_broker_overrides,
)
from odradek.server.fetch_context import FetchManager
from odradek.server.fetch_session import FetchSessionCache
from odradek.server.listener_security import ListenerSecurity, listener_securities
from odradek.server.listeners import bind_listeners, controller_listener, registration
from odradek.server.log_dir_failure import LogDirFailureHandler
from odradek.server.meta_properties import check_meta_properties
from odradek.server.metadata_cache import MetadataCache
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.request_handler import RequestHandler
from odradek.server.scheduler import Scheduler
from odradek.server.schema_registry_host import BrokerSchemaRegistry
from odradek.server.schema_validation import SchemaIdValidator
from odradek.server.socket_server import SocketServer
from odradek.share.manager import SharePartitionManager
from odradek.share.persister import DefaultStatePersister
from odradek.storage import LogManager, TopicPartition
from odradek.storage.cleaner import CLEANER_KEYS, CleanerConfig, LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.topic_partition import parse_topic_partition_dir

if TYPE_CHECKING:
    from odradek.schema_registry.server import RegistryServer

log = logging.getLogger(__name__)

SHUTDOWN_STEP_TIMEOUT_S = 5
REGISTRATION_RETRY_S = 0.25
"""How often a registration held by another session is tried again (:meth:`Broker._register`)."""
"""Longest a shutdown step that talks to other brokers (fetchers, controller channel) may take."""


class Broker:
    def __init__(self, config: KafkaConfig, store: CoordinationStore | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.inter_broker_security = inter_broker_client_security(config)
        """How this broker's own connections (controller channel, controlled shutdown, replica
        fetchers, transaction markers, share persister, schema registry) reach the others'
        inter-broker listener. Owned by the broker: closed by :meth:`shutdown` (OAUTHBEARER's login)."""
        self._controller_security = self.inter_broker_security
        """The controller channel's (another listener's when ``control.plane.listener.name`` is set)."""
        self._external_store = store
        self.store: CoordinationStore | None = store
        self.schema_id_validator = SchemaIdValidator(
            lambda topic: self.topic_overrides.get(topic, {}),
            lambda topic: self.log_config_for(topic).max_message_bytes,
        )
        self.schema_registry_host = BrokerSchemaRegistry(self.broker_id, self._registry_started)
        self._embedded: EmbeddedStore | None = None
        self.metadata_cache = MetadataCache(config.inter_broker_listener_name)
        self.admin = AdminManager(self)
        self.handler = RequestHandler(self)
        self.socket_server = SocketServer(
            self.handler,
            config["socket.request.max.bytes"],
            config["queued.max.requests"],
            (config["socket.send.buffer.bytes"], config["socket.receive.buffer.bytes"]),
            max_connections=config["max.connections"],
            max_connections_per_ip=config["max.connections.per.ip"],
            max_connections_per_ip_overrides=config["max.connections.per.ip.overrides"] or "",
            connections_max_idle_ms=config["connections.max.idle.ms"],
            quota_samples=config["quota.window.num"],
            quota_window_s=config["quota.window.size.seconds"],
        )
        self.socket_server.quotas.configure_rates(config)
        self.socket_server.pipelined_produce_requests = config["odradek.produce.pipelined.requests"]
        self.metrics = BrokerMetrics(self)
        self.topic_stats = self.metrics.topic_stats  # None without metrics.listener: nothing counted
        self.log_manager: LogManager | None = None
        """Built and loaded first at start-up (shut down by :meth:`shutdown` even if start-up
        failed later)."""
        self.log_cleaner: LogCleaner | None = None
        """Compacts the logs with ``cleanup.policy=compact`` (started with the housekeeping tasks)."""
        self._components: BrokerComponents | None = None
        self._isr_writer: ZkIsrWriter | None = None
        """Writes the leaders' ISR changes and their notifications (built with the components)."""
        self.leadership_listeners: list[LeadershipListener] = []
        """Told about every partition this broker starts or stops leading (the coordinators)."""
        self.controller: KafkaController | None = None
        self.cluster_id = ""
        self.endpoints: list[Endpoint] = []
        self.credential_cache = CredentialCache()
        """SCRAM credentials of every user (``/config/users``), followed through ``/config/changes``."""
        self.token_manager = DelegationTokenManager(
            TokenSettings.from_values(config.__getitem__), self.credential_cache.tokens, broker_id=self.broker_id
        )
        """Delegation tokens (``/delegation_token``); their SCRAM credentials are the cache's ``tokens``."""
        self.listener_securities: dict[str, ListenerSecurity] = {}
        self._user_configs: ZkConfigManager | None = None
        self.dynamic_config = DynamicBrokerConfig(config)
        self.group_configs = GroupConfigs(config)
        """Each group's configs (``/config/groups``), followed through ``/config/changes``."""
        self.client_quotas = ClientQuotas(config["quota.window.num"], config["quota.window.size.seconds"])
        """``/config/brokers/<id>`` and ``<default>`` over ``server.properties``; swaps :attr:`config`."""
        self.fetch_manager = FetchManager(
            FetchSessionCache.sharded(
                config.get_int("max.incremental.fetch.session.cache.slots"),
                config.get_int("min.incremental.fetch.session.eviction.ms"),
            )
        )
        """The incremental fetch sessions (KIP-227) of the Fetch handler."""
        self.topic_overrides: dict[str, dict[str, str]] = {}
        self.broker_epoch = -1  # its registration's czxid (KIP-380): older ones are STALE_BROKER_EPOCH
        self._waited_for_registration = False
        self.authorizer: AclAuthorizer | None = None  # with authorizer.class.name, before the listeners
        self.scheduler = Scheduler(f"broker {self.broker_id}")
        """Retention, flush, checkpoints, ISR expiration and the other periodic tasks."""
        self._watches: list[WatchHandle] = []
        self.started = False
        self.serving = asyncio.Event()
        """Set once start-up is complete: client requests wait for it (Kafka's
        ``enableRequestProcessing``); the controller's requests are served from the moment the
        listeners are bound, since start-up waits for the first UpdateMetadata."""

    # --- what start-up builds ----------------------------------------------------------------

    @property
    def schema_registry(self) -> RegistryServer | None:
        """The registry served on ``schema.registry.listener`` (its own thread), once started."""
        return self.schema_registry_host.server

    def _registry_started(self, server: RegistryServer) -> None:
        self.schema_id_validator.registry = server

    @property
    def components(self) -> BrokerComponents:
        if self._components is None:
            raise BrokerNotStartedError(f"broker {self.broker_id} has not started")
        return self._components

    @property
    def zk(self) -> KafkaZkClient:
        return self.components.zk

    @property
    def producer_ids(self) -> ProducerIdManager:
        return self.components.producer_ids

    @property
    def replica_manager(self) -> ReplicaManager:
        return self.components.replica_manager

    @property
    def group_coordinator(self) -> GroupCoordinator:
        return self.components.group_coordinator

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        return self.components.transaction_coordinator

    @property
    def share_partition_manager(self) -> SharePartitionManager:
        return self.components.share_partitions

    @property
    def share_coordinator(self) -> ShareCoordinator:
        return self.components.share_coordinator

    @property
    def share_persister(self) -> DefaultStatePersister:
        """How share-partition leaders keep their state (KIP-932's ``Persister``)."""
        return self.components.share_persister

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{e.host}:{e.port}" for e in self.endpoints[:1])

    async def startup(self) -> None:
        t0 = time.monotonic()
        for d in self.config.log_dirs:
            os.makedirs(d, exist_ok=True)
        store = await self._open_store()
        zk = KafkaZkClient(store)
        await zk.create_top_level_paths()
        self.log_manager = LogManager(self.config.log_dirs, self.config.default_log_config())
        self.log_manager.load_logs(await self._topic_configs_on_disk(zk))
        self.cluster_id = await zk.get_or_create_cluster_id()
        check_meta_properties(self.config.log_dirs, self.broker_id, self.cluster_id)
        self.authorizer = await start_authorizer(self.config, store)
        self._isr_writer = ZkIsrWriter(self.broker_id, zk)
        self._components = components = build_components(
            self.config,
            zk,
            self.log_manager,
            self.metadata_cache,
            log_config_for=self.log_config_for,
            isr_writer=self._isr_writer.write_isr,
            endpoint_for=self._inter_broker_endpoint,
            create_internal_topic=self.admin.create_internal_topic,
            local_address=self._local_address,
            inter_broker_security=self.inter_broker_security,
            group_configs=self.group_configs,
        )
        self.leadership_listeners += [
            components.group_coordinator,
            components.transaction_coordinator,
            components.share_coordinator,
            components.share_partitions,
        ]
        self.socket_server.close_listeners.append(components.share_partitions.connection_closed)
        rm = components.replica_manager
        self.fetch_manager.watchers = rm.fetch_watchers  # sessions read what changed, not all they hold
        rm.topic_config_loader = self._load_topic_config
        rm.on_leadership_change = self._notify_leadership
        rm.on_topics_deleted = self._forget_deleted_topics
        register_broker_reconfigurables(self)
        handlers = quota_config_handlers(self.client_quotas, self.credential_cache.process_config_changes)
        handlers[ConfigType.BROKER] = self.dynamic_config.process_config_changes
        handlers[ConfigType.IP] = self.socket_server.quotas.ip_config_changed
        handlers[ConfigType.GROUP] = self.group_configs.process_config_changes
        self._user_configs = ZkConfigManager(store, handlers)
        await self._user_configs.startup()
        await self.token_manager.startup(store)
        self.listener_securities = listener_securities(self.config, self.credential_cache)
        self.endpoints = await bind_listeners(self.socket_server, self.config, self.listener_securities)
        await self.reload_broker_throttles()
        self._watches.append(store.watch_children("/config/changes", self._on_config_change))
        await self._register()
        failures = LogDirFailureHandler(self.broker_id, zk, self.log_manager)
        components.replica_manager.on_log_dir_failure = failures.on_failure
        await failures.notify_if_offline()
        self._watches.append(store.watch_session(self._on_session_event))
        listener, security = controller_listener(self.config, self.inter_broker_security)
        self._controller_security = security
        self.controller = KafkaController(
            self.broker_id,
            zk,
            ControllerChannelManager(
                self.broker_id, listener, self.config.get_int("controller.socket.timeout.ms"), security
            ),
            self.config.get_bool("unclean.leader.election.enable"),
        )
        await self.controller.startup()
        await self.admin.wait_for_metadata(lambda: self.broker_id in self.metadata_cache.brokers, 5000)
        self._start_housekeeping()
        self._start_replication_tasks()
        await components.group_coordinator.startup()
        await components.transaction_coordinator.startup()
        await components.share_coordinator.startup()
        self.started = True
        self.serving.set()
        await self.metrics.start()
        await self.schema_registry_host.start(
            self.config, self._local_address(), self.inter_broker_security, self.endpoints
        )
        log.info(
            "broker %d started in %.0f ms, listening on %s (cluster %s)",
            self.broker_id,
            (time.monotonic() - t0) * 1000,
            ", ".join(map(str, self.endpoints)),
            self.cluster_id,
        )

    async def _topic_configs_on_disk(self, zk: KafkaZkClient) -> dict[str, LogConfig]:
        """The ``LogConfig`` of every topic with a partition directory in a log dir, its overrides read
        from ``/config/topics/<topic>`` (Kafka's ``LogManager`` start-up): a compacted topic is loaded
        compacted, and retention never runs on a restarted log with the broker's defaults."""
        topics: set[str] = set()
        for d in self.config.log_dirs:
            try:
                names = [child.name for child in os.scandir(d) if child.is_dir()]
            except OSError:
                continue  # the log manager reports the directory and takes it offline
            topics.update(tp.topic for name in names if (tp := parse_topic_partition_dir(name)) is not None)
        for topic in topics:
            self.topic_overrides[topic] = await zk.get_entity_configs("topics", topic)
        return {topic: self.log_config_for(topic) for topic in topics}

    def _local_address(self) -> tuple[str, int] | None:
        """This broker's advertised (host, port) on the inter-broker listener (else its first);
        None before the listeners are bound."""
        for e in self.endpoints:
            if e.listener == self.config.inter_broker_listener_name:
                return (e.host, e.port)
        return (self.endpoints[0].host, self.endpoints[0].port) if self.endpoints else None

    async def _register(self) -> None:
        """``/brokers/ids/<id>`` (see :func:`~odradek.server.listeners.registration`).

        A registration held by another session may be this broker's previous process, killed
        before its session ended: ZooKeeper removes it once that session expires, so the
        registration is retried for up to 1.5 session timeouts (logged once) before it fails as a
        duplicate ``broker.id``. Without the wait a broker restarted within the session timeout
        of a crash would refuse to start."""
        info = registration(self.config, self.endpoints)
        deadline = time.monotonic() + 1.5 * self.config["zookeeper.session.timeout.ms"] / 1000
        while True:
            try:
                self.broker_epoch = await self.zk.register_broker(info)
                return
            except BrokerIdAlreadyRegisteredError:
                if time.monotonic() >= deadline:
                    raise
                if not self._waited_for_registration:
                    self._waited_for_registration = True
                    log.warning(
                        "broker id %d is registered by another session (a previous process of this broker?); "
                        "waiting for it to expire",
                        self.broker_id,
                    )
                await asyncio.sleep(REGISTRATION_RETRY_S)

    async def _on_session_event(self, state: SessionState) -> None:
        """After a session expiry our ephemeral znodes are gone: register again and rejoin the
        controller election (Kafka's ``SessionExpirationListener``)."""
        if state is SessionState.SUSPENDED:
            log.warning("broker %d lost its metadata store connection; waiting to reconnect", self.broker_id)
        elif state is SessionState.EXPIRED:
            log.warning("broker %d metadata store session expired; registering again", self.broker_id)
            try:
                await self._register()
            except Exception:
                log.exception("broker %d could not register again after session expiry", self.broker_id)
            if self.controller is not None:
                self.controller.put(Reelect())

    async def _open_store(self) -> CoordinationStore:
        """The store passed in, else a new session of the configured one (``self.store``)."""
        if self.store is not None:
            return self.store
        connect = self.config.zookeeper_connect
        if connect:
            from odradek.metadata.zookeeper import ZooKeeperStore

            timeout = self.config["zookeeper.connection.timeout.ms"] or self.config["zookeeper.session.timeout.ms"]
            zk_store = ZooKeeperStore(
                connect,
                session_timeout_ms=self.config["zookeeper.session.timeout.ms"],
                connection_timeout_ms=timeout,
                sasl=self.config.zookeeper_sasl,
                secure_acls=self.config["zookeeper.set.acl"],
                tls=self.config.zookeeper_tls.ssl_context(),
            )
            await zk_store.start()
            self.store = zk_store
        else:
            self._embedded = EmbeddedStore(os.path.join(self.config.log_dirs[0], "metadata"))
            self.store = self._embedded.session()
        return self.store

    def _start_housekeeping(self) -> None:
        lm = self.log_manager
        assert lm is not None
        self.scheduler.every(self.config["log.retention.check.interval.ms"], lm.cleanup_logs, "retention")
        flush_ms = min(self.config["log.flush.scheduler.interval.ms"], 2**31)
        if flush_ms < 2**31:
            self.scheduler.every(flush_ms, lm.flush_dirty_logs, "flush")
        self.scheduler.every(
            self.config["log.flush.offset.checkpoint.interval.ms"], lambda _now: lm.checkpoint(), "checkpoint"
        )
        self.log_cleaner = LogCleaner(
            self._cleaner_config(self.config),
            lm.all_logs,
            last_stable_offset=self.replica_manager.cleaner_upper_bound,
            retain_offsets=self.replica_manager.producer_last_offsets,
            log_dir_failure=lm.fail_dir,
        )
        self.log_cleaner.startup()
        self.metrics.register_cleaner(self.log_cleaner)

    @staticmethod
    def _cleaner_config(config: KafkaConfig) -> CleanerConfig:
        return CleanerConfig.from_props({k: config[k] for k in CLEANER_KEYS})

    async def reconfigure_log_cleaner(self, _old: KafkaConfig, new: KafkaConfig) -> None:
        """A dynamic ``log.cleaner.*`` change (``/config/brokers``): the cleaner restarts with it.
        Before start-up made the cleaner, nothing to do: it is made from the effective config."""
        if self.log_cleaner is not None:
            await self.log_cleaner.reconfigure(self._cleaner_config(new))

    def _start_replication_tasks(self) -> None:
        """ISR shrink every half ``replica.lag.time.max.ms`` (Kafka's isr-expiration task) and ISR
        change notifications every ``ISR_CHANGE_PROPAGATION_MS`` (isr-change-propagation)."""
        rm = self.replica_manager
        lag_ms = self.config.get_int("replica.lag.time.max.ms")
        self.scheduler.every(max(lag_ms // 2, 10), rm.maybe_shrink_isr, "isr-expiration")
        isr_writer = self._isr_writer
        assert isr_writer is not None
        self.scheduler.every(
            ISR_CHANGE_PROPAGATION_MS,
            lambda _now: isr_writer.propagate_isr_changes(rm.isr_changed),
            "isr-change-propagation",
        )
        self.scheduler.every(
            self.config.get_int("producer.id.expiration.check.interval.ms"), rm.expire_producers, "pid-expiry"
        )
        if self.config["auto.leader.rebalance.enable"]:
            percentage = self.config.get_int("leader.imbalance.per.broker.percentage")
            self.scheduler.every(
                self.config.get_int("leader.imbalance.check.interval.seconds") * 1000,
                lambda _now: self.controller.maybe_rebalance_leaders(percentage) if self.controller else None,
                "auto-leader-rebalance",
            )

    def _inter_broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where to reach ``broker_id`` on the inter-broker listener, from UpdateMetadata."""
        info = self.metadata_cache.brokers.get(broker_id)
        if info is None:
            return None
        return info.endpoint_map().get(self.config.inter_broker_listener_name)

    async def controlled_shutdown(self) -> bool:
        """Kafka's ``controlledShutdown`` (:func:`odradek.server.controlled_shutdown.request_controlled_shutdown`):
        the fetchers stop first, then the controller is asked to move every leadership away."""
        cfg = self.config
        if not cfg["controlled.shutdown.enable"] or cfg["zookeeper.connect"] is None:
            return False
        if len(self.metadata_cache.brokers) <= 1:
            return True
        # A follower that kept fetching would be taken back into the ISRs the controller shrinks,
        # and acks=all writes would wait for it until replica.lag.time.max.ms.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.replica_manager.shutdown_fetchers(), SHUTDOWN_STEP_TIMEOUT_S)
        return await request_controlled_shutdown(
            cfg,
            self.broker_id,
            self.broker_epoch,
            lambda: self.metadata_cache.controller_id,
            self._inter_broker_endpoint,
            self.inter_broker_security,
        )

    async def shutdown(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        self.metrics.stopping = True  # /health/ready answers 503 from now on
        if self.started:
            with contextlib.suppress(Exception):
                await self.controlled_shutdown()
        components = self._components
        if components is not None:
            components.share_partitions.close()  # lock timers; the state is already durable
            stops = (components.share_persister.close, components.share_coordinator.shutdown)
            for stop in (*stops, components.transaction_coordinator.shutdown, components.group_coordinator.shutdown):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(stop(), SHUTDOWN_STEP_TIMEOUT_S)
        await self.schema_registry_host.stop()
        await self.socket_server.stop()
        await self.metrics.stop()
        if self.log_cleaner is not None:
            try:
                await asyncio.wait_for(self.log_cleaner.shutdown(), SHUTDOWN_STEP_TIMEOUT_S)
            except Exception:
                log.warning("broker %d: the log cleaner did not stop cleanly", self.broker_id, exc_info=True)
            self.log_cleaner = None
        if self.authorizer is not None:
            with contextlib.suppress(Exception):
                await self.authorizer.close()
        with contextlib.suppress(Exception):
            await self.token_manager.shutdown()
        await self.scheduler.shutdown()
        for handle in self._watches:
            handle.cancel()
        self._watches.clear()
        if self._user_configs is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._user_configs.shutdown(), SHUTDOWN_STEP_TIMEOUT_S)
            self._user_configs = None
        if self.controller is not None:
            try:
                await asyncio.wait_for(self.controller.shutdown(), SHUTDOWN_STEP_TIMEOUT_S)
            except TimeoutError:
                log.warning("broker %d: the controller did not stop in %d s", self.broker_id, SHUTDOWN_STEP_TIMEOUT_S)
        if components is not None:
            try:
                await asyncio.wait_for(components.replica_manager.shutdown_fetchers(), SHUTDOWN_STEP_TIMEOUT_S)
            except TimeoutError:
                log.warning("broker %d: replica fetchers did not stop in %d s", self.broker_id, SHUTDOWN_STEP_TIMEOUT_S)
            components.replica_manager.shutdown()
        if (self.store is not None and self._external_store is None) or self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.close()
        if self._embedded is not None:  # releases the data dir's store lock, so a restart can open it
            with contextlib.suppress(Exception):
                await self._embedded.close()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        await self.close_securities()
        self.started = False
        log.info("broker %d shut down", self.broker_id)

    async def close_securities(self) -> None:
        """Release the inter-broker (and control plane) client security: OAUTHBEARER's login stops
        refreshing once no other user holds it. Last step of :meth:`shutdown`, when no connection
        of this broker is left."""
        for security in {id(s): s for s in (self._controller_security, self.inter_broker_security)}.values():
            with contextlib.suppress(Exception):
                await security.aclose()

    # --- broker configs (AlterConfigs, IncrementalAlterConfigs) -------------------------------

    async def broker_overrides(self, name: str) -> dict[str, str]:
        return await broker_overrides(self, name)

    async def set_broker_overrides(self, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
        await set_broker_overrides(self, name, overrides, validate_only)

    # --- topic configs -----------------------------------------------------------------------

    def log_config_for(self, topic: str) -> LogConfig:
        return LogConfig.from_props(self.topic_overrides.get(topic), self.config.log_config_defaults())

    async def reload_topic_config(self, topic: str) -> None:
        self.topic_overrides[topic] = await self.zk.get_entity_configs("topics", topic)
        self.replica_manager.update_log_config(topic)
        self._apply_topic_throttles(topic)

    def _apply_topic_throttles(self, topic: str) -> None:
        """The topic's ``*.replication.throttled.replicas`` that name this broker (see replication/quota.py)."""
        rm = self.replica_manager
        quotas = {"leader": rm.leader_quota, "follower": rm.follower_quota}
        overrides = self.topic_overrides.get(topic, {})
        for side, partitions in apply_topic_throttles(quotas, topic, overrides, self.broker_id):
            shown = "all" if partitions is None else sorted(partitions)
            log.info("broker %d: %s throttle on %s partitions %s", self.broker_id, side, topic, shown)

    async def reload_broker_throttles(self) -> None:
        """``*.replication.throttled.rate`` from the effective config (dynamic keys included)."""
        rm = self.replica_manager
        for side, quota in (("leader", rm.leader_quota), ("follower", rm.follower_quota)):
            rate = int(self.config[f"{side}.replication.throttled.rate"])
            if rate != quota.rate:
                log.info("broker %d: %s.replication.throttled.rate = %d", self.broker_id, side, rate)
                quota.rate = rate
            quota.samples = self.config.get_int("replication.quota.window.num")
            quota.window_s = self.config.get_float("replication.quota.window.size.seconds")

    async def _on_config_change(self, _path: str) -> None:
        for topic in {tp.topic for tp in self.replica_manager.partitions}:
            await self.reload_topic_config(topic)

    # --- the replica manager's hooks ----------------------------------------------------------
    #
    # The controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica: server/apis/) are
    # applied by the replica manager (odradek.replication.state_change), which calls these.

    def _notify_leadership(self, tp: TopicPartition, partition: Partition | None) -> None:
        """Tell the leadership listeners that this broker now leads ``tp`` (``partition`` is
        its leader replica) or no longer does (a follower replica, or None: stopped)."""
        for listener in self.leadership_listeners:
            if partition is not None and partition.is_leader:
                listener.on_become_leader(tp, partition.leader_epoch)
            else:
                listener.on_become_follower(tp)

    async def _load_topic_config(self, topic: str) -> None:
        """Before LeaderAndIsr changes a partition of ``topic``: its overrides from
        ``/config/topics/<topic>`` and its replication throttles, unless already known."""
        if topic not in self.topic_overrides:
            self.topic_overrides[topic] = await self.zk.get_entity_configs("topics", topic)
            self._apply_topic_throttles(topic)

    def _forget_deleted_topics(self, topics: set[str]) -> None:
        """After a StopReplica that deleted partitions of ``topics``: their overrides are read
        again if they come back; a topic with no replica left here loses its metrics, as Kafka's."""
        for topic in topics:
            self.topic_overrides.pop(topic, None)
            if self.topic_stats is not None and not self.replica_manager.hosts_topic(topic):
                self.topic_stats.remove_topic(topic)
