"""Three broker processes on a real ZooKeeper: the controller reaches them over the wire protocol.

One cluster for the module (the tests run in order and build on each other): topic creation with
replication factor 3, the same Metadata from every broker, produce to every leader, fencing of an
older controller epoch, topic deletion through StopReplica (also with a replica's broker down until it
returns), and controller failover after kill -9.
The brokers listen on ``localhost`` and advertise it as it is, so the controller's connections,
the replica fetchers and the clients all reach brokers by that name.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from odradek.cli.cluster import LocalCluster
from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.inter_broker_messages import request_class
from odradek.protocol.messages import nested
from odradek.protocol.records import Record, build_batch
from odradek.testing_zk import ZooKeeperServer

from .cli_support import odradek

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(120)]

TOPIC = "r3"
PartitionView = tuple[int, tuple[int, ...], tuple[int, ...]]


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    overrides = {"listeners": "PLAINTEXT://localhost:{port}"}
    yield odradek_cluster_module(3, overrides=overrides, zookeeper_connect=zookeeper_server.chroot_connect())


def _topics(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return odradek("topics", "--bootstrap-server", cluster.bootstrap_servers, *args)


async def _send(address: str, build: Callable[[KafkaConnection], Any]) -> Any:
    host, port = address.split(":")
    async with KafkaConnection(host, int(port), request_timeout_ms=3000) as conn:
        return await conn.send(build(conn))


def _metadata(address: str, topic: str = TOPIC) -> tuple[int, set[int], dict[int, PartitionView]]:
    """(controller id, broker ids, partition -> (leader, replicas, isr)) as one broker answers."""

    def build(conn: KafkaConnection) -> Any:
        rb = conn.builder(3, max_version=12)
        return rb(
            topics=(rb.make("MetadataRequestTopic", name=topic, topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )

    response = asyncio.run(_send(address, build))
    (t,) = response.topics
    partitions = {
        int(p.partition_index): (int(p.leader_id), tuple(p.replica_nodes), tuple(p.isr_nodes))
        for p in t.partitions
        if p.error_code == ErrorCode.none
    }
    return int(response.controller_id), {int(b.node_id) for b in response.brokers}, partitions


def _controller_epoch(cluster: LocalCluster) -> int:
    data = cluster.read_znode("/controller_epoch")
    assert data is not None
    return int(data)


def _controller_id(cluster: LocalCluster) -> int | None:
    data = cluster.read_znode("/controller")
    return None if data is None else int(json.loads(data)["brokerid"])


def _consistent(cluster: LocalCluster, brokers: list[int], partitions: int) -> dict[int, PartitionView] | None:
    """Every broker's view of TOPIC when all agree, list only live brokers and have ``partitions`` partitions."""
    views = [_metadata(cluster.broker(b).bootstrap_servers) for b in brokers]
    first = views[0][2]
    if len(first) != partitions or any(v[2] != first for v in views):
        return None
    if any(v[1] != set(brokers) for v in views):
        return None
    return first


def test_create_topic_with_replication_factor_3(cluster: LocalCluster) -> None:
    result = _topics(cluster, "--create", "--topic", TOPIC, "--partitions", "6", "--replication-factor", "3")
    assert result.returncode == 0, result.stderr
    assert f"Created topic {TOPIC}" in result.stdout


def test_every_broker_answers_the_same_metadata_within_a_second(cluster: LocalCluster) -> None:
    view = cluster.wait_until(lambda: _consistent(cluster, [1, 2, 3], 6), timeout_s=1.0, interval_s=0.02)
    for leader, replicas, isr in view.values():
        assert sorted(replicas) == [1, 2, 3]
        assert leader in (1, 2, 3) and leader == replicas[0]
        assert sorted(isr) == [1, 2, 3]
    for broker_id, broker in cluster.brokers.items():
        registration = json.loads(cluster.read_znode(f"/brokers/ids/{broker_id}") or b"{}")
        assert registration["endpoints"] == [f"PLAINTEXT://localhost:{broker.port}"]
        assert (registration["host"], registration["port"]) == ("localhost", broker.port)


def test_each_leader_accepts_a_produce_with_acks_1(cluster: LocalCluster) -> None:
    _, _, view = _metadata(cluster.broker(1).bootstrap_servers)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
    delivered: dict[int, Any] = {}
    for partition in view:
        producer.produce(
            TOPIC,
            f"v{partition}".encode(),
            partition=partition,
            on_delivery=lambda err, msg: delivered.__setitem__(msg.partition(), err or msg.offset()),
        )
    assert producer.flush(20) == 0
    assert delivered == dict.fromkeys(view, 0)
    for partition, (leader, _replicas, _isr) in view.items():
        # the record is in the leader's log directory (replication to followers comes with the fetchers)
        log_file = Path(cluster.broker(leader).data_dir) / f"{TOPIC}-{partition}" / "00000000000000000000.log"
        assert log_file.stat().st_size > 0


def test_a_follower_refusing_produce_and_fetch_names_the_leader(cluster: LocalCluster) -> None:
    """KIP-951: Produce v11 and Fetch v16 sent to a follower are answered NOT_LEADER_OR_FOLLOWER with
    the leader's id and epoch (``current_leader``) and its address (``node_endpoints``)."""
    _, _, view = _metadata(cluster.broker(1).bootstrap_servers)
    partition, (leader, replicas, _isr) = next(iter(view.items()))
    follower = next(r for r in replicas if r != leader)
    state = json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}/partitions/{partition}/state") or b"{}")
    topic_id = uuid.UUID(
        bytes=base64.urlsafe_b64decode(
            json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}") or b"{}")["topic_id"] + "=="
        )
    )

    def produce(conn: KafkaConnection) -> Any:
        rb = conn.builder(0, 11, 11)
        batch = build_batch([Record(b"k", b"v")])
        part = rb.make("PartitionProduceData", index=partition, records=batch)
        return rb(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(rb.make("TopicProduceData", name=TOPIC, partition_data=(part,)),),
        )

    def fetch(conn: KafkaConnection) -> Any:
        rb = conn.builder(1, 16, 16)
        part = rb.make("FetchPartition", partition=partition, fetch_offset=0, partition_max_bytes=1024)
        return rb(
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            topics=(rb.make("FetchTopic", topic_id=topic_id, partitions=(part,)),),
            forgotten_topics_data=(),
        )

    address = cluster.broker(follower).bootstrap_servers
    leader_port = int(cluster.broker(leader).bootstrap_servers.rsplit(":", 1)[1])
    produced = asyncio.run(_send(address, produce))
    answer = produced.responses[0].partition_responses[0]
    fetched = asyncio.run(_send(address, fetch))
    fetched_part = fetched.responses[0].partitions[0]
    for error_code, hint, endpoints in (
        (answer.error_code, answer.current_leader, produced.node_endpoints),
        (fetched_part.error_code, fetched_part.current_leader, fetched.node_endpoints),
    ):
        assert error_code == ErrorCode.not_leader_or_follower
        assert (hint.leader_id, hint.leader_epoch) == (leader, state["leader_epoch"])
        assert [(n.node_id, n.port) for n in endpoints] == [(leader, leader_port)]


def _partition_requests(topic: str, topic_id: uuid.UUID, partition: int) -> dict[str, Callable[[KafkaConnection], Any]]:
    """One request per partition API, each naming ``topic``'s ``partition`` only."""

    def produce(conn: KafkaConnection) -> Any:
        rb = conn.builder(0, 11, 11)
        part = rb.make("PartitionProduceData", index=partition, records=build_batch([Record(b"k", b"v")]))
        data = (rb.make("TopicProduceData", name=topic, partition_data=(part,)),)
        return rb(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5), topic_data=data)

    def fetch(conn: KafkaConnection) -> Any:
        rb = conn.builder(1, 16, 16)
        part = rb.make("FetchPartition", partition=partition, fetch_offset=0, partition_max_bytes=1024)
        topics = (rb.make("FetchTopic", topic_id=topic_id, partitions=(part,)),)
        return rb(max_wait=datetime.timedelta(0), min_bytes=0, topics=topics, forgotten_topics_data=())

    def list_offsets(conn: KafkaConnection) -> Any:
        rb = conn.builder(2, 9, 9)
        part = rb.make("ListOffsetsPartition", partition_index=partition, timestamp=-1)
        return rb(
            replica_id=-1, isolation_level=0, topics=(rb.make("ListOffsetsTopic", name=topic, partitions=(part,)),)
        )

    def offset_for_leader_epoch(conn: KafkaConnection) -> Any:
        rb = conn.builder(23, 4, 4)
        part = rb.make("OffsetForLeaderPartition", partition=partition, leader_epoch=0)
        return rb(replica_id=-1, topics=(rb.make("OffsetForLeaderTopic", topic=topic, partitions=(part,)),))

    def delete_records(conn: KafkaConnection) -> Any:
        rb = conn.builder(21, 2, 2)
        part = rb.make("DeleteRecordsPartition", partition_index=partition, offset=-1)
        topics = (rb.make("DeleteRecordsTopic", name=topic, partitions=(part,)),)
        return rb(topics=topics, timeout=datetime.timedelta(seconds=5))

    def describe_producers(conn: KafkaConnection) -> Any:
        rb = conn.builder(61, 0, 0)
        return rb(topics=(rb.make("TopicRequest", name=topic, partition_indexes=(partition,)),))

    return {
        "Produce": produce,
        "Fetch": fetch,
        "ListOffsets": list_offsets,
        "OffsetForLeaderEpoch": offset_for_leader_epoch,
        "DeleteRecords": delete_records,
        "DescribeProducers": describe_producers,
    }


def _partition_error(response: Any) -> int:
    """The error code of the one partition a :func:`_partition_requests` answer holds."""
    (topic,) = getattr(response, "responses", None) or response.topics
    (part,) = getattr(topic, "partition_responses", None) or topic.partitions
    return int(part.error_code)


def test_partition_apis_on_a_broker_that_is_not_a_replica_answer_not_leader_or_follower(
    cluster: LocalCluster,
) -> None:
    """Kafka's ``getPartitionOrError``: a partition that exists but is not hosted here is
    NOT_LEADER_OR_FOLLOWER (clients refresh metadata and go to the leader); one that does not exist
    is UNKNOWN_TOPIC_OR_PARTITION."""
    result = _topics(cluster, "--create", "--topic", "solo", "--replica-assignment", "1")
    assert result.returncode == 0, result.stderr
    cluster.wait_until(lambda: _metadata(cluster.broker(2).bootstrap_servers, "solo")[2], timeout_s=10)
    topic_id = uuid.UUID(
        bytes=base64.urlsafe_b64decode(
            json.loads(cluster.read_znode("/brokers/topics/solo") or b"{}")["topic_id"] + "=="
        )
    )
    answers = {
        (name, partition): _partition_error(asyncio.run(_send(cluster.broker(2).bootstrap_servers, build)))
        for partition in (0, 1)
        for name, build in _partition_requests("solo", topic_id, partition).items()
    }
    assert answers == {
        **{(name, 0): ErrorCode.not_leader_or_follower for name, _ in answers},
        **{(name, 1): ErrorCode.unknown_topic_or_partition for name, _ in answers},
    }
    # the leader itself serves them
    leader = cluster.broker(1).bootstrap_servers
    assert _partition_error(asyncio.run(_send(leader, _partition_requests("solo", topic_id, 0)["ListOffsets"]))) == 0


def test_leader_and_isr_with_an_older_controller_epoch_is_refused(cluster: LocalCluster) -> None:
    epoch = _controller_epoch(cluster)
    _, _, view = _metadata(cluster.broker(2).bootstrap_servers)
    leader, replicas, isr = view[0]

    def build(conn: KafkaConnection) -> Any:
        version = conn.version_for(4, max_version=7)
        cls = request_class(4, version)
        state = nested(cls, "LeaderAndIsrPartitionState")(
            partition_index=0,
            controller_epoch=epoch - 1,
            leader=replicas[-1],
            leader_epoch=99,
            isr=isr,
            partition_epoch=99,
            replicas=replicas,
            adding_replicas=(),
            removing_replicas=(),
        )
        topic = nested(cls, "LeaderAndIsrTopicState")(topic_name=TOPIC, topic_id=None, partition_states=(state,))
        return cls(
            controller_id=leader,
            controller_epoch=epoch - 1,
            type=0,
            topic_states=(topic,),
            live_leaders=(),
        )

    response = asyncio.run(_send(cluster.broker(2).bootstrap_servers, build))
    assert response.error_code == ErrorCode.stale_controller_epoch
    (topic,) = response.topics
    assert [p.error_code for p in topic.partition_errors] == [ErrorCode.stale_controller_epoch]
    # nothing changed: every broker still reports the controller's leader
    assert _metadata(cluster.broker(2).bootstrap_servers)[2][0] == (leader, replicas, isr)


def test_deleting_a_topic_removes_its_partition_directories_on_every_broker(cluster: LocalCluster) -> None:
    assert (
        _topics(cluster, "--create", "--topic", "gone", "--partitions", "3", "--replication-factor", "3").returncode
        == 0
    )
    dirs = [Path(b.data_dir) / f"gone-{p}" for b in cluster.brokers.values() for p in range(3)]
    cluster.wait_until(lambda: all(d.is_dir() for d in dirs), timeout_s=5, message="partition directories")
    result = _topics(cluster, "--delete", "--topic", "gone")
    assert result.returncode == 0, result.stderr
    cluster.wait_until(lambda: not any(d.exists() for d in dirs), timeout_s=10, message="directories deleted")

    def leftovers() -> list[Path]:  # a broker renames a log dir to *-delete, then removes it
        return [p for b in cluster.brokers.values() for p in Path(b.data_dir).iterdir() if p.name.startswith("gone-")]

    cluster.wait_until(lambda: not leftovers(), timeout_s=10, message="the renamed *-delete directories removed")
    assert not leftovers()


def test_a_topic_deleted_while_a_replica_is_down_goes_once_its_broker_returns(cluster: LocalCluster) -> None:
    created = _topics(cluster, "--create", "--topic", "downed", "--partitions", "2", "--replication-factor", "3")
    assert created.returncode == 0, created.stderr
    dirs = {b: [Path(broker.data_dir) / f"downed-{p}" for p in range(2)] for b, broker in cluster.brokers.items()}
    cluster.wait_until(lambda: all(d.is_dir() for ds in dirs.values() for d in ds), timeout_s=5, message="dirs")
    down = next(b for b in (1, 2, 3) if b != _controller_id(cluster))
    cluster.stop(down)
    cluster.wait_until(lambda: cluster.read_znode(f"/brokers/ids/{down}") is None, timeout_s=10, message="deregistered")
    deleted = _topics(cluster, "--delete", "--topic", "downed")
    assert deleted.returncode == 0, deleted.stderr
    up = [d for b, ds in dirs.items() if b != down for d in ds]
    cluster.wait_until(lambda: not any(d.exists() for d in up), timeout_s=10, message="live replicas deleted")
    # the controller waits for the stopped broker's replicas: the topic and its deletion mark stay
    assert cluster.read_znode("/brokers/topics/downed") is not None
    assert cluster.read_znode("/admin/delete_topics/downed") is not None
    assert all(d.is_dir() for d in dirs[down])
    cluster.restart(down)
    cluster.wait_until(
        lambda: (
            cluster.read_znode("/brokers/topics/downed") is None
            and cluster.read_znode("/admin/delete_topics/downed") is None
        ),
        timeout_s=20,
        message="topic deleted from ZooKeeper",
    )
    cluster.wait_until(
        lambda: not any(d.exists() for d in dirs[down]), timeout_s=10, message="returned replicas deleted"
    )


def test_killing_the_controller_elects_a_new_one_that_updates_every_broker(cluster: LocalCluster) -> None:
    old_id = _controller_id(cluster)
    old_epoch = _controller_epoch(cluster)
    assert old_id in (1, 2, 3)
    cluster.kill9(old_id)
    survivors = [b for b in (1, 2, 3) if b != old_id]
    new_id = cluster.wait_until(
        lambda: (c := _controller_id(cluster)) is not None and c != old_id and c, timeout_s=20, message="new controller"
    )
    assert new_id in survivors
    assert _controller_epoch(cluster) == old_epoch + 1
    view = cluster.wait_until(
        lambda: _consistent(cluster, survivors, 6), timeout_s=10, message="metadata after failover"
    )
    for leader, replicas, _isr in view.values():
        assert leader in survivors
        assert sorted(replicas) == [1, 2, 3]
    for broker in survivors:
        assert _metadata(cluster.broker(broker).bootstrap_servers)[0] == new_id
