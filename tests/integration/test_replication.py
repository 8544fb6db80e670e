"""Replication between broker processes on a real ZooKeeper: followers, ISR, high watermark, failover.

One 3-broker cluster for the module (``replica.lag.time.max.ms`` 2000, ZooKeeper session 6000 ms,
see ``odradek.testing.CLUSTER_DEFAULTS``). The tests build on each other and restore the cluster
(every broker running, every replica in sync) before they end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.testing_zk import ZooKeeperServer

from .cli_support import odradek

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "replicated"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    c = odradek_cluster_module(3, zookeeper_connect=zookeeper_server.chroot_connect())
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    topic = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(30)
    c.wait_until(lambda: _isr_sizes(c) == [3] * PARTITIONS, timeout_s=20, message="topic in sync")
    yield c


def _metadata(cluster: LocalCluster) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, isr) as a live broker answers Metadata."""

    async def fetch() -> Any:
        host, port = cluster.bootstrap_servers.split(",")[0].split(":")
        async with KafkaConnection(host, int(port), request_timeout_ms=3000) as conn:
            rb = conn.builder(3, max_version=12)
            request = rb(
                topics=(rb.make("MetadataRequestTopic", name=TOPIC, topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
                include_cluster_authorized_operations=False,
            )
            return await conn.send(request)

    response = asyncio.run(fetch())
    (t,) = response.topics
    return {int(p.partition_index): (int(p.leader_id), sorted(p.isr_nodes)) for p in t.partitions}


def _isr_sizes(cluster: LocalCluster) -> list[int]:
    try:
        view = _metadata(cluster)
    except Exception:
        return []
    return [len(view[p][1]) for p in sorted(view)] if len(view) == PARTITIONS else []


def _produce(bootstrap: str, count: int, prefix: str, timeout_s: float = 30) -> dict[int, list[bytes]]:
    """acks=all, idempotence off: returns the acknowledged values per partition, in offset order."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": int(timeout_s * 1000)}
    )
    acked: dict[int, list[tuple[int, bytes]]] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))

    for i in range(count):
        producer.produce(TOPIC, f"{prefix}-{i}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(timeout_s + 5)
    return {p: [v for _, v in sorted(vals)] for p, vals in acked.items()}


def _consume_all(bootstrap: str) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    idle = 0
    while idle < 4:
        msgs = consumer.consume(1000, 0.5)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            if m.error() is None:
                out[m.partition()].append(m.value())
            else:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
    consumer.close()
    return out


def _segment_bytes(cluster: LocalCluster, broker_id: int, partition: int) -> bytes:
    directory = Path(cluster.broker(broker_id).data_dir) / f"{TOPIC}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))


def _replicas_identical(cluster: LocalCluster) -> bool:
    return all(len({_segment_bytes(cluster, b, p) for b in (1, 2, 3)}) == 1 for p in range(PARTITIONS))


def _isr_znode(cluster: LocalCluster, partition: int) -> list[int]:
    import json

    data = cluster.read_znode(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")
    assert data is not None
    return sorted(json.loads(data)["isr"])


def test_followers_copy_the_leader_byte_for_byte(cluster: LocalCluster) -> None:
    acked = _produce(cluster.bootstrap_servers, 300, "first")
    assert sum(len(v) for v in acked.values()) == 300
    cluster.wait_until(lambda: _replicas_identical(cluster), timeout_s=15, message="replicas identical")
    assert _consume_all(cluster.bootstrap_servers) == acked
    assert all(_isr_znode(cluster, p) == [1, 2, 3] for p in range(PARTITIONS))


def test_a_stopped_follower_leaves_the_isr_and_rejoins(cluster: LocalCluster) -> None:
    view = _metadata(cluster)
    leader = view[0][0]
    follower = next(b for b in (1, 2, 3) if b != leader)
    cluster.sigstop(follower)
    try:
        cluster.wait_until(
            lambda: all(follower not in _isr_znode(cluster, p) for p in range(PARTITIONS) if view[p][0] != follower),
            timeout_s=15,
            message=f"broker {follower} out of the ISR",
        )
        live = ",".join(cluster.broker(b).bootstrap_servers for b in (1, 2, 3) if b != follower)
        partitions_led_elsewhere = [p for p in range(PARTITIONS) if view[p][0] != follower]
        producer = Producer({"bootstrap.servers": live, "acks": "all", "message.timeout.ms": 10000})
        results: list[Any] = []
        for p in partitions_led_elsewhere:
            producer.produce(TOPIC, b"two-in-isr", partition=p, on_delivery=lambda e, m: results.append(e))
        producer.flush(15)
        assert results == [None] * len(partitions_led_elsewhere)  # 2 in ISR >= min.insync.replicas
    finally:
        cluster.sigcont(follower)
    cluster.wait_until(lambda: _isr_sizes(cluster) == [3] * PARTITIONS, timeout_s=20, message="ISR restored")
    cluster.wait_until(lambda: _replicas_identical(cluster), timeout_s=15, message="replicas identical")


def test_acks_all_fails_with_one_replica_in_sync(cluster: LocalCluster) -> None:
    view = _metadata(cluster)
    leader = view[0][0]
    others = [b for b in (1, 2, 3) if b != leader]
    for b in others:
        cluster.sigstop(b)
    try:
        cluster.wait_until(lambda: _isr_znode(cluster, 0) == [leader], timeout_s=15, message="ISR of one")
        producer = Producer(  # quick: the paused followers' sessions (6 s) must not expire meanwhile
            {"bootstrap.servers": cluster.broker(leader).bootstrap_servers, "acks": "all", "message.timeout.ms": 1000}
        )
        errors: list[Any] = []
        producer.produce(TOPIC, b"alone", partition=0, on_delivery=lambda e, m: errors.append(e))
        producer.flush(5)
        assert len(errors) == 1 and errors[0] is not None
        assert errors[0].code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT), errors[0]
        log = Path(cluster.broker(leader).log_path).read_text(errors="replace")
        assert "ISR" in log
    finally:
        for b in others:
            cluster.sigcont(b)
    cluster.wait_until(lambda: _isr_sizes(cluster) == [3] * PARTITIONS, timeout_s=20, message="ISR restored")


def test_leader_killed_and_restarted_loses_no_acknowledged_record(cluster: LocalCluster) -> None:
    before = _consume_all(cluster.bootstrap_servers)
    view = _metadata(cluster)
    victim = view[0][0]
    cluster.kill9(victim)
    t0 = time.monotonic()
    cluster.wait_until(
        lambda: (m := _metadata(cluster))[0][0] not in (victim, -1) and victim not in m[0][1],
        timeout_s=20,
        message="new leader for partition 0",
    )
    failover_s = time.monotonic() - t0
    acked = _produce(cluster.bootstrap_servers, 150, "after-kill")
    assert sum(len(v) for v in acked.values()) == 150
    cluster.restart(victim)
    cluster.wait_until(lambda: _isr_sizes(cluster) == [3] * PARTITIONS, timeout_s=30, message="victim back in ISR")
    cluster.wait_until(lambda: _replicas_identical(cluster), timeout_s=20, message="replicas identical")
    after = _consume_all(cluster.bootstrap_servers)
    for p in range(PARTITIONS):
        assert after[p] == before[p] + acked.get(p, [])
    assert failover_s < 6 + 5
    assert ErrorCode.none == 0


def _produce_to(bootstrap: str, topic: str, values: list[bytes], acks: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "message.timeout.ms": 15000})
    acked: list[bytes] = []
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)
    producer.flush(20)
    return acked


def _read_topic(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-" + topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    idle = 0
    while idle < 4:
        msgs = consumer.consume(1000, 0.5)
        idle = 0 if msgs else idle + 1
        out.extend(m.value() for m in msgs if m.error() is None)
    consumer.close()
    return out


def test_a_former_leader_truncates_its_divergent_tail(cluster: LocalCluster) -> None:
    """KIP-101: the leader's ZooKeeper session expires while it holds records no follower has;
    when it comes back it follows the new leader and drops them, as the leader epochs say."""
    import json

    topic = "diverge"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "1"})])[topic].result(30)

    def state() -> dict[str, Any]:
        data = cluster.read_znode(f"/brokers/topics/{topic}/partitions/0/state")
        return json.loads(data) if data else {}

    cluster.wait_until(lambda: len(state().get("isr", [])) == 3, timeout_s=20, message="diverge in sync")
    committed = _produce_to(cluster.bootstrap_servers, topic, [b"committed-%d" % i for i in range(20)], "all")
    assert len(committed) == 20
    old_leader, old_epoch = state()["leader"], state()["leader_epoch"]
    followers = [b for b in (1, 2, 3) if b != old_leader]
    leader_address = cluster.broker(old_leader).bootstrap_servers
    cluster.wait_until(
        lambda: all(len({_segment_bytes_of(cluster, b, topic) for b in (1, 2, 3)}) == 1 for _ in (0,)),
        timeout_s=10,
        message="followers caught up",
    )
    for b in followers:
        cluster.sigstop(b)
    # the followers' fetches waiting on the leader end within replica.fetch.wait.max.ms (500 ms);
    # after that no fetch of theirs can carry the next records before they resume
    time.sleep(0.8)
    divergent = _produce_to(leader_address, topic, [b"divergent-%d" % i for i in range(5)], "1")
    cluster.sigstop(old_leader)  # before replica.lag.time.max.ms: the followers are still in its ISR
    for b in followers:
        cluster.sigcont(b)
    try:
        assert len(divergent) == 5
        cluster.wait_until(
            lambda: state()["leader"] in followers and state()["leader_epoch"] > old_epoch,
            timeout_s=20,
            message="a follower elected after the leader's session expired",
        )
        new_leader = state()["leader"]
        live = ",".join(cluster.broker(b).bootstrap_servers for b in followers)
        later = _produce_to(live, topic, [b"later-%d" % i for i in range(10)], "all")
        assert len(later) == 10
    finally:
        cluster.sigcont(old_leader)
    cluster.wait_until(lambda: len(state()["isr"]) == 3, timeout_s=30, message="former leader back in the ISR")
    cluster.wait_until(
        lambda: _segment_bytes_of(cluster, old_leader, topic) == _segment_bytes_of(cluster, new_leader, topic),
        timeout_s=20,
        message="former leader's log equal to the new leader's",
    )
    assert _read_topic(cluster.bootstrap_servers, topic) == committed + later
    log = Path(cluster.broker(old_leader).log_path).read_text(errors="replace")
    assert "truncating" in log.lower()


def _segment_bytes_of(cluster: LocalCluster, broker_id: int, topic: str) -> bytes:
    directory = Path(cluster.broker(broker_id).data_dir) / f"{topic}-0"
    return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))


def test_sigterm_moves_leadership_before_the_broker_stops(cluster: LocalCluster) -> None:
    """Controlled shutdown: the leader asks the controller to move its partitions first, so a new
    leader is in Metadata well before the stopped broker's ZooKeeper session would have expired."""
    view = _metadata(cluster)
    leader = view[0][0]
    led = [p for p in range(PARTITIONS) if view[p][0] == leader]
    t0 = time.monotonic()
    cluster.stop(leader)  # SIGTERM, waits for the process to exit
    stopped_s = time.monotonic() - t0
    after = _metadata(cluster)
    for p in led:
        assert after[p][0] not in (leader, -1), f"partition {p} still led by {after[p][0]}"
        assert leader not in after[p][1]
    assert stopped_s < 5, f"controlled shutdown took {stopped_s:.2f} s"
    log = Path(cluster.broker(leader).log_path).read_text(errors="replace")
    assert "controlled shutdown succeeded" in log
    acked = _produce(cluster.bootstrap_servers, 30, "after-sigterm")
    assert sum(len(v) for v in acked.values()) == 30
    cluster.restart(leader)
    cluster.wait_until(lambda: _isr_sizes(cluster) == [3] * PARTITIONS, timeout_s=30, message="back in the ISR")


def test_a_paused_controller_is_replaced_and_fenced(cluster: LocalCluster) -> None:
    """SIGSTOP the controller past its session: a new controller with controller_epoch + 1 takes
    over; when the old one resumes it steps down, and the brokers' metadata stays the new one's."""
    import json

    def controller() -> tuple[int, int]:
        data, epoch = cluster.read_znode("/controller"), cluster.read_znode("/controller_epoch")
        return (json.loads(data)["brokerid"] if data else -1), int(epoch or 0)

    old_id, old_epoch = controller()
    cluster.sigstop(old_id)
    try:
        cluster.wait_until(
            lambda: controller()[0] not in (-1, old_id) and controller()[1] == old_epoch + 1,
            timeout_s=20,
            message="a new controller",
        )
    finally:
        cluster.sigcont(old_id)
    new_id, new_epoch = controller()
    log_path = Path(cluster.broker(old_id).log_path)
    cluster.wait_until(
        lambda: "is no longer the controller" in log_path.read_text(errors="replace"),
        timeout_s=20,
        message="the old controller stepped down",
    )
    cluster.wait_until(lambda: _isr_sizes(cluster) == [3] * PARTITIONS, timeout_s=30, message="all in sync again")
    assert controller() == (new_id, new_epoch)
    acked = _produce(cluster.bootstrap_servers, 30, "after-controller-pause")
    assert sum(len(v) for v in acked.values()) == 30


def _preferred_leaders(cluster: LocalCluster) -> bool:
    import json

    for p in range(PARTITIONS):
        assignment = json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}") or "{}")["partitions"][str(p)]
        if _metadata(cluster)[p][0] != assignment[0]:
            return False
    return True


def test_preferred_leader_election_restores_the_first_replicas(cluster: LocalCluster) -> None:
    from confluent_kafka import ElectionType

    view = _metadata(cluster)
    victim = view[0][0]
    cluster.stop(victim)  # controlled shutdown: its partitions move to other replicas
    cluster.restart(victim)
    cluster.wait_until(lambda: _isr_sizes(cluster) == [3] * PARTITIONS, timeout_s=30, message="back in the ISR")
    assert not _preferred_leaders(cluster)  # the restarted broker leads nothing until an election
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    result = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(30)
    errors = {tp.partition: err for tp, err in result.items()}
    assert all(err is None or err.code() == KafkaError.ELECTION_NOT_NEEDED for err in errors.values()), errors
    cluster.wait_until(lambda: _preferred_leaders(cluster), timeout_s=10, message="preferred leaders")
    again = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(30)
    assert all(err is not None and err.code() == KafkaError.ELECTION_NOT_NEEDED for err in again.values())


def test_leader_election_command(cluster: LocalCluster) -> None:
    argv = ["leader-election", "--bootstrap-server", cluster.bootstrap_servers, "--election-type", "preferred"]
    result = odradek(*argv, "--topic", TOPIC, "--partition", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Valid replica already elected for partitions {TOPIC}-0"
    result = odradek(*argv, "--topic", "nope", "--partition", "0")
    assert result.returncode == 1
    assert (
        "Error completing leader election (PREFERRED) for partition: nope-0: UNKNOWN_TOPIC_OR_PARTITION"
        in result.stdout
    )
