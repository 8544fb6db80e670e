"""Followers fetch in incremental fetch sessions (KIP-227): a 3-broker cluster on a real ZooKeeper
replicates with every (leader, follower) pair in one session, as the leaders' FetchSessionCache
metrics show, and still fails over after a leader's kill -9 and takes the broker back after a
restart (its fetchers open new sessions with full fetches)."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import ClusterBroker, LocalCluster
from odradek.testing_zk import ZooKeeperServer

from .fuzz_support import consume_all

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "sessioned"
PARTITIONS = 6
_BOUND = re.compile(r"serves metrics on (http://[\d.]+:\d+)/metrics")
_METRIC = "kafka_server_fetchsessioncache_"


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    c = odradek_cluster_module(
        3, overrides={"metrics.listener": "http://127.0.0.1:0"}, zookeeper_connect=zookeeper_server.chroot_connect()
    )
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    c.wait_until(lambda: all(len(_isr(c, p)) == 3 for p in range(PARTITIONS)), timeout_s=30, message="in sync")
    yield c


def _state(cluster: LocalCluster, partition: int) -> dict[str, Any]:
    data = cluster.read_znode(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")
    assert data is not None
    state: dict[str, Any] = json.loads(data)
    return state


def _isr(cluster: LocalCluster, partition: int) -> list[int]:
    return sorted(_state(cluster, partition)["isr"])


def _session_metrics(broker: ClusterBroker) -> dict[str, float]:
    """The broker's FetchSessionCache metrics, scraped from its metrics listener."""
    urls = _BOUND.findall(broker.log_path.read_text(errors="replace"))
    assert urls, "no metrics listener yet"
    body = urllib.request.urlopen(urls[-1] + "/metrics", timeout=5).read().decode()
    out = {}
    for line in body.splitlines():
        if line.startswith(_METRIC):
            name, value = line.split(" ", 1)
            out[name.removeprefix(_METRIC)] = float(value)
    return out


def _totals(cluster: LocalCluster, brokers: list[int]) -> tuple[float, float]:
    """(sessions, cached partitions) over ``brokers``."""
    metrics = [_session_metrics(cluster.broker(b)) for b in brokers]
    return (
        sum(m["numincrementalfetchsessions"] for m in metrics),
        sum(m["numincrementalfetchpartitionscached"] for m in metrics),
    )


def _produce(bootstrap: str, count: int, prefix: str) -> dict[int, list[bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 60000})
    acked: dict[int, list[tuple[int, bytes]]] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))

    for i in range(count):
        producer.produce(TOPIC, f"{prefix}-{i}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(65) == 0
    return {p: [v for _, v in sorted(values)] for p, values in acked.items()}


def test_followers_replicate_in_sessions_and_fail_over(cluster: LocalCluster) -> None:
    # every (partition, follower) pair sits in exactly one leader's session: 6 x 2
    sessions, _cached = cluster.wait_until(
        lambda: (t := _totals(cluster, [1, 2, 3]))[1] == PARTITIONS * 2 and t,
        timeout_s=20,
        message="every follower partition in a session",
    )
    assert 2 <= sessions <= 6  # one per (leader, follower) pair with partitions
    first = _produce(cluster.bootstrap_servers, 600, "before")

    victim = int(_state(cluster, 0)["leader"])
    survivors = [b for b in (1, 2, 3) if b != victim]
    cluster.kill9(victim)
    cluster.wait_until(
        lambda: all(int(_state(cluster, p)["leader"]) in survivors for p in range(PARTITIONS)),
        timeout_s=30,
        message="leaders moved off the killed broker",
    )
    second = _produce(cluster.bootstrap_servers, 600, "after")
    # the survivors follow each other's new leaderships in sessions (the killed follower's old
    # sessions stay cached until evicted): every partition's live follower is in a session
    cluster.wait_until(
        lambda: _totals(cluster, survivors)[1] >= PARTITIONS, timeout_s=20, message="survivors in sessions"
    )
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for partition, _key, value in consume_all(cluster.bootstrap_servers, TOPIC, PARTITIONS, 1200):
        got[partition].append(value)
    assert got == {p: first[p] + second[p] for p in range(PARTITIONS)}

    cluster.restart(victim)
    cluster.wait_until(
        lambda: all(len(_isr(cluster, p)) == 3 for p in range(PARTITIONS)), timeout_s=60, message="back in sync"
    )
    assert _produce(cluster.bootstrap_servers, 60, "back")
    # the restarted broker's fetchers opened new sessions with full fetches
    cluster.wait_until(lambda: _totals(cluster, [1, 2, 3])[1] >= PARTITIONS * 2, timeout_s=20, message="sessions again")
