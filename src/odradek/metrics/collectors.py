"""Collectors that read the broker's state at scrape time (Kafka's gauges), named as the JMX
exporter renders Kafka's MBeans:

- :class:`ReplicaManagerCollector`: ``kafka_server_replicamanager_{partitioncount,leadercount,
  underreplicatedpartitions,underminisrpartitioncount,offlinereplicacount}``,
  ``kafka_server_replicamanager_isr{shrinks,expands}_total`` and
  ``kafka_server_replicafetchermanager_maxlag{clientId="Replica"}``;
- :class:`LogCollector`: ``kafka_log_log_{size,numlogsegments,logstartoffset,logendoffset}
  {topic,partition}``;
- :class:`ControllerCollector`: ``kafka_controller_kafkacontroller_{activecontrollercount,
  offlinepartitionscount,preferredreplicaimbalancecount,globaltopiccount,globalpartitioncount}``
  (all but the first are 0 on a broker that is not the active controller, as in Kafka),
  ``kafka_controller_controllerstats_leaderelectionrateandtimems`` (the time to handle a broker
  change, Kafka's ``BrokerChange`` controller state) and ``..._uncleanleaderelections_total``;
- :class:`SessionCollector`: ``kafka_server_sessionexpirelistener_zookeeper{disconnects,expires,
  syncconnects}_total`` from the metadata store's session events;
- :class:`CoordinatorCollector`: ``kafka_coordinator_group_groupmetadatamanager_{numgroups,
  numoffsets,numgroups<state>}`` for the groups this broker coordinates, and
  ``odradek_coordinator_transaction_transactionalids`` (Kafka has no MBean for it);
- :class:`ConsumerLagCollector`: kafka_exporter's ``kafka_consumergroup_lag{consumergroup,topic,
  partition}`` and ``kafka_consumergroup_current_offset``, only for the groups this broker
  coordinates (so a scrape of every broker counts each group once); high watermarks of partitions
  without a replica here are asked of their leaders before each scrape;
- :class:`CleanerCollector`: ``kafka_log_logcleaner_{max_dirty_percent,time_since_last_run_ms}``
  and ``kafka_log_logcleanermanager_uncleanable_partitions_count`` from any object with those
  three properties (:class:`CleanerStats`);
- :class:`ClientQuotaCollector`: Kafka's client quota sensors, ``kafka_server_produce_byte_rate``,
  ``kafka_server_fetch_byte_rate`` and ``kafka_server_request_request_time`` (percent of one
  request handler thread) ``{user,client_id}``, one sample per rate a quota keeps;
- :class:`FetchSessionCacheCollector`: ``kafka_server_fetchsessioncache_{numincrementalfetchsessions,
  numincrementalfetchpartitionscached}`` and ``kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total``
  (Kafka's ``kafka.server:type=FetchSessionCache`` gauges and ``IncrementalFetchSessionEvictionsPerSec``
  meter) from the fetch session cache (:mod:`odradek.server.fetch_session`);
- :class:`ConnectionCollector`: ``kafka_server_socket_server_metrics_{connection_count,
  connection_creation_total,connection_close_total}{listener,networkProcessor="0"}`` (one event
  loop is odradek's one network processor).

Every collector reads plain attributes; none blocks or awaits. Called on the broker's event loop
by the metrics listener.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import Metric

from odradek.metadata.store import SessionState
from odradek.metrics.families import LabelCache, RenderedGauge, counter, gauge, histogram
from odradek.metrics.reservoir import KAFKA_QUANTILES, quantile_of_sorted
from odradek.replication.partition import FOLLOWER_BYTES_IN, ISR_EXPANDS, ISR_SHRINKS
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.controller.core import ControllerCore
    from odradek.coordinator.group import GroupCoordinator
    from odradek.coordinator.transaction import TransactionCoordinator
    from odradek.replication.replica_manager import ReplicaManager
    from odradek.storage import LogManager

__all__ = [
    "CleanerCollector",
    "CleanerStats",
    "ClientQuotaCollector",
    "ConnectionCollector",
    "ConsumerLagCollector",
    "ControllerCollector",
    "CoordinatorCollector",
    "FetchSessionCacheCollector",
    "FetchSessionStats",
    "LogCollector",
    "ReplicaManagerCollector",
    "SessionCollector",
]

_NO_LABELS: dict[str, str] = {}


class ReplicaManagerCollector:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.rm = replica_manager

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        rm = self.rm
        leaders = under = under_min = 0
        max_lag = 0
        for partition in rm.partitions.values():
            state = partition.state
            if partition.is_leader:
                leaders += 1
                isr = len(state.isr)
                if isr < len(state.replicas):
                    under += 1
                if isr < int(partition.log.config.get("min.insync.replicas")):
                    under_min += 1
            elif partition.follower_lag > max_lag:
                max_lag = partition.follower_lag
        prefix = "kafka_server_replicamanager_"
        yield gauge(prefix + "partitioncount", "Partitions hosted by this broker", [(_NO_LABELS, len(rm.partitions))])
        yield gauge(prefix + "leadercount", "Partitions led by this broker", [(_NO_LABELS, leaders)])
        yield gauge(
            prefix + "underreplicatedpartitions",
            "Led partitions with fewer in-sync than assigned",
            [(_NO_LABELS, under)],
        )
        yield gauge(
            prefix + "underminisrpartitioncount",
            "Led partitions with fewer in-sync replicas than min.insync.replicas",
            [(_NO_LABELS, under_min)],
        )
        yield gauge(
            prefix + "offlinereplicacount",
            "Replicas offline on this broker (failed log dir)",
            [(_NO_LABELS, len(rm.offline_partitions))],
        )
        shrinks, expands = rm.counters[ISR_SHRINKS], rm.counters[ISR_EXPANDS]
        yield counter(prefix + "isrshrinks", "ISR shrinks made by this broker", [(_NO_LABELS, shrinks)])
        yield counter(prefix + "isrexpands", "ISR expansions made by this broker", [(_NO_LABELS, expands)])
        yield counter(
            "kafka_server_brokertopicmetrics_replicationbytesin",
            "Bytes appended by this broker's followers (ReplicationBytesInPerSec)",
            [(_NO_LABELS, rm.counters[FOLLOWER_BYTES_IN])],
        )
        yield gauge(
            "kafka_server_replicafetchermanager_maxlag",
            "Largest lag in records of a follower partition behind its leader's high watermark",
            [({"clientId": "Replica"}, max_lag)],
        )


class LogCollector:
    """Per-partition gauges; label sets are rendered once per partition and reused (see
    :class:`~odradek.metrics.families.RenderedGauge`)."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self.labels = LabelCache()

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        cache = self.labels
        logs = self.log_manager.all_logs()
        rows = []
        for log_ in logs:
            labels, text = cache.get(log_.topic_partition)
            rows.append(
                (labels, text, log_.size_in_bytes, log_.num_segments, log_.log_start_offset, log_.log_end_offset)
            )
        cache.trim(len(logs))
        yield RenderedGauge("kafka_log_log_size", "Bytes of the partition's log on this broker", rows, 2)
        yield RenderedGauge("kafka_log_log_numlogsegments", "Segments of the partition's log", rows, 3)
        yield RenderedGauge("kafka_log_log_logstartoffset", "The log start offset", rows, 4)
        yield RenderedGauge("kafka_log_log_logendoffset", "The log end offset", rows, 5)


class ControllerCollector:
    def __init__(self, controller: Callable[[], ControllerCore | None]) -> None:
        self.controller = controller

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        controller = self.controller()
        active = controller is not None and controller.active
        offline = imbalance = topics = partitions = 0
        if active:
            assert controller is not None
            ctx = controller.ctx
            live = set(ctx.live_brokers)
            topics = len(ctx.assignments)
            for topic, assignment in ctx.assignments.items():
                partitions += len(assignment)
                for partition, replicas in assignment.items():
                    state = ctx.states.get(TopicPartition(topic, partition))
                    if state is None:
                        continue
                    if state.leader < 0 or state.leader not in live:
                        offline += 1
                    elif replicas and state.leader != replicas[0]:
                        imbalance += 1
        prefix = "kafka_controller_kafkacontroller_"
        for name, doc, value in (
            ("activecontrollercount", "1 on the active controller, else 0", int(active)),
            ("offlinepartitionscount", "Partitions without a live leader", offline),
            ("preferredreplicaimbalancecount", "Partitions not led by their preferred replica", imbalance),
            ("globaltopiccount", "Topics in the cluster", topics),
            ("globalpartitioncount", "Partitions in the cluster", partitions),
        ):
            yield gauge(prefix + name, doc, [(_NO_LABELS, value)])
        times = sorted(controller.broker_change_times_ms) if controller is not None else []
        count = controller.broker_changes if controller is not None else 0
        yield from histogram(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Time the controller took to handle a broker change (ms)",
            [(_NO_LABELS, _Sorted(times, count))],
        )
        yield counter(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leaders elected from outside the ISR",
            [(_NO_LABELS, controller.unclean_leader_elections if controller is not None else 0)],
        )


class _Sorted:
    """Quantiles of an already sorted list, in :class:`~odradek.metrics.reservoir.Reservoir`'s shape."""

    def __init__(self, values: list[float], count: int) -> None:
        self.values = values
        self.count = count

    def quantiles(self) -> list[tuple[str, float]]:
        return [(label, quantile_of_sorted(self.values, q)) for label, q in KAFKA_QUANTILES]


class SessionCollector:
    """Counts the metadata store's session events; ``on_session_event`` is its watch callback."""

    def __init__(self) -> None:
        self.disconnects = 0
        self.expires = 0
        self.sync_connects = 1  # the session opened at start-up

    async def on_session_event(self, state: SessionState) -> None:
        if state is SessionState.SUSPENDED:
            self.disconnects += 1
        elif state is SessionState.EXPIRED:
            self.expires += 1
            self.sync_connects += 1
        elif state is SessionState.CONNECTED:
            self.sync_connects += 1

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        prefix = "kafka_server_sessionexpirelistener_zookeeper"
        yield counter(prefix + "disconnects", "ZooKeeper connection losses", [(_NO_LABELS, self.disconnects)])
        yield counter(prefix + "expires", "ZooKeeper session expiries", [(_NO_LABELS, self.expires)])
        yield counter(prefix + "syncconnects", "ZooKeeper (re)connections", [(_NO_LABELS, self.sync_connects)])


class ClientQuotaCollector:
    """``rates()`` maps a metric name to its (user, client id, value) rows (see the module doc)."""

    def __init__(self, rates: Callable[[], Mapping[str, list[tuple[str, str, float]]]]) -> None:
        self.rates = rates

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        for name, rows in self.rates().items():
            samples = [({"user": user, "client_id": client}, value) for user, client, value in rows]
            yield gauge(name, "the rate a client quota is measured against", samples)


class CoordinatorCollector:
    def __init__(self, groups: GroupCoordinator, transactions: TransactionCoordinator) -> None:
        self.groups = groups
        self.transactions = transactions

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        groups = self.groups.manager.current_groups()
        by_state: dict[str, int] = {
            s: 0 for s in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
        }
        offsets = 0
        for group in groups:
            by_state[group.state.value] = by_state.get(group.state.value, 0) + 1
            offsets += len(group.offsets)
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield gauge(prefix + "numgroups", "Groups this broker coordinates", [(_NO_LABELS, len(groups))])
        yield gauge(prefix + "numoffsets", "Committed offsets of those groups", [(_NO_LABELS, offsets)])
        for state, n in by_state.items():
            yield gauge(prefix + "numgroups" + state.lower(), f"Groups in state {state}", [(_NO_LABELS, n)])
        yield gauge(
            "odradek_coordinator_transaction_transactionalids",
            "Transactional ids this broker coordinates",
            [(_NO_LABELS, len(self.transactions.txns))],
        )


class ConsumerLagCollector:
    """kafka_exporter's lag for the groups coordinated here. A partition's high watermark comes
    from its replica on this broker, else from ``remote_high_watermarks`` (filled before a scrape
    by the broker with ListOffsets to the partitions' leaders, see :meth:`missing`); a partition
    known in neither has a ``current_offset`` but no ``lag``."""

    def __init__(self, groups: GroupCoordinator, replica_manager: ReplicaManager) -> None:
        self.groups = groups
        self.rm = replica_manager
        self.remote_high_watermarks: dict[TopicPartition, int] = {}

    def missing(self) -> set[TopicPartition]:
        """Partitions with committed offsets of local groups and no replica on this broker."""
        partitions = self.rm.partitions
        return {tp for group in self.groups.manager.current_groups() for tp in group.offsets if tp not in partitions}

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        lag: list[tuple[dict[str, str], float]] = []
        current: list[tuple[dict[str, str], float]] = []
        partitions = self.rm.partitions
        remote = self.remote_high_watermarks
        for group in self.groups.manager.current_groups():
            for tp, commit in sorted(group.offsets.items()):
                labels = {"consumergroup": group.group_id, "topic": tp.topic, "partition": str(tp.partition)}
                offset = commit.value.offset
                current.append((labels, offset))
                partition = partitions.get(tp)
                high_watermark = partition.high_watermark if partition is not None else remote.get(tp)
                if high_watermark is not None:
                    lag.append((labels, max(0, high_watermark - offset)))
        yield gauge("kafka_consumergroup_current_offset", "Committed offset of a group in a partition", current)
        yield gauge("kafka_consumergroup_lag", "High watermark minus the group's committed offset", lag)


class CleanerStats(Protocol):
    """What the log cleaner exposes (Kafka's ``LogCleaner`` and ``LogCleanerManager`` gauges)."""

    @property
    def max_dirty_percent(self) -> float: ...

    @property
    def time_since_last_run_ms(self) -> float: ...

    @property
    def uncleanable_partitions_count(self) -> int: ...


class CleanerCollector:
    def __init__(self, cleaner: CleanerStats) -> None:
        self.cleaner = cleaner

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        c = self.cleaner
        yield gauge(
            "kafka_log_logcleaner_max_dirty_percent",
            "Largest dirty share of a compacted log at the last cleaning (percent)",
            [(_NO_LABELS, c.max_dirty_percent)],
        )
        yield gauge(
            "kafka_log_logcleaner_time_since_last_run_ms",
            "Milliseconds since the cleaner last ran",
            [(_NO_LABELS, c.time_since_last_run_ms)],
        )
        yield gauge(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "Partitions the cleaner marked uncleanable",
            [(_NO_LABELS, c.uncleanable_partitions_count)],
        )


class ConnectionCollector:
    """``counts()`` returns listener name -> (open connections, accepted, closed)."""

    def __init__(self, counts: Callable[[], Mapping[str, tuple[int, int, int]]]) -> None:
        self.counts = counts

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        rows = sorted(self.counts().items())
        prefix = "kafka_server_socket_server_metrics_"
        for index, (name, doc) in enumerate(
            (
                ("connection_count", "Open connections"),
                ("connection_creation_total", "Connections accepted"),
                ("connection_close_total", "Connections closed"),
            )
        ):
            yield gauge(
                prefix + name,
                doc,
                (({"listener": listener, "networkProcessor": "0"}, v[index]) for listener, v in rows),
            )


class FetchSessionStats(Protocol):
    """What :class:`FetchSessionCacheCollector` reads (``odradek.server.fetch_session.FetchSessionCache``)."""

    @property
    def size(self) -> int: ...

    @property
    def total_partitions(self) -> int: ...

    @property
    def evictions(self) -> int: ...


class FetchSessionCacheCollector:
    """Kafka's ``kafka.server:type=FetchSessionCache`` metrics (see the module docstring)."""

    def __init__(self, cache: FetchSessionStats) -> None:
        self.cache = cache

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        prefix = "kafka_server_fetchsessioncache_"
        cache = self.cache
        yield gauge(
            prefix + "numincrementalfetchsessions",
            "Incremental fetch sessions in the cache (NumIncrementalFetchSessions)",
            [(_NO_LABELS, cache.size)],
        )
        yield gauge(
            prefix + "numincrementalfetchpartitionscached",
            "Partitions over every incremental fetch session (NumIncrementalFetchPartitionsCached)",
            [(_NO_LABELS, cache.total_partitions)],
        )
        yield counter(
            prefix + "incrementalfetchsessionevictions",
            "Incremental fetch sessions evicted (IncrementalFetchSessionEvictionsPerSec)",
            [(_NO_LABELS, cache.evictions)],
        )
