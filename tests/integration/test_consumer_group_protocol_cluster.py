"""KIP-848 consumer groups across broker processes: two librdkafka consumers with
``group.protocol=consumer`` on a 3-broker cluster on a real ZooKeeper; the group's coordinator is
killed with SIGKILL mid-stream. The new coordinator loads the group from ``__consumer_offsets``
(its epoch goes on from where it was, it does not start over), the partitions are shared without
two owners, every record is read, and reading resumes from the committed offsets (no record is
lost)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.client.connection import KafkaConnection
from odradek.coordinator.group.schemas import partition_for
from odradek.protocol.api_keys import ApiKey
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "kip848-cluster"
PARTITIONS = 6
OFFSETS_PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    overrides = {
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "offsets.topic.replication.factor": "3",
        "group.consumer.heartbeat.interval.ms": "300",
        "group.consumer.min.heartbeat.interval.ms": "100",
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.min.session.timeout.ms": "1000",
    }
    c = odradek_cluster_module(3, overrides=overrides, zookeeper_connect=zookeeper_server.chroot_connect())
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    yield c


def _produce(cluster: LocalCluster, prefix: str, count: int) -> set[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    values = {f"{prefix}-{i}".encode() for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(TOPIC, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values


def consumers_config(cluster: LocalCluster, group: str) -> dict[str, object]:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def _coordinator(cluster: LocalCluster, group: str) -> int:
    partition = partition_for(group, OFFSETS_PARTITIONS)
    data = cluster.read_znode(f"/brokers/topics/__consumer_offsets/partitions/{partition}/state")
    return int(json.loads(data or b"{}").get("leader", -1))


def _group_epoch(cluster: LocalCluster, group: str) -> int:
    """The group epoch its coordinator reports (ConsumerGroupDescribe); -1 when it has none."""

    port = cluster.broker(_coordinator(cluster, group)).port

    async def describe() -> int:
        async with KafkaConnection("127.0.0.1", port, request_timeout_ms=10000) as conn:
            rb = conn.builder(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
            response = await conn.send(rb(group_ids=(group,), include_authorized_operations=False))
        described = response.groups[0]
        return int(described.group_epoch) if described.error_code == 0 else -1

    return asyncio.run(describe())


def _consume(consumers: list[Consumer], seen: list[bytes], until: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not until() and time.monotonic() < deadline:
        for c in consumers:
            batch = [m for m in c.consume(50, 0.1) if m.error() is None]
            seen.extend(m.value() for m in batch)
            if batch:
                try:
                    c.commit(asynchronous=False)
                except Exception:  # a commit during the failover: the records come again
                    pass


def test_members_survive_their_coordinator_being_killed_and_lose_no_record(cluster: LocalCluster) -> None:
    group = f"cg-{uuid.uuid4().hex[:6]}"
    first = _produce(cluster, "before", 300)
    consumers = [Consumer(consumers_config(cluster, group)) for _ in range(2)]
    for c in consumers:
        c.subscribe([TOPIC])
    seen: list[bytes] = []
    victim = -1
    try:
        _consume(consumers, seen, lambda: len(set(seen) & first) >= 150, 60)
        assert len(set(seen) & first) >= 150
        passer = Consumer({**consumers_config(cluster, group)})  # joins and leaves: epoch 4
        passer.subscribe([TOPIC])
        _consume([passer], [], lambda: bool(passer.assignment()), 20)
        passer.close()
        epoch = _group_epoch(cluster, group)
        assert epoch >= 4
        victim = _coordinator(cluster, group)
        cluster.kill9(victim)
        second = _produce(cluster, "after", 300)
        _consume(consumers, seen, lambda: first | second <= set(seen), 120)
        assert first | second <= set(seen), f"{len((first | second) - set(seen))} records never read"
        assert _coordinator(cluster, group) not in (victim, -1)
        assert _group_epoch(cluster, group) >= epoch  # loaded, not started over

        def shared() -> bool:
            for c in consumers:
                c.poll(0.1)
            sets = [{tp.partition for tp in c.assignment()} for c in consumers]
            return sum(map(len, sets)) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS))

        deadline = time.monotonic() + 30
        while not shared() and time.monotonic() < deadline:
            pass
        assert shared()
    finally:
        for c in consumers:
            c.close()
        if victim >= 0:
            cluster.restart(victim)
