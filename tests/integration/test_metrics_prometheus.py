"""A 3-broker cluster on a real ZooKeeper scraped by a real Prometheus server (Debian's
``prometheus`` package): every broker is an ``up`` target, and after a broker is stopped the
query API reports under-replicated partitions. One cluster and one Prometheus for the module."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import ClusterBroker, LocalCluster
from odradek.free_ports import free_port
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(120)]

TOPIC = "watched"
LAGGED = "lagged"
_BOUND = re.compile(r"serves metrics on (http://[\d.]+:\d+)/metrics")


def _metrics_url(broker: ClusterBroker) -> str:
    found = _BOUND.search(broker.log_path.read_text(errors="replace")) if broker.log_path.exists() else None
    return found.group(1) if found else ""


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(
        3, overrides={"metrics.listener": "http://127.0.0.1:0"}, zookeeper_connect=zookeeper_server.chroot_connect()
    )


class Prometheus:
    def __init__(self, base: Path, targets: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = base / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "scrape_configs:\n  - job_name: odradek\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.log = open(base / "prometheus.log", "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={base / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def query(self, promql: str) -> list[Any]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        body = json.loads(urllib.request.urlopen(url, timeout=5).read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def prometheus(cluster: LocalCluster, tmp_path_factory: Any) -> Iterator[Prometheus]:
    if shutil.which("prometheus") is None:
        pytest.fail("Debian's prometheus package is not installed (make venv installs it)")
    urls = [
        cluster.wait_until(lambda b=b: _metrics_url(b), timeout_s=30, message=f"broker {b.broker_id} metrics")
        for b in cluster.brokers.values()
    ]
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), [u.removeprefix("http://") for u in urls])
    try:
        yield server
    finally:
        server.stop()


def _value(result: list[Any]) -> float:
    return float(result[0]["value"][1]) if result else -1.0


def test_prometheus_sees_under_replicated_partitions_after_a_broker_stops(
    cluster: LocalCluster, prometheus: Prometheus
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
    cluster.wait_until(
        lambda: len(prometheus.query('up{job="odradek"} == 1')) == 3, timeout_s=30, message="3 targets up"
    )
    cluster.wait_until(
        lambda: _value(prometheus.query(f'sum(kafka_log_log_size{{topic="{TOPIC}"}}) >= 0')) >= 0,
        timeout_s=20,
        message="the topic's logs scraped",
    )
    assert _value(prometheus.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")) == 1
    assert _value(prometheus.query("sum(kafka_server_replicamanager_underreplicatedpartitions)")) == 0

    # consumer lag: a group's committed offsets on partitions spread over the brokers (one replica
    # each), counted once across the cluster by the group's coordinator
    admin.create_topics([NewTopic(LAGGED, 3, 1)])[LAGGED].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for p in range(3):
        for _ in range(10):
            producer.produce(LAGGED, b"v", partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "lagging"})
    consumer.commit(offsets=[TopicPartition(LAGGED, p, 4) for p in range(3)], asynchronous=False)
    consumer.close()
    cluster.wait_until(
        lambda: (
            _value(prometheus.query('sum(kafka_consumergroup_lag{consumergroup="lagging"})')) == 18
            and _value(prometheus.query('count(kafka_consumergroup_lag{consumergroup="lagging"})')) == 3
        ),
        timeout_s=20,
        message="the group's lag (3 partitions x 6 records) in Prometheus, once",
    )

    stopped = max(cluster.alive_ids())
    cluster.stop(stopped)
    cluster.wait_until(
        lambda: _value(prometheus.query("sum(kafka_server_replicamanager_underreplicatedpartitions) > 0")) > 0,
        timeout_s=30,
        message="under-replicated partitions in Prometheus",
    )
    cluster.wait_until(
        lambda: len(prometheus.query('up{job="odradek"} == 0')) == 1, timeout_s=10, message="the stopped target down"
    )
    names = {r["metric"]["__name__"] for r in prometheus.query('{__name__=~"kafka_network_requestmetrics_.*"}')}
    assert "kafka_network_requestmetrics_totaltimems" in names
    assert "kafka_network_requestmetrics_requests_total" in names
