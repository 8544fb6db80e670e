"""Pipelined acks=all Produce (``odradek.produce.pipelined.requests``) across broker processes on
a real ZooKeeper: a connection's next acks=all Produce is appended while an earlier one waits for
the ISR, answers leave in request order, and anything else waits for the pipeline to drain.

One 2-broker cluster for the module, with pipelining 8 and a replica lag of 10 s (a follower
stopped with SIGSTOP stays in the ISR for the whole of a test). Topic ``held`` has its leader on
broker 1 and its follower on broker 2 (min.insync.replicas 2): with broker 2 stopped, an acks=all
Produce to it waits. Topic ``free`` is on broker 1 only: an acks=all Produce to it is complete once
appended. Each test resumes broker 2 before it ends.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(120)]

HELD, FREE, STREAM = "held", "free", "stream"


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    c = odradek_cluster_module(
        2,
        zookeeper_connect=zookeeper_server.chroot_connect(),
        overrides={"odradek.produce.pipelined.requests": "8", "replica.lag.time.max.ms": "10000"},
    )
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    topics = [
        NewTopic(HELD, num_partitions=1, replica_assignment=[[1, 2]], config={"min.insync.replicas": "2"}),
        NewTopic(FREE, num_partitions=1, replica_assignment=[[1]]),
        NewTopic(STREAM, num_partitions=1, replica_assignment=[[1, 2]], config={"min.insync.replicas": "2"}),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)
    c.wait_until(lambda: _isr(c, HELD) == [1, 2] and _isr(c, STREAM) == [1, 2], timeout_s=20, message="in sync")
    yield c


def _isr(cluster: LocalCluster, topic: str) -> list[int]:
    import json

    state = json.loads(cluster.read_znode(f"/brokers/topics/{topic}/partitions/0/state") or b"{}")
    return sorted(state.get("isr", []))


def _address(cluster: LocalCluster, broker_id: int) -> tuple[str, int]:
    host, port = cluster.broker(broker_id).bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def _produce(conn: KafkaConnection, topic: str, acks: int, value: bytes) -> Any:
    rb = conn.builder(0, 9, 11)
    part = rb.make("PartitionProduceData", index=0, records=build_batch([Record(b"k", value)]))
    return rb(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=20),
        topic_data=(rb.make("TopicProduceData", name=topic, partition_data=(part,)),),
    )


def _metadata(conn: KafkaConnection) -> Any:
    rb = conn.builder(3, 9, 12)
    return rb(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


async def _end_offset(conn: KafkaConnection, topic: str) -> int:
    rb = conn.builder(2, 5, 9)
    part = rb.make("ListOffsetsPartition", partition_index=0, timestamp=-1, current_leader_epoch=-1)
    request = rb(
        replica_id=-1, isolation_level=0, topics=(rb.make("ListOffsetsTopic", name=topic, partitions=(part,)),)
    )
    response = await conn.send(request)
    return int(response.topics[0].partitions[0].offset)


async def _pipeline(cluster: LocalCluster, second: Callable[[KafkaConnection], Any]) -> dict[str, Any]:
    """With broker 2 stopped: acks=all to ``held``, then ``second``, then Metadata, on one
    connection to broker 1. Returns what a second connection saw of ``free`` while ``held``
    waited, the order the answers arrived in, and the answers."""
    host, port = _address(cluster, 1)
    async with (
        KafkaConnection(host, port, request_timeout_ms=30000) as conn,
        KafkaConnection(host, port, request_timeout_ms=5000) as probe,
    ):
        before = await _end_offset(probe, FREE)
        answered: list[str] = []
        cluster.sigstop(2)
        try:
            tasks = {}
            for name, request in (
                ("held", _produce(conn, HELD, -1, b"h")),
                ("second", second(conn)),
                ("metadata", _metadata(conn)),
            ):
                task = asyncio.get_running_loop().create_task(conn.send(request))
                task.add_done_callback(lambda _t, name=name: answered.append(name))
                tasks[name] = task
                await asyncio.sleep(0)  # written in this order
            seen: list[int] = []
            # held waits for the stopped follower for replica.lag.time.max.ms (10 s): 5 s of
            # polling leaves a loaded CI machine room to append the second request
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                seen.append(await _end_offset(probe, FREE))
                if seen[-1] > before:
                    break
                await asyncio.sleep(0.05)
            pending_then = sorted(name for name, task in tasks.items() if not task.done())
        finally:
            cluster.sigcont(2)
        results = {name: await task for name, task in tasks.items()}
        after = await _end_offset(probe, FREE)
    return {"before": before, "seen": seen, "after": after, "pending": pending_then, "order": answered, **results}


def _error(response: Any) -> int:
    return int(response.responses[0].partition_responses[0].error_code)


def test_an_acks_all_produce_is_appended_while_the_one_before_waits(cluster: LocalCluster) -> None:
    """The second acks=all Produce (to a partition with no follower) is in the log while the first
    still waits for its stopped follower; its answer still comes after the first's, and the
    Metadata request after both."""
    out = asyncio.run(_pipeline(cluster, lambda conn: _produce(conn, FREE, -1, b"f")))
    assert out["seen"][-1] == out["before"] + 1, out["seen"]
    assert out["pending"] == ["held", "metadata", "second"]
    assert out["order"] == ["held", "second", "metadata"]
    assert _error(out["held"]) == ErrorCode.none and _error(out["second"]) == ErrorCode.none
    assert out["second"].responses[0].partition_responses[0].base_offset == out["before"]


def test_a_request_that_is_not_an_acks_all_produce_waits_for_the_pipeline(cluster: LocalCluster) -> None:
    """An acks=1 Produce after a waiting acks=all one is not even appended until the first is
    answered (a connection is muted then, as Kafka's is)."""
    out = asyncio.run(_pipeline(cluster, lambda conn: _produce(conn, FREE, 1, b"f")))
    assert set(out["seen"]) == {out["before"]}, out["seen"]
    assert out["pending"] == ["held", "metadata", "second"]
    assert out["order"] == ["held", "second", "metadata"]
    assert out["after"] == out["before"] + 1
    assert _error(out["second"]) == ErrorCode.none


def test_an_idempotent_producer_streams_through_the_pipeline_in_order(cluster: LocalCluster) -> None:
    """librdkafka with idempotence (5 requests in flight) and small batches: every record once, in
    the order sent, with the follower in the ISR throughout."""
    count = 20_000
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 1,
            "batch.size": 16384,
        }
    )
    failed: list[Any] = []
    for i in range(count):
        while True:
            try:
                producer.produce(
                    STREAM, str(i).encode().ljust(200, b"."), on_delivery=lambda e, _m: e and failed.append(e)
                )
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0 and not failed, failed[:3]
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "pipeline-check", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([STREAM])
    values: list[int] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            assert message.error() is None, message.error()
            values.append(int(message.value().rstrip(b".")))
    consumer.close()
    assert values == list(range(count))
    assert _isr(cluster, STREAM) == [1, 2]
