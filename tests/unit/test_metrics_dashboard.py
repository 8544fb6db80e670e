"""The Grafana dashboard and the alert rules in docs/grafana name only metrics the broker exports."""

from __future__ import annotations

import json
import pathlib
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from odradek.metrics.broker_topic import BrokerTopicStats
from odradek.metrics.collectors import (
    CleanerCollector,
    ConnectionCollector,
    ConsumerLagCollector,
    ControllerCollector,
    CoordinatorCollector,
    LogCollector,
    ReplicaManagerCollector,
    SessionCollector,
)
from odradek.metrics.exposition import generate_text
from odradek.metrics.loop_probe import EventLoopProbe
from odradek.metrics.request_metrics import RequestMetrics
from odradek.protocol.api_keys import ApiKey
from odradek.storage import TopicPartition

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "grafana"
NAME = re.compile(r"\b((?:kafka|odradek)_[a-z0-9_]+)")


@dataclass
class Cleaner:
    max_dirty_percent: float = 0.0
    time_since_last_run_ms: float = 0.0
    uncleanable_partitions_count: int = 0


def _exported() -> set[str]:
    tp = TopicPartition("t", 0)
    partition = SimpleNamespace(
        is_leader=True,
        state=SimpleNamespace(isr=[1], replicas=[1]),
        log=SimpleNamespace(config={"min.insync.replicas": "1"}),
        follower_lag=0,
        high_watermark=5,
    )
    rm = SimpleNamespace(partitions={tp: partition}, offline_partitions=set(), counters=[0, 0, 0])
    group = SimpleNamespace(
        group_id="g",
        state=SimpleNamespace(value="Stable"),
        offsets={tp: SimpleNamespace(value=SimpleNamespace(offset=1))},
    )
    groups = SimpleNamespace(manager=SimpleNamespace(current_groups=lambda: [group]))
    controller = SimpleNamespace(
        active=True,
        ctx=SimpleNamespace(live_brokers={1: None}, assignments={}, states={}),
        broker_change_times_ms=[],
        broker_changes=0,
        unclean_leader_elections=0,
    )
    log_ = SimpleNamespace(topic_partition=tp, size_in_bytes=1, num_segments=1, log_start_offset=0, log_end_offset=5)
    requests = RequestMetrics(reservoir_size=4)
    requests.record(ApiKey.PRODUCE, 9, False, (0.0,) * 6)
    requests.record(ApiKey.FETCH, 12, False, (0.0,) * 6)
    stats = BrokerTopicStats()
    stats.produced("t", 1, 1)
    registry = CollectorRegistry(auto_describe=False)
    for collector in (
        stats,
        requests,
        EventLoopProbe(),
        SessionCollector(),
        ConnectionCollector(lambda: {"PLAINTEXT": (1, 1, 0)}),
        ReplicaManagerCollector(cast(Any, rm)),
        LogCollector(cast(Any, SimpleNamespace(all_logs=lambda: [log_]))),
        ControllerCollector(lambda: cast(Any, controller)),
        CoordinatorCollector(cast(Any, groups), cast(Any, SimpleNamespace(txns={}))),
        ConsumerLagCollector(cast(Any, groups), cast(Any, rm)),
        CleanerCollector(Cleaner()),
    ):
        registry.register(collector)
    text = generate_text(registry).decode()
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def test_dashboard_and_alerts_use_exported_names() -> None:
    exported = _exported()
    dashboard = json.loads((DOCS / "odradek-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) > 20
    alerts = (DOCS / "odradek-alerts.yml").read_text()
    used = {m for e in [*exprs, alerts] for m in NAME.findall(e)}
    assert "kafka_server_replicamanager_underreplicatedpartitions" in used
    missing = sorted(used - exported)
    assert not missing, missing


def test_issue_names_are_exported() -> None:
    exported = _exported()
    for name in (
        "kafka_server_replicamanager_underminisrpartitioncount",
        "kafka_server_replicamanager_offlinereplicacount",
        "kafka_server_replicamanager_isrshrinks_total",
        "kafka_server_replicafetchermanager_maxlag",
        "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
        "kafka_controller_controllerstats_leaderelectionrateandtimems",
        "kafka_controller_controllerstats_uncleanleaderelections_total",
        "kafka_log_log_numlogsegments",
        "kafka_log_log_logstartoffset",
        "kafka_server_sessionexpirelistener_zookeeperexpires_total",
        "kafka_log_logcleaner_time_since_last_run_ms",
        "kafka_server_socket_server_metrics_connection_count",
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "kafka_consumergroup_lag",
        "kafka_network_requestmetrics_responsesendtimems_count",
    ):
        assert name in exported, name
