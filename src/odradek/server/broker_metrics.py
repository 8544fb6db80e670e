"""The broker's metrics: what it counts, the collectors over its state, and the metrics listener.

Built by :class:`~odradek.server.broker.Broker` in its constructor; with ``metrics.listener``
unset nothing is counted and no listener is started (``topic_stats`` and ``request_metrics`` are
None; the request log still times requests when ``kafka.request.logger`` is enabled for DEBUG at
construction). With it set:

- the broker's hot paths count into :class:`~odradek.metrics.broker_topic.BrokerTopicStats`
  (Produce and Fetch handlers) and :class:`~odradek.metrics.request_metrics.RequestMetrics`
  (the socket server, through :class:`~odradek.server.request_log.RequestLog`);
- :meth:`BrokerMetrics.start` (at the end of start-up, once the broker is registered) registers
  the collectors of :mod:`odradek.metrics.collectors` and starts the event loop probe and the
  HTTP listener; :meth:`BrokerMetrics.stop` (first thing in shutdown) marks the broker not ready,
  then stops them (the listener goes last, so probes see 503 while the broker drains).

Readiness (``/health/ready``): start-up complete, not shutting down, every log dir online, and
``/brokers/ids/<broker.id>`` present in the metadata store and owned by this broker's session.
Each failed condition is the 503's reason.

The log cleaner's gauges are registered with :meth:`BrokerMetrics.register_cleaner` once a cleaner
exists (any object with ``max_dirty_percent``, ``time_since_last_run_ms`` and
``uncleanable_partitions_count``). Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry

from odradek.errors import InvalidConfigError
from odradek.metadata.store import WatchHandle
from odradek.metadata.znodes import BrokerIdZNode
from odradek.metrics.broker_topic import BrokerTopicStats
from odradek.metrics.collectors import (
    CleanerCollector,
    CleanerStats,
    ClientQuotaCollector,
    ConnectionCollector,
    ConsumerLagCollector,
    ControllerCollector,
    CoordinatorCollector,
    FetchSessionCacheCollector,
    LogCollector,
    ReplicaManagerCollector,
    SessionCollector,
)
from odradek.metrics.http import MetricsHttpServer, parse_listener
from odradek.metrics.loop_probe import EventLoopProbe
from odradek.metrics.loop_watchdog import LoopWatchdog
from odradek.metrics.request_metrics import RequestMetrics
from odradek.replication.replica_manager import LATEST_TIMESTAMP
from odradek.server.request_limits import LOOP_STALL_THRESHOLD_MS, setting
from odradek.server.request_log import REQUEST_LOGGER, RequestLog

if TYPE_CHECKING:
    from odradek.client.admin import AdminClient
    from odradek.client.security import ClientSecurity
    from odradek.controller.controller import KafkaController
    from odradek.metadata.store import CoordinationStore
    from odradek.server.client_quotas import ClientQuotas
    from odradek.server.components import BrokerComponents
    from odradek.server.config import Endpoint, KafkaConfig
    from odradek.server.fetch_context import FetchManager
    from odradek.server.socket_server import SocketServer
    from odradek.storage import LogManager

__all__ = ["BrokerMetrics"]

log = logging.getLogger(__name__)
READINESS_TIMEOUT_S = 2.0


class MetricsBroker(Protocol):
    """What the metrics read of their broker, when they are scraped or started (event loop)."""

    @property
    def config(self) -> KafkaConfig: ...

    @property
    def broker_id(self) -> int: ...

    @property
    def components(self) -> BrokerComponents: ...

    @property
    def socket_server(self) -> SocketServer: ...

    @property
    def log_manager(self) -> LogManager | None: ...

    @property
    def client_quotas(self) -> ClientQuotas: ...

    @property
    def controller(self) -> KafkaController | None: ...

    @property
    def fetch_manager(self) -> FetchManager: ...

    @property
    def store(self) -> CoordinationStore | None: ...

    @property
    def endpoints(self) -> list[Endpoint]: ...

    @property
    def inter_broker_security(self) -> ClientSecurity: ...

    @property
    def serving(self) -> asyncio.Event: ...


class BrokerMetrics:
    """See the module docstring."""

    def __init__(self, broker: MetricsBroker) -> None:
        self.broker = broker
        value = broker.config["metrics.listener"]
        self.address: tuple[str, int] | None = None
        if value:
            try:
                self.address = parse_listener(str(value))
            except ValueError as exc:
                raise InvalidConfigError(str(exc)) from None
        enabled = self.address is not None
        self.topic_stats = BrokerTopicStats() if enabled else None
        self.request_metrics = RequestMetrics() if enabled else None
        self.registry = CollectorRegistry(auto_describe=False)
        self.probe = EventLoopProbe()
        self.watchdog = LoopWatchdog(setting(broker.config, LOOP_STALL_THRESHOLD_MS) / 1000)
        """Logs event loop stalls; runs from the end of start-up whether or not metrics are enabled."""
        self.session = SessionCollector()
        self.http: MetricsHttpServer | None = None
        self.bound: tuple[str, int] | None = None
        """The listener's (host, port) once started."""
        self.stopping = False
        self._cleaner: CleanerCollector | None = None
        self._watch: WatchHandle | None = None
        self._lag: ConsumerLagCollector | None = None
        self._admin: AdminClient | None = None
        if enabled or REQUEST_LOGGER.isEnabledFor(logging.DEBUG):
            broker.socket_server.request_observer = RequestLog(self.request_metrics)

    def _register_collectors(self) -> None:
        broker = self.broker
        components = broker.components
        server = broker.socket_server
        assert broker.log_manager is not None and self.topic_stats is not None and self.request_metrics is not None
        self._lag = ConsumerLagCollector(components.group_coordinator, components.replica_manager)
        components.replica_manager.on_append = self.topic_stats.produced

        def connection_counts() -> dict[str, tuple[int, int, int]]:
            counts = {name: [0, n, server.closed.get(name, 0)] for name, n in server.accepted.items()}
            for conn in server.connections:
                counts.setdefault(conn.security.listener_name, [0, 0, 0])[0] += 1
            return {name: (v[0], v[1], v[2]) for name, v in counts.items()}

        quotas = broker.client_quotas

        def quota_rates() -> dict[str, list[tuple[str, str, float]]]:
            return {
                "kafka_server_produce_byte_rate": quotas.produce.measured(),
                "kafka_server_fetch_byte_rate": quotas.fetch.measured(),
                "kafka_server_request_request_time": quotas.request.measured(),
            }

        for collector in (
            self.topic_stats,
            self.request_metrics,
            self.probe,
            self.watchdog,
            self.session,
            ConnectionCollector(connection_counts),
            ClientQuotaCollector(quota_rates),
            ReplicaManagerCollector(components.replica_manager),
            FetchSessionCacheCollector(broker.fetch_manager.cache),
            LogCollector(broker.log_manager),
            ControllerCollector(lambda: broker.controller),
            CoordinatorCollector(components.group_coordinator, components.transaction_coordinator),
            self._lag,
        ):
            self.registry.register(collector)

    def register_cleaner(self, cleaner: CleanerStats) -> None:
        """Export the log cleaner's gauges (once; a second call replaces the first cleaner)."""
        if self._cleaner is not None:
            self.registry.unregister(self._cleaner)
        self._cleaner = CleanerCollector(cleaner)
        self.registry.register(self._cleaner)

    async def start(self) -> None:
        """Start the loop watchdog; register the collectors and start the probe and the listener
        (only the watchdog when disabled)."""
        self.watchdog.start()
        if self.address is None:
            return
        self._register_collectors()
        if self.broker.store is not None:
            self._watch = self.broker.store.watch_session(self.session.on_session_event)
        self.probe.start()
        self.http = MetricsHttpServer(self.registry, self.readiness, prepare=self.refresh_remote_high_watermarks)
        self.bound = await self.http.start(*self.address)
        log.info("broker %d serves metrics on http://%s:%d/metrics", self.broker.broker_id, *self.bound)

    async def stop(self) -> None:
        self.stopping = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        await self.probe.stop()
        self.watchdog.stop()
        if self.http is not None:
            await self.http.stop()
            self.http = None
        if self._admin is not None:
            await self._admin.close()
            self._admin = None

    async def refresh_remote_high_watermarks(self) -> None:
        """Before a scrape: the high watermarks (ListOffsets LATEST, read_uncommitted) of the
        partitions local groups committed to that have no replica here, asked of their leaders
        over the inter-broker listener. Partitions that fail keep their last known value."""
        lag = self._lag
        if lag is None:
            return
        missing = lag.missing()
        for gone in set(lag.remote_high_watermarks) - missing:
            del lag.remote_high_watermarks[gone]
        if not missing:
            return
        if self._admin is None:
            from odradek.client.admin import AdminClient  # only a cluster's scrapes need it: not at start-up

            broker = self.broker
            listener = broker.config.inter_broker_listener_name
            endpoint = next((e for e in broker.endpoints if e.listener == listener), broker.endpoints[0])
            self._admin = AdminClient(
                f"{endpoint.host}:{endpoint.port}",
                client_id=f"broker-{broker.broker_id}-metrics",
                request_timeout_ms=2000,
                retries=1,
                security=broker.inter_broker_security,
            )
        answers = await self._admin.list_offsets(dict.fromkeys(missing, LATEST_TIMESTAMP))
        for tp, result in answers.items():
            if result.error is None and result.offset >= 0:
                lag.remote_high_watermarks[tp] = result.offset

    async def readiness(self) -> str | None:
        """None when ready, else why not (see the module docstring)."""
        broker = self.broker
        if self.stopping:
            return "shutting down"
        if not broker.serving.is_set():
            return "starting up"
        if broker.log_manager is not None and broker.log_manager.offline_dirs:
            return "log dirs offline: " + ", ".join(sorted(map(str, broker.log_manager.offline_dirs)))
        store = broker.store
        if store is None:
            return "no metadata store session"
        try:
            stat = await asyncio.wait_for(store.exists(BrokerIdZNode.path(broker.broker_id)), READINESS_TIMEOUT_S)
        except Exception as exc:  # a lost ZooKeeper connection, a timeout
            return f"cannot read the broker registration: {exc or type(exc).__name__}"
        if stat is None:
            return f"not registered in /brokers/ids/{broker.broker_id}"
        if stat.ephemeral_owner != store.session_id:
            return f"/brokers/ids/{broker.broker_id} belongs to another session"
        return None
