"""Partition reassignment across three broker processes on a real ZooKeeper.

The seed's procedure (raise a topic holding data from one replica to three with a reassignment
JSON, ``--execute``, ``--verify``), lowering the replication factor (the removed replica's log is
deleted), the ZooKeeper path (``/admin/reassign_partitions`` written directly), cancelling, and a
controller killed while a move waits for a stopped replica (the next controller finishes it).
One cluster for the module; the tests run in order.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.testing_zk import ZooKeeperServer

from .cli_support import odradek

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(3, zookeeper_connect=zookeeper_server.chroot_connect())


def _cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return odradek("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, *args)


def _create(cluster: LocalCluster, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)])[topic].result(
        30
    )


def _produce(cluster: LocalCluster, topic: str, partitions: int, count: int, prefix: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    acked: list[bytes] = []
    for i in range(count):
        producer.produce(
            topic,
            b"%s-%d" % (prefix.encode(), i),
            partition=i % partitions,
            on_delivery=lambda e, m: acked.append(m.value()) if e is None else None,
        )
    assert producer.flush(30) == 0
    return acked


def _consume(cluster: LocalCluster, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"check-{topic}"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    idle = 0
    while idle < 4:
        msgs = consumer.consume(1000, 0.5)
        idle = 0 if msgs else idle + 1
        out.extend(m.value() for m in msgs if m.error() is None)
    consumer.close()
    return out


def _state(cluster: LocalCluster, topic: str, partition: int) -> tuple[list[int], int, list[int]]:
    """(assigned replicas, leader, isr) from ZooKeeper."""
    assignment = json.loads(cluster.read_znode(f"/brokers/topics/{topic}") or b"{}")
    state = json.loads(cluster.read_znode(f"/brokers/topics/{topic}/partitions/{partition}/state") or b"{}")
    return assignment["partitions"][str(partition)], state["leader"], sorted(state["isr"])


def _log_bytes(cluster: LocalCluster, broker_id: int, topic: str, partition: int) -> bytes | None:
    """All segments of the replica, concatenated. Replicas are byte-identical only because this
    module's topics use ``cleanup.policy=delete``: each replica cleans a compacted topic on its own
    (docs/replication.md), so compacted replicas are compared by offsets and values instead."""
    directory = Path(cluster.broker(broker_id).data_dir) / f"{topic}-{partition}"
    if not directory.exists():
        return None
    return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))


def _plan(tmp_path: Path, name: str, moves: dict[tuple[str, int], list[int]]) -> Path:
    path = tmp_path / name
    partitions = [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return path


def _wait_completed(cluster: LocalCluster, plan: Path, partitions: int, timeout_s: float = 60) -> str:
    def done() -> str | None:
        out = _cli(cluster, "--verify", "--reassignment-json-file", str(plan)).stdout
        return out if out.count("is completed.") == partitions else None

    return cluster.wait_until(done, timeout_s=timeout_s, interval_s=0.5, message="reassignment completed")


def test_raising_the_replication_factor_of_a_topic_with_data(cluster: LocalCluster, tmp_path: Path) -> None:
    _create(cluster, "seed", [[1], [1]])
    acked = _produce(cluster, "seed", 2, 400, "before")
    assert len(acked) == 400
    plan = _plan(tmp_path, "seed.json", {("seed", 0): [1, 2, 3], ("seed", 1): [2, 3, 1]})

    result = _cli(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Current partition replica assignment\n\n")
    rollback = json.loads(result.stdout.split("\n")[2])
    assert [(p["partition"], p["replicas"]) for p in rollback["partitions"]] == [(0, [1]), (1, [1])]
    assert "Save this to use as the --reassignment-json-file option during rollback" in result.stdout
    assert "Successfully started partition reassignments for seed-0,seed-1" in result.stdout

    status = _wait_completed(cluster, plan, 2)
    assert status.startswith("Status of partition reassignment:\n")
    assert _state(cluster, "seed", 0) == ([1, 2, 3], 1, [1, 2, 3])
    replicas, leader, isr = _state(cluster, "seed", 1)
    assert replicas == [2, 3, 1] and isr == [1, 2, 3] and leader in (1, 2)
    topic = json.loads(cluster.read_znode("/brokers/topics/seed") or b"{}")
    assert not topic.get("adding_replicas") and not topic.get("removing_replicas")
    assert cluster.read_znode("/admin/reassign_partitions") is None
    for p in (0, 1):  # byte-identical logs on the three brokers
        cluster.wait_until(
            lambda p=p: len({_log_bytes(cluster, b, "seed", p) for b in (1, 2, 3)}) == 1, message="identical logs"
        )
        assert _log_bytes(cluster, 3, "seed", p)
    assert sorted(_consume(cluster, "seed", 2)) == sorted(acked)
    listed = _cli(cluster, "--list")
    assert listed.returncode == 0 and "No partition reassignments found." in listed.stdout


def test_lowering_the_replication_factor_deletes_the_removed_replica(cluster: LocalCluster, tmp_path: Path) -> None:
    plan = _plan(tmp_path, "lower.json", {("seed", 0): [2, 3]})
    result = _cli(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert result.returncode == 0, result.stderr
    assert "Successfully started partition reassignment for seed-0" in result.stdout
    _wait_completed(cluster, plan, 1)
    replicas, leader, isr = _state(cluster, "seed", 0)
    assert replicas == [2, 3] and leader in (2, 3) and isr == [2, 3]  # leadership left broker 1
    cluster.wait_until(lambda: _log_bytes(cluster, 1, "seed", 0) is None, message="broker 1's replica deleted")
    more = _produce(cluster, "seed", 2, 100, "after")
    assert len(more) == 100
    got = _consume(cluster, "seed", 2)
    assert len(got) == 500 and len(set(got)) == 500


def test_preferred_replica_election_znode(cluster: LocalCluster, tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    _create(cluster, "pref", [[1]])
    plan = _plan(tmp_path, "pref.json", {("pref", 0): [2, 1]})
    assert _cli(cluster, "--execute", "--reassignment-json-file", str(plan)).returncode == 0
    _wait_completed(cluster, plan, 1)
    assert _state(cluster, "pref", 0) == ([2, 1], 1, [1, 2])  # the leader stayed: it is a target replica
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=10)
    try:
        request = {"version": 1, "partitions": [{"topic": "pref", "partition": 0}]}
        zk.create("/admin/preferred_replica_election", json.dumps(request).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    cluster.wait_until(lambda: _state(cluster, "pref", 0)[1] == 2, message="the preferred replica leads")
    cluster.wait_until(lambda: cluster.read_znode("/admin/preferred_replica_election") is None, message="deleted")


def test_invalid_plans_are_refused(cluster: LocalCluster, tmp_path: Path) -> None:
    for name, moves, message in (
        ("dup.json", {("seed", 1): [2, 2]}, "duplicate replicas"),
        ("dead.json", {("seed", 1): [1, 9]}, "not alive"),
        ("unknown.json", {("nope", 0): [1]}, "does not exist"),
    ):
        result = _cli(cluster, "--execute", "--reassignment-json-file", str(_plan(tmp_path, name, moves)))
        assert result.returncode == 1, (name, result.stdout)
        assert message in result.stderr, (name, result.stderr)
    cancel = _cli(cluster, "--cancel", "--reassignment-json-file", str(_plan(tmp_path, "c.json", {("seed", 1): [1]})))
    assert cancel.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in cancel.stderr


def test_the_zookeeper_path_and_generate(cluster: LocalCluster, tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    _create(cluster, "zkpath", [[2], [2], [2]])
    acked = _produce(cluster, "zkpath", 3, 90, "zk")
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "zkpath"}]}))
    generated = _cli(cluster, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,3")
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert [p["replicas"] for p in proposed["partitions"]] == [[1], [3], [1]]
    plan = tmp_path / "proposed.json"
    plan.write_text(lines[4])

    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=10)
    try:  # the ZooKeeper-era tool wrote the znode itself; the controller watches it
        zk.create("/admin/reassign_partitions", plan.read_bytes(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    _wait_completed(cluster, plan, 3)
    cluster.wait_until(lambda: cluster.read_znode("/admin/reassign_partitions") is None, message="znode deleted")
    assert [_state(cluster, "zkpath", p)[0] for p in range(3)] == [[1], [3], [1]]
    assert sorted(_consume(cluster, "zkpath", 3)) == sorted(acked)


def test_a_new_controller_finishes_a_move_in_progress(cluster: LocalCluster, tmp_path: Path) -> None:
    controller = json.loads(cluster.read_znode("/controller") or b"{}")["brokerid"]
    leader, target = [b for b in (1, 2, 3) if b != controller]
    _create(cluster, "failover", [[leader]])
    acked = _produce(cluster, "failover", 1, 200, "fo")
    plan = _plan(tmp_path, "fo.json", {("failover", 0): [leader, target]})
    cluster.sigstop(target)  # the new replica cannot catch up: the move stays in progress
    try:
        result = _cli(cluster, "--execute", "--reassignment-json-file", str(plan))
        assert result.returncode == 0, result.stderr
        assert "still in progress" in _cli(cluster, "--verify", "--reassignment-json-file", str(plan)).stdout
        topic = json.loads(cluster.read_znode("/brokers/topics/failover") or b"{}")
        assert topic["adding_replicas"] == {"0": [target]}
        listed = _cli(cluster, "--list").stdout
        assert f"failover-0: replicas: {leader},{target}. adding: {target}. removing: ." in listed
        cluster.kill9(controller)
        cluster.wait_until(
            lambda: json.loads(cluster.read_znode("/controller") or b'{"brokerid": -1}')["brokerid"] == leader,
            timeout_s=20,
            message="a new controller",
        )
    finally:
        cluster.sigcont(target)
    _wait_completed(cluster, plan, 1)
    assert _state(cluster, "failover", 0) == ([leader, target], leader, sorted([leader, target]))
    cluster.wait_until(
        lambda: _log_bytes(cluster, target, "failover", 0) == _log_bytes(cluster, leader, "failover", 0),
        message="the new replica holds the leader's bytes",
    )
    cluster.restart(controller)
    assert sorted(_consume(cluster, "failover", 1)) == sorted(acked)


def test_cancel_returns_a_move_to_its_original_replicas(cluster: LocalCluster, tmp_path: Path) -> None:
    controller = json.loads(cluster.read_znode("/controller") or b"{}")["brokerid"]
    leader, target = [b for b in (1, 2, 3) if b != controller][:2]
    _create(cluster, "cancelled", [[leader]])
    plan = _plan(tmp_path, "cancel.json", {("cancelled", 0): [leader, target]})
    cluster.sigstop(target)
    try:
        assert _cli(cluster, "--execute", "--reassignment-json-file", str(plan)).returncode == 0
        result = _cli(cluster, "--cancel", "--reassignment-json-file", str(plan))
    finally:
        cluster.sigcont(target)
    assert result.returncode == 0, result.stderr
    assert "Successfully cancelled partition reassignment for: cancelled-0" in result.stdout
    assert _state(cluster, "cancelled", 0) == ([leader], leader, [leader])
    topic = json.loads(cluster.read_znode("/brokers/topics/cancelled") or b"{}")
    assert not topic.get("adding_replicas") and not topic.get("removing_replicas")
    cluster.wait_until(lambda: _log_bytes(cluster, target, "cancelled", 0) is None, message="the new replica removed")


def test_a_throttled_move_is_bounded_and_the_throttles_are_cleared(cluster: LocalCluster, tmp_path: Path) -> None:
    _create(cluster, "throttled", [[1]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1, "linger.ms": 5})
    value = bytes(1024)
    for _ in range(8 * 1024):  # 8 MB
        producer.produce("throttled", value, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    size = len(_log_bytes(cluster, 1, "throttled", 0) or b"")
    rate = 500_000
    plan = _plan(tmp_path, "throttled.json", {("throttled", 0): [1, 2]})
    started = time.monotonic()
    result = _cli(cluster, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(rate))
    assert result.returncode == 0, result.stderr
    assert f"The inter-broker throttle limit was set to {rate} B/s" in result.stdout
    assert json.loads(cluster.read_znode("/config/brokers/1") or b"{}")["config"] == {
        "leader.replication.throttled.rate": str(rate),
        "follower.replication.throttled.rate": str(rate),
    }
    topic_config = json.loads(cluster.read_znode("/config/topics/throttled") or b"{}")["config"]
    assert topic_config["leader.replication.throttled.replicas"] == "0:1"
    assert topic_config["follower.replication.throttled.replicas"] == "0:2"

    def done() -> bool:
        return not json.loads(cluster.read_znode("/brokers/topics/throttled") or b"{}").get("adding_replicas")

    cluster.wait_until(done, timeout_s=60, interval_s=0.2, message="throttled move completed")
    elapsed = time.monotonic() - started
    # The rate is sampled over 11 windows of 1 s: the first 10 s may carry rate x 10 bytes, the
    # rest goes at the rate. Unthrottled, 8 MB copies in well under a second here.
    assert elapsed >= (size - 10 * rate) / rate * 0.8, f"{size} bytes copied in {elapsed:.1f} s"
    status = _cli(cluster, "--verify", "--reassignment-json-file", str(plan)).stdout
    assert "Reassignment of partition throttled-0 is completed." in status
    assert "Clearing broker-level throttles on brokers 1,2,3" in status
    assert "Clearing topic-level throttles on topic throttled" in status
    assert json.loads(cluster.read_znode("/config/brokers/1") or b"{}")["config"] == {}
    topic_config = json.loads(cluster.read_znode("/config/topics/throttled") or b"{}")["config"]
    assert "leader.replication.throttled.replicas" not in topic_config
    assert _log_bytes(cluster, 2, "throttled", 0) == _log_bytes(cluster, 1, "throttled", 0)


def test_log_dirs_describe_every_broker(cluster: LocalCluster) -> None:
    result = odradek("log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe", "--topic-list", "seed")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1,2,3",
    ]
    doc = json.loads(lines[2])
    sizes = {
        (b["broker"], p["partition"]): p["size"]
        for b in doc["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
        if d["error"] is None
    }
    # seed-0 was lowered to [2, 3]; seed-1 has three replicas
    assert set(sizes) == {(2, "seed-0"), (3, "seed-0"), (1, "seed-1"), (2, "seed-1"), (3, "seed-1")}
    for (broker_id, name), size in sizes.items():
        assert size == len(_log_bytes(cluster, broker_id, "seed", int(name.rsplit("-", 1)[1])) or b"")
    assert all(
        Path(d["logDir"]) == Path(cluster.broker(b["broker"]).data_dir) for b in doc["brokers"] for d in b["logDirs"]
    )
