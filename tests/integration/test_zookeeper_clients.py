"""Clients coordinated through ZooKeeper (seed 004), against broker processes on a real ZooKeeper.

Three ``console-consumer --zookeeper`` processes in one group share a 6-partition topic two
partitions each (owner znodes), read every record once, and after one is killed with SIGKILL the
other two take its partitions from its committed offsets once its session expires. A watcher
checks on every owner-znode change that no claim is ever overwritten. A consumer that leaves
cleanly releases its partitions at once; new partitions are assigned. A producer configured only
with the ZooKeeper address follows a leader change and a broker joining (a ZooKeeper consumer
rebalances as the broker leaves and joins). Offsets written by the
ZooKeeper consumers are read back by OffsetFetch v0 and by ``consumer-groups --zookeeper``;
``offsets.storage=kafka`` commits to the group coordinator (and to ZooKeeper with dual commit).
A consumer stopped (SIGSTOP) past its session timeout registers again when it resumes; a whitelist
consumer picks up a new matching topic; ``--reset-offsets`` is refused while a consumer is
registered and rewinds the group's ZooKeeper offsets once none is.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient

from odradek.cli.cluster import LocalCluster
from odradek.client.connection import KafkaConnection
from odradek.protocol import legacy_messages as legacy
from odradek.testing_zk import ZooKeeperServer
from odradek.zkclients.consumer_connector import ConsumerConfig, ZookeeperConsumerConnector
from odradek.zkclients.producer import Producer as ZkProducer

from .cli_support import odradek

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "zk-group"
GROUP = "zk-readers"
SESSION_MS = 6000


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    c = odradek_cluster_module(3, zookeeper_connect=zookeeper_server.chroot_connect())
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 6, 2)])[TOPIC].result(30)
    yield c


class ConsoleConsumer:
    """``odradek console-consumer --zookeeper`` printing ``Partition:p Offset:o value`` lines."""

    def __init__(self, cluster: LocalCluster, out: Path, *extra: str) -> None:
        self.out = out
        props = {
            "auto.commit.interval.ms": "200",
            "rebalance.backoff.ms": "300",
            "rebalance.max.retries": "40",
            "zookeeper.session.timeout.ms": str(SESSION_MS),
            "log.level": "INFO",
        }
        argv = ["console-consumer", "--zookeeper", cluster.zookeeper_connect, "--group", GROUP, "--topic", TOPIC]
        argv += ["--from-beginning", "--property", "print.partition=true", "--property", "print.offset=true"]
        for key, value in props.items():
            argv += ["--consumer-property", f"{key}={value}"]
        self.handle = open(out, "wb")  # noqa: SIM115 - closed in stop()
        self.errors = open(out.with_suffix(".err"), "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli.main", *argv, *extra],
            stdout=self.handle,
            stderr=self.errors,
        )

    def records(self) -> list[tuple[int, int, bytes]]:
        out = []
        for line in self.out.read_bytes().splitlines():
            parts = line.split(b"\t")
            if len(parts) == 3 and parts[0].startswith(b"Partition:") and parts[1].startswith(b"Offset:"):
                out.append((int(parts[0][10:]), int(parts[1][7:]), parts[2]))
        return out

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)
        self.handle.close()
        self.errors.close()


class OwnerWatch:
    """Watches ``/consumers/<g>/owners/<t>`` (kazoo, its own session): on every change it reads
    each owner znode and checks that a znode (by its creation zxid) always holds one owner, i.e.
    no claim is ever overwritten; ``owners()`` is the current partition -> owner map."""

    def __init__(self, connect: str) -> None:
        hosts, _, chroot = connect.partition("/")
        self.zk = KazooClient(hosts=hosts)
        self.zk.start(timeout=10)
        self.zk.chroot = "/" + chroot if chroot else ""
        self.path = f"/consumers/{GROUP}/owners/{TOPIC}"
        self.seen: dict[int, tuple[str, bytes]] = {}
        self.violations: list[str] = []
        self.changes = 0
        self._lock = threading.Lock()
        self.zk.ensure_path(self.path)
        self.zk.ChildrenWatch(self.path, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        with self._lock:
            self.changes += 1
            for child in children:
                try:
                    data, stat = self.zk.get(f"{self.path}/{child}")
                except Exception:
                    continue
                before = self.seen.get(stat.czxid)
                if before is not None and before[1] != data:
                    self.violations.append(f"partition {child}: {before[1]!r} overwritten by {data!r}")
                self.seen[stat.czxid] = (child, data)

    def owners(self) -> dict[int, str]:
        out = {}
        for child in self.zk.get_children(self.path):
            try:
                data, _ = self.zk.get(f"{self.path}/{child}")
            except Exception:
                continue
            out[int(child)] = data.decode()
        return out

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def _produce(cluster: LocalCluster, prefix: str, n: int, partitions: int = 6) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    values = [b"%s-%d" % (prefix.encode(), i) for i in range(n)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % partitions)
    assert producer.flush(30) == 0
    return values


def _consumer_of(owner: str) -> str:
    return owner.rsplit("-", 1)[0]


def _committed(cluster: LocalCluster, partition: int) -> int:
    raw = cluster.read_znode(f"/consumers/{GROUP}/offsets/{TOPIC}/{partition}")
    return int(raw) if raw else -1


def test_three_consumers_share_the_partitions_and_survive_a_kill(cluster: LocalCluster, tmp_path: Path) -> None:
    watch = OwnerWatch(cluster.zookeeper_connect)
    consumers = [ConsoleConsumer(cluster, tmp_path / f"c{i}.out") for i in range(3)]
    try:
        cluster.wait_until(
            lambda: len(watch.owners()) == 6 and len({_consumer_of(o) for o in watch.owners().values()}) == 3,
            30,
            message="three consumers owning two partitions each",
        )
        per_consumer: dict[str, int] = {}
        for owner in watch.owners().values():
            per_consumer[_consumer_of(owner)] = per_consumer.get(_consumer_of(owner), 0) + 1
        assert sorted(per_consumer.values()) == [2, 2, 2]
        first = _produce(cluster, "one", 600)
        cluster.wait_until(lambda: sum(len(c.records()) for c in consumers) >= 600, 30, message="600 records read")
        read = [r for c in consumers for r in c.records()]
        assert sorted(v for _p, _o, v in read) == sorted(first)  # every record once, none twice
        cluster.wait_until(lambda: all(_committed(cluster, p) == 100 for p in range(6)), 15, message="commits")

        victim = consumers[2]
        victim_partitions = {p for p, _o, _v in victim.records()}
        assert len(victim_partitions) == 2  # it read its two partitions, and only those
        victim.stop(signal.SIGKILL)
        killed_at = time.monotonic()
        second = _produce(cluster, "two", 300)
        survivors = consumers[:2]
        cluster.wait_until(
            lambda: len(watch.owners()) == 6 and len({_consumer_of(o) for o in watch.owners().values()}) == 2,
            SESSION_MS / 1000 + 30,
            message="the survivors own every partition",
        )
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1  # only after the session expired
        cluster.wait_until(
            lambda: sum(1 for c in survivors for _p, _o, v in c.records() if v.startswith(b"two-")) >= 300,
            30,
            message="the second 300 records read",
        )
        again = [v for c in survivors for _p, _o, v in c.records() if v.startswith(b"two-")]
        assert sorted(again) == sorted(second)
        taken_over = [(p, o) for c in survivors for p, o, _v in c.records() if p in victim_partitions]
        assert min(o for _p, o in taken_over) >= 100  # from the committed offsets: nothing read twice
        assert watch.violations == [] and watch.changes >= 3
    finally:
        for c in consumers:
            c.stop()
        watch.close()


def test_a_clean_leave_releases_at_once_and_new_partitions_are_assigned(cluster: LocalCluster, tmp_path: Path) -> None:
    watch = OwnerWatch(cluster.zookeeper_connect)
    a, b = (ConsoleConsumer(cluster, tmp_path / f"{n}.out") for n in "ab")
    try:
        cluster.wait_until(
            lambda: len(watch.owners()) == 6 and len({_consumer_of(o) for o in watch.owners().values()}) == 2,
            30,
            message="two consumers own the partitions",
        )
        b.stop(signal.SIGTERM)
        left_at = time.monotonic()
        cluster.wait_until(
            lambda: len(watch.owners()) == 6 and len({_consumer_of(o) for o in watch.owners().values()}) == 1,
            SESSION_MS / 1000,
            message="the remaining consumer owns everything",
        )
        assert time.monotonic() - left_at < SESSION_MS / 1000 - 2  # well before a session could expire

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_partitions([NewPartitions(TOPIC, 8)])[TOPIC].result(30)
        cluster.wait_until(lambda: len(watch.owners()) == 8, 30, message="partitions 6 and 7 owned")
        fresh = _produce(cluster, "three", 80, partitions=8)
        cluster.wait_until(
            lambda: sum(1 for _p, _o, v in a.records() if v.startswith(b"three-")) >= 80, 30, message="80 read"
        )
        assert {p for p, _o, v in a.records() if v.startswith(b"three-")} == set(range(8))
        assert sorted(v for _p, _o, v in a.records() if v.startswith(b"three-")) == sorted(fresh)
        assert watch.violations == []
    finally:
        a.stop()
        b.stop()
        watch.close()


def test_zookeeper_offsets_are_read_by_offset_fetch_v0_and_the_tool(cluster: LocalCluster) -> None:
    expected = {p: _committed(cluster, p) for p in range(8)}
    assert all(v >= 0 for v in expected.values())

    async def fetch() -> dict[int, int]:
        host, port = cluster.bootstrap_servers.split(",")[0].split(":")
        async with KafkaConnection(host, int(port)) as conn:
            topic = legacy.OffsetFetchRequestTopicV0(name=TOPIC, partition_indexes=tuple(range(8)))
            answer: Any = await conn.send(legacy.OffsetFetchRequestV0(group_id=GROUP, topics=(topic,)))
            return {int(p.partition_index): int(p.committed_offset) for t in answer.topics for p in t.partitions}

    assert asyncio.run(fetch()) == expected
    out = odradek("consumer-groups", "--zookeeper", cluster.zookeeper_connect, "--describe", "--group", GROUP)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    assert {int(r[2]): int(r[3]) for r in rows if r[1] == TOPIC} == expected
    argv = ["consumer-groups", "--zookeeper", cluster.zookeeper_connect, "--list"]
    listed = odradek(*argv)
    assert listed.returncode == 0, listed.stderr
    assert GROUP in listed.stdout.split()


def test_a_producer_with_only_zookeeper_follows_leaders_and_brokers(cluster: LocalCluster) -> None:
    """The producer follows a leader change and the broker rejoining; a ZooKeeper consumer of the
    topic rebalances when the broker leaves and again when it joins, and reads all 90 records."""
    topic = "zk-produced"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    config = ConsumerConfig("zk-join", cluster.zookeeper_connect, auto_offset_reset="smallest")
    config.rebalance_backoff_ms = 300

    async def run() -> tuple[int, set[int], set[int], list[bytes]]:
        sent = 0
        # a killed leader is replaced once its ZooKeeper session expires (6 s): retry for up to 15 s
        async with (
            ZkProducer(zookeeper_connect=cluster.zookeeper_connect, retries=150) as producer,
            ZookeeperConsumerConnector(config, {topic: 1}) as consumer,
        ):
            assert len(consumer.owned) == 3
            for i in range(30):
                await producer.send(topic, b"before-%d" % i, partition=i % 3)
                sent += 1
            info = producer.broker_partition_info
            before = set(info.brokers)
            leader = info.leader_of(info_tp(topic))
            rebalances = consumer.rebalances
            await asyncio.to_thread(cluster.kill9, leader)
            for i in range(30):  # the leader of partition 0 is gone: sends move to the new one
                await producer.send(topic, b"during-%d" % i, partition=i % 3)
                sent += 1
            await _until(lambda: consumer.rebalances > rebalances, "a rebalance when the broker left")
            rebalances = consumer.rebalances
            await asyncio.to_thread(cluster.restart, leader)
            await _until(lambda: leader in info.brokers and info.reads >= 3, "the restarted broker in the map")
            await _until(lambda: consumer.rebalances > rebalances, "a rebalance when the broker joined")
            for i in range(30):
                await producer.send(topic, b"after-%d" % i, partition=i % 3)
                sent += 1
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < sent and time.monotonic() < deadline:
                values += [r.value or b"" for r in await consumer.poll(200)]
            return sent, before, set(info.brokers), values

    sent, before, after, values = asyncio.run(run())
    assert sent == 90 and before == after == {1, 2, 3}
    assert len(values) == 90 and len(set(values)) == 90


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def info_tp(topic: str) -> Any:
    from odradek.client.cluster import TopicPartition

    return TopicPartition(topic, 0)


@pytest.mark.parametrize("dual", [False, True], ids=["kafka", "dual"])
def test_offsets_stored_in_kafka(cluster: LocalCluster, dual: bool) -> None:
    """``offsets.storage=kafka``: commits go to the group coordinator (and, with
    ``dual.commit.enabled``, to ZooKeeper too); the next consumer of the group starts there."""
    from confluent_kafka import Consumer as CConsumer
    from confluent_kafka import TopicPartition as CTopicPartition

    topic, group = f"zk-kafka-offsets-{dual}", f"zk-kafka-{dual}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})

    def produce(prefix: str) -> None:
        for i in range(20):
            producer.produce(topic, value=b"%s-%d" % (prefix.encode(), i), partition=i % 2)
        assert producer.flush(30) == 0

    config = ConsumerConfig(group, cluster.zookeeper_connect, auto_offset_reset="smallest", auto_commit_enable=False)
    config.offsets_storage, config.dual_commit_enabled = "kafka", dual

    async def read(expected: int) -> list[bytes]:
        async with ZookeeperConsumerConnector(config, {topic: 1}) as consumer:
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < expected and time.monotonic() < deadline:
                values += [r.value or b"" for r in await consumer.poll(200)]
            await consumer.commit_offsets()
            return values

    produce("first")
    assert sorted(asyncio.run(read(20))) == sorted(b"first-%d" % i for i in range(20))
    checker = CConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        committed = checker.committed([CTopicPartition(topic, p) for p in range(2)], timeout=10)
    finally:
        checker.close()
    assert [c.offset for c in committed] == [10, 10]  # in __consumer_offsets
    in_zookeeper = [cluster.read_znode(f"/consumers/{group}/offsets/{topic}/{p}") for p in range(2)]
    assert in_zookeeper == ([b"10", b"10"] if dual else [None, None])
    produce("second")
    assert sorted(asyncio.run(read(20))) == sorted(b"second-%d" % i for i in range(20))  # from the commit


def test_a_consumer_whose_session_expired_registers_again(cluster: LocalCluster, tmp_path: Path) -> None:
    """SIGSTOP a console consumer past its session timeout: its registration and owner znodes go
    with the session; after SIGCONT it registers again, claims the partitions and reads on."""
    watch = OwnerWatch(cluster.zookeeper_connect)
    consumer = ConsoleConsumer(cluster, tmp_path / "s.out")
    try:
        cluster.wait_until(
            lambda: len(watch.owners()) == 8 and len({_consumer_of(o) for o in watch.owners().values()}) == 1,
            30,
            message="one consumer owns the 8 partitions",
        )
        consumer_id = _consumer_of(next(iter(watch.owners().values())))
        registration = f"/consumers/{GROUP}/ids/{consumer_id}"
        assert cluster.read_znode(registration) is not None
        os.kill(consumer.proc.pid, signal.SIGSTOP)
        try:
            cluster.wait_until(
                lambda: cluster.read_znode(registration) is None and not watch.owners(),
                SESSION_MS / 1000 + 20,
                message="the stopped consumer's session expired",
            )
        finally:
            os.kill(consumer.proc.pid, signal.SIGCONT)
        cluster.wait_until(
            lambda: (
                cluster.read_znode(registration) is not None
                and len(watch.owners()) == 8
                and {_consumer_of(o) for o in watch.owners().values()} == {consumer_id}
            ),
            30,
            message="the consumer registered again under its id and owns every partition",
        )
        fresh = _produce(cluster, "five", 80, partitions=8)
        cluster.wait_until(
            lambda: sum(1 for _p, _o, v in consumer.records() if v.startswith(b"five-")) >= 80, 30, message="80 read"
        )
        assert sorted(v for _p, _o, v in consumer.records() if v.startswith(b"five-")) == sorted(fresh)
        assert watch.violations == []
    finally:
        consumer.stop()
        watch.close()


def test_a_whitelist_consumer_follows_new_topics_and_its_offsets_can_be_reset(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})

    def create_and_produce(topic: str) -> list[bytes]:
        admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
        values = [b"%s-%d" % (topic.encode(), i) for i in range(10)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % 2)
        assert producer.flush(30) == 0
        return values

    def groups(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["consumer-groups", "--zookeeper", cluster.zookeeper_connect, "--group", "zk-wl", *args]
        return odradek(*argv)

    config = ConsumerConfig("zk-wl", cluster.zookeeper_connect, auto_offset_reset="smallest")
    config.rebalance_backoff_ms = 300
    reset = ("--reset-offsets", "--all-topics", "--to-earliest", "--execute")

    async def read(connector: ZookeeperConsumerConnector, expected: int) -> list[bytes]:
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < expected and time.monotonic() < deadline:
            values += [r.value or b"" for r in await connector.poll(200)]
        return values

    a = create_and_produce("wl-a")

    async def run() -> tuple[list[bytes], list[bytes], set[str], subprocess.CompletedProcess[str]]:
        async with ZookeeperConsumerConnector(config, whitelist=r"wl-.*") as connector:
            got = await read(connector, 10)
            b = await asyncio.to_thread(create_and_produce, "wl-b")  # a new topic matching the whitelist
            got += await read(connector, 10)
            refused = await asyncio.to_thread(groups, *reset)  # the group has a registered consumer
            return got, b, {tp.topic for tp in connector.owned}, refused

    got, b, owned_topics, refused = asyncio.run(run())
    assert sorted(got) == sorted(a + b) and owned_topics == {"wl-a", "wl-b"}
    assert refused.returncode == 1 and "inactive" in refused.stderr
    offsets = {t: [cluster.read_znode(f"/consumers/zk-wl/offsets/{t}/{p}") for p in range(2)] for t in ("wl-a", "wl-b")}
    assert offsets == {"wl-a": [b"5", b"5"], "wl-b": [b"5", b"5"]}  # committed when it left
    done = groups(*reset)
    assert done.returncode == 0, done.stderr
    paths = [f"/consumers/zk-wl/offsets/{t}/{p}" for t in ("wl-a", "wl-b") for p in (0, 1)]
    assert [cluster.read_znode(path) for path in paths] == [b"0"] * 4

    async def again() -> list[bytes]:
        async with ZookeeperConsumerConnector(config, whitelist=r"wl-.*") as connector:
            return await read(connector, 20)

    assert sorted(asyncio.run(again())) == sorted(a + b)  # from the reset offsets
