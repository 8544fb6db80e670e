"""Transactions across broker processes on a real ZooKeeper: markers go to leaders on other brokers,
``__transaction_state`` is replicated, a coordinator killed with SIGKILL mid-transaction is
replaced by one that loads the log and lets the transaction finish, and a transaction left open
past its timeout is aborted by the coordinator. Never half-visible to read_committed readers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.coordinator.transaction.metadata import partition_for
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(180)]

TXN_PARTITIONS = 3
TOPIC = "txn-data"


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    overrides = {
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "1",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
        "offsets.topic.num.partitions": "3",
    }
    c = odradek_cluster_module(3, overrides=overrides, zookeeper_connect=zookeeper_server.chroot_connect())
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    yield c


def _read(cluster: LocalCluster, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"read-{isolation}-{time.monotonic()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 20
    try:
        while len(ended) < 3 and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    values.append(m.value())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
    finally:
        consumer.close()
    return values


def _state(cluster: LocalCluster, txn_id: str) -> dict[str, object]:
    partition = partition_for(txn_id, TXN_PARTITIONS)
    path = f"/brokers/topics/__transaction_state/partitions/{partition}/state"
    return dict(json.loads(cluster.read_znode(path) or b"{}"))


def _coordinator(cluster: LocalCluster, txn_id: str) -> int:
    return int(_state(cluster, txn_id).get("leader", -1))  # type: ignore[call-overload]


def test_a_transaction_survives_its_coordinator_being_killed(cluster: LocalCluster) -> None:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": "survivor",
            "transaction.timeout.ms": 60000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, b"s-%d" % i, partition=i % 3)
    assert producer.flush(20) == 0
    victim = _coordinator(cluster, "survivor")
    cluster.kill9(victim)
    cluster.wait_until(
        lambda: _coordinator(cluster, "survivor") not in (victim, -1),
        timeout_s=30,
        message=f"a new coordinator after broker {victim}: {_state(cluster, 'survivor')}",
    )
    producer.commit_transaction(60)  # the new coordinator loaded the Ongoing state and writes the markers
    committed = [v for v in _read(cluster, "read_committed") if v.startswith(b"s-")]
    assert sorted(committed) == sorted(b"s-%d" % i for i in range(30))
    cluster.restart(victim)


def test_an_abandoned_transaction_is_aborted_after_its_timeout(cluster: LocalCluster) -> None:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": "abandoned",
            "transaction.timeout.ms": 2000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(9):
        producer.produce(TOPIC, b"a-%d" % i, partition=i % 3)
    assert producer.flush(20) == 0
    # read_committed readers stop at the open transaction; once the coordinator aborts it they pass it
    cluster.wait_until(lambda: b"after" in _read_after(cluster), timeout_s=30)
    assert not [v for v in _read(cluster, "read_committed") if v.startswith(b"a-")]
    assert len([v for v in _read(cluster, "read_uncommitted") if v.startswith(b"a-")]) == 9
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)  # its epoch was bumped by the abort


def _read_after(cluster: LocalCluster) -> list[bytes]:
    """Write a committed record behind the open transaction and read what read_committed sees."""
    writer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "behind"})
    writer.init_transactions(30)
    writer.begin_transaction()
    for p in range(3):
        writer.produce(TOPIC, b"after", partition=p)
    writer.commit_transaction(30)
    return _read(cluster, "read_committed")
