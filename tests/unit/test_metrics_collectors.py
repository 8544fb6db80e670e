"""Collectors over the broker's state (fakes of the replica manager, controller, coordinators), the
event loop probe and the request log's stage arithmetic."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek.metadata.store import SessionState
from odradek.metrics.collectors import (
    CleanerCollector,
    ConnectionCollector,
    ConsumerLagCollector,
    ControllerCollector,
    ReplicaManagerCollector,
    SessionCollector,
)
from odradek.metrics.loop_probe import EventLoopProbe
from odradek.metrics.request_metrics import RequestMetrics
from odradek.protocol.api_keys import ApiKey
from odradek.server.request_channel import RequestTimes
from odradek.server.request_log import RequestLog
from odradek.server.session import PLAINTEXT_SESSION
from odradek.storage import TopicPartition


def _values(*collectors: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _k(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (name, frozenset(labels.items()))


def _partition(leader: bool, isr: int, replicas: int, min_isr: int = 1, follower_lag: int = 0, hw: int = 0) -> Any:
    return SimpleNamespace(
        is_leader=leader,
        state=SimpleNamespace(isr=list(range(isr)), replicas=list(range(replicas))),
        log=SimpleNamespace(config={"min.insync.replicas": str(min_isr)}),
        follower_lag=follower_lag,
        high_watermark=hw,
    )


def test_replica_manager_gauges() -> None:
    rm = SimpleNamespace(
        partitions={
            TopicPartition("a", 0): _partition(True, 3, 3),
            TopicPartition("a", 1): _partition(True, 2, 3, min_isr=2),
            TopicPartition("a", 2): _partition(True, 1, 3, min_isr=2),
            TopicPartition("b", 0): _partition(False, 3, 3, follower_lag=7),
            TopicPartition("b", 1): _partition(False, 3, 3, follower_lag=42),
        },
        offline_partitions={TopicPartition("c", 0)},
        counters=[4, 5, 1000],
    )
    v = _values(ReplicaManagerCollector(cast(Any, rm)))
    assert v[_k("kafka_server_replicamanager_partitioncount")] == 5
    assert v[_k("kafka_server_replicamanager_leadercount")] == 3
    assert v[_k("kafka_server_replicamanager_underreplicatedpartitions")] == 2
    assert v[_k("kafka_server_replicamanager_underminisrpartitioncount")] == 1
    assert v[_k("kafka_server_replicamanager_offlinereplicacount")] == 1
    assert v[_k("kafka_server_replicamanager_isrshrinks_total")] == 4
    assert v[_k("kafka_server_replicamanager_isrexpands_total")] == 5
    assert v[_k("kafka_server_brokertopicmetrics_replicationbytesin_total")] == 1000
    assert v[_k("kafka_server_replicafetchermanager_maxlag", clientId="Replica")] == 42


def test_controller_gauges_only_on_the_active_controller() -> None:
    state = SimpleNamespace
    ctx = SimpleNamespace(
        live_brokers={1: None, 2: None},
        assignments={"t": {0: [1, 2], 1: [2, 1], 2: [3, 1]}, "u": {0: [1, 2]}},
        states={
            TopicPartition("t", 0): state(leader=1),  # preferred
            TopicPartition("t", 1): state(leader=1),  # not preferred
            TopicPartition("t", 2): state(leader=3),  # leader not live: offline
            TopicPartition("u", 0): state(leader=-1),  # offline
        },
    )
    controller = SimpleNamespace(
        active=True,
        ctx=ctx,
        broker_change_times_ms=[10.0, 20.0, 30.0],
        broker_changes=3,
        unclean_leader_elections=2,
    )
    v = _values(ControllerCollector(lambda: cast(Any, controller)))
    p = "kafka_controller_kafkacontroller_"
    assert v[_k(p + "activecontrollercount")] == 1
    assert v[_k(p + "offlinepartitionscount")] == 2
    assert v[_k(p + "preferredreplicaimbalancecount")] == 1
    assert v[_k(p + "globaltopiccount")] == 2
    assert v[_k(p + "globalpartitioncount")] == 4
    assert v[_k("kafka_controller_controllerstats_leaderelectionrateandtimems_count")] == 3
    assert v[_k("kafka_controller_controllerstats_leaderelectionrateandtimems", quantile="0.50")] == 20.0
    assert v[_k("kafka_controller_controllerstats_uncleanleaderelections_total")] == 2
    controller.active = False
    v = _values(ControllerCollector(lambda: cast(Any, controller)))
    assert v[_k(p + "activecontrollercount")] == 0
    assert v[_k(p + "offlinepartitionscount")] == 0
    assert v[_k(p + "globalpartitioncount")] == 0
    none = _values(ControllerCollector(lambda: None))
    assert none[_k(p + "activecontrollercount")] == 0


def test_consumer_lag_for_the_groups_coordinated_here() -> None:
    commit = SimpleNamespace
    groups = [
        SimpleNamespace(
            group_id="g1",
            offsets={
                TopicPartition("t", 0): commit(value=SimpleNamespace(offset=90)),
                TopicPartition("t", 1): commit(value=SimpleNamespace(offset=5)),  # not hosted here
            },
        )
    ]
    coordinator = SimpleNamespace(manager=SimpleNamespace(current_groups=lambda: groups))
    rm = SimpleNamespace(partitions={TopicPartition("t", 0): _partition(True, 1, 1, hw=100)})
    collector = ConsumerLagCollector(cast(Any, coordinator), cast(Any, rm))
    assert collector.missing() == {TopicPartition("t", 1)}
    v = _values(collector)
    assert v[_k("kafka_consumergroup_lag", consumergroup="g1", topic="t", partition="0")] == 10
    assert _k("kafka_consumergroup_lag", consumergroup="g1", topic="t", partition="1") not in v
    assert v[_k("kafka_consumergroup_current_offset", consumergroup="g1", topic="t", partition="1")] == 5
    collector.remote_high_watermarks[TopicPartition("t", 1)] = 8  # asked of the leader before the scrape
    v = _values(collector)
    assert v[_k("kafka_consumergroup_lag", consumergroup="g1", topic="t", partition="1")] == 3


@dataclass
class FakeCleaner:
    max_dirty_percent: float = 37.5
    time_since_last_run_ms: float = 1200.0
    uncleanable_partitions_count: int = 1


def test_cleaner_gauges_from_any_object_with_the_three_properties() -> None:
    v = _values(CleanerCollector(FakeCleaner()))
    assert v[_k("kafka_log_logcleaner_max_dirty_percent")] == 37.5
    assert v[_k("kafka_log_logcleaner_time_since_last_run_ms")] == 1200.0
    assert v[_k("kafka_log_logcleanermanager_uncleanable_partitions_count")] == 1


def test_session_and_connection_counts() -> None:
    session = SessionCollector()
    for state in (SessionState.SUSPENDED, SessionState.CONNECTED, SessionState.SUSPENDED, SessionState.EXPIRED):
        asyncio.run(session.on_session_event(state))
    connections = ConnectionCollector(lambda: {"PLAINTEXT": (3, 10, 7), "SSL": (0, 1, 1)})
    v = _values(session, connections)
    assert v[_k("kafka_server_sessionexpirelistener_zookeeperdisconnects_total")] == 2
    assert v[_k("kafka_server_sessionexpirelistener_zookeeperexpires_total")] == 1
    assert v[_k("kafka_server_sessionexpirelistener_zookeepersyncconnects_total")] == 3
    labels = {"listener": "PLAINTEXT", "networkProcessor": "0"}
    assert v[_k("kafka_server_socket_server_metrics_connection_count", **labels)] == 3
    assert v[_k("kafka_server_socket_server_metrics_connection_creation_total", **labels)] == 10
    assert v[_k("kafka_server_socket_server_metrics_connection_close_total", **labels)] == 7


def test_loop_probe_exports_idle_share_and_lag() -> None:
    probe = EventLoopProbe()
    probe.window(wall_s=5.0, cpu_s=1.5, max_lag_s=0.25)
    v = _values(probe)
    assert v[_k("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent")] == pytest.approx(0.7)
    assert v[_k("kafka_network_socketserver_networkprocessoravgidlepercent")] == pytest.approx(0.7)
    assert v[_k("odradek_eventloop_lag_seconds")] == 0.25
    probe.window(wall_s=1.0, cpu_s=3.0, max_lag_s=0.0)  # clamped: never below 0 % idle
    assert probe.busy == 1.0


@dataclass
class Conn:
    peer: str = "127.0.0.1:5000"
    connection_id: str = "conn-9"
    session: Any = PLAINTEXT_SESSION
    times: RequestTimes = field(default_factory=RequestTimes)


def test_request_log_splits_the_stages(caplog: pytest.LogCaptureFixture) -> None:
    metrics = RequestMetrics(reservoir_size=4)
    observer = RequestLog(metrics)
    conn = Conn()
    times = conn.times
    times.api_key, times.api_version, times.correlation_id = ApiKey.PRODUCE, 9, 12
    times.delayed_at = 10.004  # acks=all: waited from 10.004 to 10.010
    with caplog.at_level(logging.DEBUG, logger="kafka.request.logger"):
        observer.completed(times, conn, 10.000, 10.001, 10.010, 10.011, 10.015)
    (series,) = metrics.stage_series()["Produce"]
    stages = list(series.reservoir.window()[0])
    assert stages == pytest.approx([1.0, 3.0, 6.0, 1.0, 4.0, 15.0])
    assert metrics.requests == {("Produce", 9): 1}
    (record,) = [r for r in caplog.records if r.name == "kafka.request.logger"]
    message = record.getMessage()
    assert message.startswith("Completed request:Produce(v9, correlationId 12, clientAddress 127.0.0.1:5000)")
    assert "totalTime:15.000,requestQueueTime:1.000,localTime:3.000,remoteTime:6.000" in message
    assert "principal:User:ANONYMOUS,listener:PLAINTEXT" in message


def test_request_log_without_a_delay_and_frames_that_never_reached_a_handler() -> None:
    metrics = RequestMetrics(reservoir_size=4)
    observer = RequestLog(metrics)
    conn = Conn()
    observer.completed(conn.times, conn, 1.0, 1.0, 1.0, 1.0, 1.0)  # api_key -1: not counted
    assert metrics.requests == {}
    conn.times.api_key, conn.times.api_version = ApiKey.METADATA, 12
    observer.completed(conn.times, conn, 1.000, 1.002, 1.005, 1.005, 1.006)
    (series,) = metrics.stage_series()["Metadata"]
    stages = list(series.reservoir.window()[0])
    assert stages == pytest.approx([2.0, 3.0, 0.0, 0.0, 1.0, 6.0])


def test_loop_probe_closes_windows_on_a_running_loop() -> None:
    async def run() -> EventLoopProbe:
        probe = EventLoopProbe(interval_s=0.005, window_s=0.03)
        probe.busy = -1.0  # not a value a window can give
        probe.start()
        deadline = time.monotonic() + 5
        while probe.busy < 0 and time.monotonic() < deadline:
            end = time.monotonic() + 0.01
            while time.monotonic() < end:  # hold the loop: the probe's wake-up is late
                pass
            await asyncio.sleep(0)
        await probe.stop()
        return probe

    probe = asyncio.run(run())
    assert 0.0 <= probe.busy <= 1.0
    assert probe.lag_s > 0.0
