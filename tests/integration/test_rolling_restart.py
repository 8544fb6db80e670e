"""A rolling restart of three broker processes with SIGTERM while clients run.

An idempotent acks=all producer sends without pause and a consumer group reads; each broker in
turn is stopped with SIGTERM (controlled shutdown: the controller moves its leaders first),
started again, and waited for until every partition's ISR is whole. At the end every
acknowledged record is in the log exactly once and in the order it was sent per partition, the
consumer group saw every record, and the automatic leader rebalance has given every partition
back to its preferred replica.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "rolling"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    c = odradek_cluster_module(
        3,
        overrides={"leader.imbalance.check.interval.seconds": "2", "leader.imbalance.per.broker.percentage": "0"},
        zookeeper_connect=zookeeper_server.chroot_connect(),
    )
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    c.wait_until(lambda: _isr_whole(c), timeout_s=20, message="topic in sync")
    yield c


def _state(cluster: LocalCluster, partition: int) -> dict[str, object]:
    return json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}/partitions/{partition}/state") or b"{}")


def _isr_whole(cluster: LocalCluster) -> bool:
    return all(len(_state(cluster, p).get("isr", [])) == 3 for p in range(PARTITIONS))  # type: ignore[arg-type]


class _Producing(threading.Thread):
    def __init__(self, bootstrap: str, prefix: bytes = b"r") -> None:
        super().__init__(daemon=True)
        self.prefix = prefix
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 60000,
            }
        )
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[str] = []
        self.stop = threading.Event()

    def _delivered(self, err: object, msg: object) -> None:
        if err is None:
            self.acked[msg.partition()].append(msg.value())  # type: ignore[attr-defined]
        else:
            self.failed.append(str(err))

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(
                TOPIC, b"%s-%06d" % (self.prefix, i), partition=i % PARTITIONS, on_delivery=self._delivered
            )
            self.producer.poll(0.002)
            i += 1
        self.producer.flush(60)


def _read_all(bootstrap: str) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rolling-check", "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    ended: set[int] = set()
    deadline = time.monotonic() + 60
    while len(ended) < PARTITIONS and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.5):
            if m.error() is None:
                out[m.partition()].append(m.value())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                ended.add(m.partition())
    consumer.close()
    return out


def test_a_broker_stopped_with_sigterm_leaves_every_isr_and_stays_out(cluster: LocalCluster) -> None:
    """Controlled shutdown: when the process has exited no partition is led by it or counts it in
    sync, and it is not taken back into an ISR by a last fetch (acks=all would wait for it)."""
    producing = _Producing(cluster.bootstrap_servers, prefix=b"sigterm")
    producing.start()
    cluster.wait_until(lambda: sum(len(v) for v in producing.acked.values()) >= 200, timeout_s=20)
    cluster.stop(3)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        for p in range(PARTITIONS):
            state = _state(cluster, p)
            assert state["leader"] != 3 and 3 not in state["isr"], f"partition {p}: {state}"  # type: ignore[operator]
        time.sleep(0.05)
    producing.stop.set()
    producing.join(60)
    assert producing.failed == []
    cluster.restart(3)
    cluster.wait_until(lambda: _isr_whole(cluster), timeout_s=40, message="ISR whole after broker 3 came back")


def test_rolling_restart_loses_and_duplicates_nothing(cluster: LocalCluster) -> None:
    group_seen: list[bytes] = []
    consuming = threading.Event()

    def consume() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "rolling-group",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([TOPIC])
        while not consuming.is_set():
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    group_seen.append(m.value())
        consumer.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    producing = _Producing(cluster.bootstrap_servers)
    producing.start()

    def acked_more(than: int) -> bool:
        return sum(len(v) for v in producing.acked.values()) >= than + 200

    cluster.wait_until(lambda: acked_more(0), timeout_s=20, message="records acknowledged")
    for broker_id in (1, 2, 3):
        cluster.restart(broker_id)  # SIGTERM (controlled shutdown), then start again
        cluster.wait_until(lambda: _isr_whole(cluster), timeout_s=40, message=f"ISR whole after broker {broker_id}")
        before = sum(len(v) for v in producing.acked.values())
        cluster.wait_until(lambda b=before: acked_more(b), timeout_s=20, message="producing again")
    producing.stop.set()
    producing.join(90)
    assert producing.failed == []
    acked = sum(len(v) for v in producing.acked.values())
    assert acked > 1000

    stored = _read_all(cluster.bootstrap_servers)
    for p in range(PARTITIONS):
        counts = Counter(stored[p])
        assert not [v for v, n in counts.items() if n > 1], f"partition {p} holds duplicates"
        assert [v for v in stored[p] if v in set(producing.acked[p])] == producing.acked[p], f"partition {p}"

    cluster.wait_until(lambda: set(group_seen) >= {v for vs in producing.acked.values() for v in vs}, timeout_s=30)
    consuming.set()
    reader.join(30)

    def preferred_leaders() -> bool:
        assignment = json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}") or b"{}")["partitions"]
        return all(_state(cluster, p)["leader"] == assignment[str(p)][0] for p in range(PARTITIONS))

    cluster.wait_until(preferred_leaders, timeout_s=30, message="leadership back to the preferred replicas")
