"""Several log dirs per broker: broker processes with two ``log.dirs`` each on a real ZooKeeper.

A replica moves between its broker's directories with a reassignment JSON's ``log_dirs``
(AlterReplicaLogDirs) while keeping its data. A failed log dir takes its partitions offline on
that broker only. One directory of one broker is replaced by a file (its next
checkpoint fails with an I/O error): the broker writes ``/log_dir_event_notification``, the
controller moves leadership of that directory's partitions to other ISR replicas and drops the
broker from their ISR, while its partitions in the healthy directory stay in sync. Nothing
acknowledged is lost; after the directory is repaired and the broker restarted it catches up and
rejoins every ISR."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.client.cluster import Cluster
from odradek.testing_zk import ZooKeeperServer

from .cli_support import odradek

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "dirs"
PARTITIONS = 6
VICTIM = 1


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    overrides = {"log.flush.offset.checkpoint.interval.ms": "300"}
    c = odradek_cluster_module(3, overrides=overrides, zookeeper_connect=zookeeper_server.chroot_connect(), log_dirs=2)
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    config = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=config)])[TOPIC].result(30)
    c.wait_until(lambda: all(len(_state(c, p)["isr"]) == 3 for p in range(PARTITIONS)), 30, message="full ISRs")
    yield c


def _state(cluster: LocalCluster, partition: int) -> dict[str, object]:
    raw = cluster.read_znode(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")
    assert raw is not None
    return dict(json.loads(raw))


def _produce(cluster: LocalCluster, prefix: str, n: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    acked: list[bytes] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]

    for i in range(n):
        producer.produce(TOPIC, value=b"%s-%d" % (prefix.encode(), i), partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(30) == 0
    return acked


def _consume_all(cluster: LocalCluster, prefixes: tuple[bytes, ...]) -> list[bytes]:
    """Every record of the topic whose value starts with one of ``prefixes``."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"dirs-{time.monotonic()}",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    values.append(m.value())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
    finally:
        consumer.close()
    return [v for v in values if v.startswith(prefixes)]


def _offline_replicas(cluster: LocalCluster) -> dict[int, list[int]]:
    """Partition -> the offline replicas Metadata v12 answers (odradek's client)."""

    async def ask() -> dict[int, list[int]]:
        client = Cluster(cluster.bootstrap_servers)
        try:
            topics = await client.refresh([TOPIC])
            return {p: sorted(info.offline_replicas) for p, info in topics[TOPIC].partitions.items()}
        finally:
            await client.close()

    return asyncio.run(ask())


def _log_dirs(cluster: LocalCluster, broker_id: int) -> dict[str, str | None]:
    out = odradek(
        "log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe", "--broker-list", str(broker_id)
    )
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout.strip().splitlines()[-1])
    return {d["logDir"]: d["error"] for d in document["brokers"][0]["logDirs"]}


def _reassign(cluster: LocalCluster, path: Path, action: str) -> subprocess.CompletedProcess[str]:
    argv = ["reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, action]
    return odradek(*argv, "--reassignment-json-file", str(path))


def _plan(path: Path, partition: int, replicas: list[int], dirs: list[str]) -> Path:
    entry = {"topic": TOPIC, "partition": partition, "replicas": replicas, "log_dirs": dirs}
    path.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    return path


def test_a_replica_moves_to_another_log_dir_with_its_data(cluster: LocalCluster, tmp_path: Path) -> None:
    mover = 3
    broker = cluster.broker(mover)
    partition = next(p for p in range(PARTITIONS) if _state(cluster, p)["leader"] == mover)
    before = _produce(cluster, "pre-move", 120)
    source = next(d for d in broker.log_dirs if (d / f"{TOPIC}-{partition}").is_dir())
    target = next(d for d in broker.log_dirs if d != source)
    assignment = json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}") or b"{}")
    replicas = [int(r) for r in assignment["partitions"][str(partition)]]
    plan = _plan(tmp_path / "move.json", partition, replicas, [str(target) if r == mover else "any" for r in replicas])
    started = _reassign(cluster, plan, "--execute")
    assert started.returncode == 0, started.stderr
    assert f"Successfully started log directory move for: {TOPIC}-{partition}-{mover}" in started.stdout
    done = f"Reassignment of replica {TOPIC}-{partition}-{mover} completed successfully."
    cluster.wait_until(lambda: done in _reassign(cluster, plan, "--verify").stdout, 30, message="the move completed")
    assert (target / f"{TOPIC}-{partition}").is_dir() and not (source / f"{TOPIC}-{partition}").exists()
    after = _produce(cluster, "post-move", 120)  # the moved replica still leads: appends go to the new dir
    assert _state(cluster, partition)["leader"] == mover
    assert sorted(_consume_all(cluster, (b"pre-move-", b"post-move-"))) == sorted(before + after)

    wrong = _plan(
        tmp_path / "wrong.json", partition, replicas, ["/no/such/dir" if r == mover else "any" for r in replicas]
    )
    refused = _reassign(cluster, wrong, "--execute")
    assert refused.returncode == 1
    assert f"Failed to move {TOPIC}-{partition}-{mover} to /no/such/dir: LOG_DIR_NOT_FOUND" in refused.stdout


def test_a_failed_log_dir_takes_only_its_partitions_offline(cluster: LocalCluster) -> None:
    before = _produce(cluster, "before", 300)
    broker = cluster.broker(VICTIM)
    healthy_dir, failing_dir = broker.log_dirs
    failing = {p for p in range(PARTITIONS) if (failing_dir / f"{TOPIC}-{p}").is_dir()}
    healthy = {p for p in range(PARTITIONS) if (healthy_dir / f"{TOPIC}-{p}").is_dir()}
    assert failing and healthy and failing | healthy == set(range(PARTITIONS))

    moved = failing_dir.with_name(failing_dir.name + ".failed")
    os.rename(failing_dir, moved)
    failing_dir.write_text("this log dir is gone\n")  # the next checkpoint there fails: ENOTDIR
    try:
        cluster.wait_until(
            lambda: all(
                VICTIM not in _state(cluster, p)["isr"] and _state(cluster, p)["leader"] != VICTIM for p in failing
            ),
            30,
            message="the failed dir's partitions led elsewhere without the broker in their ISR",
        )
        assert broker.alive()
        assert all(VICTIM in _state(cluster, p)["isr"] for p in healthy)  # its other dir is untouched
        cluster.wait_until(
            lambda: _offline_replicas(cluster) == {p: [VICTIM] if p in failing else [] for p in range(PARTITIONS)},
            10,
            message="Metadata names the failed dir's replicas, and only those, offline",
        )
        log_text = Path(broker.log_path).read_text()
        assert f"Error in log dir {failing_dir}" in log_text and "The dir is offline" in log_text
        assert cluster.wait_until(lambda: _log_dirs(cluster, VICTIM)[str(failing_dir)] == "KAFKA_STORAGE_ERROR", 10)
        assert _log_dirs(cluster, VICTIM)[str(healthy_dir)] is None
        events = cluster.read_znode("/log_dir_event_notification")
        assert events is not None  # the parent exists; its children were consumed by the controller

        after = _produce(cluster, "after", 300)
        assert len(before) == len(after) == 300
        assert sorted(_consume_all(cluster, (b"before-", b"after-"))) == sorted(before + after)
    finally:
        cluster.stop(VICTIM)
        failing_dir.unlink()
        os.rename(moved, failing_dir)
    cluster.restart(VICTIM)
    cluster.wait_until(
        lambda: all(VICTIM in _state(cluster, p)["isr"] for p in range(PARTITIONS)),
        60,
        message="the repaired broker back in every ISR",
    )


def test_a_broker_whose_every_log_dir_failed_stops(cluster: LocalCluster) -> None:
    victim = 2
    broker = cluster.broker(victim)
    moved = []
    for d in broker.log_dirs:
        moved.append((d, d.with_name(d.name + ".failed")))
        os.rename(d, moved[-1][1])
        d.write_text("gone\n")
    try:
        cluster.wait_until(lambda: not broker.alive(), 15, message="the broker halted")
        assert broker.proc is not None and broker.proc.returncode == 1
        assert "because all log dirs" in Path(broker.log_path).read_text()
        cluster.wait_until(
            lambda: all(_state(cluster, p)["leader"] != victim for p in range(PARTITIONS)), 30, message="leaders moved"
        )
        assert len(_produce(cluster, "halted", 60)) == 60
    finally:
        for d, m in moved:
            d.unlink()
            os.rename(m, d)
    cluster.restart(victim)
    cluster.wait_until(lambda: all(victim in _state(cluster, p)["isr"] for p in range(PARTITIONS)), 60, message="ISR")
