"""Admin APIs against a real broker, through confluent-kafka's AdminClient and odradek's own client.

CreateTopics, DeleteTopics, CreatePartitions, DescribeCluster and DeleteRecords: results,
per-item errors, and the effect of each change as later requests see it (the config APIs are in
``test_admin_configs.py``). Raw requests at every advertised version go through
:class:`odradek.client.connection.KafkaConnection`.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from odradek.client.admin import EARLIEST, LATEST
from odradek.client.admin import NewTopic as OwnNewTopic
from odradek.client.cluster import TopicPartition as TP
from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.client.consumer import Consumer
from odradek.client.producer import Producer as OwnProducer
from odradek.errors import ErrorCode
from odradek.protocol.records import Record
from odradek.testing import BrokerRunner

from .admin_support import confluent, create, error_code_of, module_broker, with_admin, with_conn

T = TypeVar("T")
ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    yield from module_broker(tmp_path_factory, "admin-broker")


def arun(coro: Awaitable[T]) -> T:
    async def wrapper() -> T:
        return await coro

    return asyncio.run(wrapper())


def produce(broker: BrokerRunner, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def topic_names(broker: BrokerRunner) -> set[str]:
    return set(confluent(broker).list_topics(timeout=10).topics)


# --- CreateTopics ------------------------------------------------------------------------------


def test_create_topics_with_confluent(broker: BrokerRunner) -> None:
    admin = confluent(broker)
    fs = admin.create_topics(
        [
            NewTopic("ct-ok", 3, 1, config={"retention.ms": "60000", "cleanup.policy": "compact"}),
            NewTopic("ct-bad/name", 1, 1),
            NewTopic("ct-zero", 0, 1),
            NewTopic("ct-rf", 1, 2),
            NewTopic("ct-badvalue", 1, 1, config={"retention.ms": "soon"}),
            NewTopic("ct-unknown-key", 1, 1, config={"no.such.key": "1"}),
        ],
        operation_timeout=10,
    )
    codes = {name: error_code_of(f) for name, f in fs.items()}
    assert codes == {
        "ct-ok": 0,
        "ct-bad/name": KafkaError.TOPIC_EXCEPTION,
        "ct-zero": KafkaError.INVALID_PARTITIONS,
        "ct-rf": KafkaError.INVALID_REPLICATION_FACTOR,
        "ct-badvalue": KafkaError.INVALID_CONFIG,
        "ct-unknown-key": KafkaError.INVALID_CONFIG,
    }
    metadata = admin.list_topics("ct-ok", timeout=10)
    assert len(metadata.topics["ct-ok"].partitions) == 3
    again = admin.create_topics([NewTopic("ct-ok", 1, 1)], operation_timeout=10)
    assert error_code_of(again["ct-ok"]) == KafkaError.TOPIC_ALREADY_EXISTS
    names = topic_names(broker)
    assert "ct-ok" in names and not any(n.startswith("ct-") and n != "ct-ok" for n in names)


def test_create_topics_validate_only_creates_nothing(broker: BrokerRunner) -> None:
    fs = confluent(broker).create_topics([NewTopic("ct-validate", 2, 1)], validate_only=True)
    assert error_code_of(fs["ct-validate"]) == 0
    assert "ct-validate" not in topic_names(broker)
    results = with_admin(broker, lambda a: a.create_topics([OwnNewTopic("ct-validate2", 4, 1)], validate_only=True))
    result = results["ct-validate2"]
    assert result.error is None and result.num_partitions == 4 and result.replication_factor == 1
    assert result.topic_id == ZERO
    assert "ct-validate2" not in topic_names(broker)
    # validation still reports errors
    bad = with_admin(broker, lambda a: a.create_topics([OwnNewTopic("ct-validate3", -5, 1)], validate_only=True))
    assert bad["ct-validate3"].error is not None
    assert bad["ct-validate3"].error.error_code == ErrorCode.invalid_partitions


def test_create_topics_v7_returns_partitions_id_and_configs(broker: BrokerRunner) -> None:
    results = with_admin(
        broker,
        lambda a: a.create_topics(
            [
                OwnNewTopic("ct-v7", 2, 1, configs={"retention.ms": "1234"}),
                OwnNewTopic("ct-defaults"),
                OwnNewTopic("ct-manual", replica_assignment={0: [0], 1: [0]}),
            ]
        ),
    )
    v7 = results["ct-v7"]
    assert v7.error is None and (v7.num_partitions, v7.replication_factor) == (2, 1)
    assert v7.topic_id != ZERO
    assert v7.configs["retention.ms"].value == "1234" and v7.configs["retention.ms"].source == 1
    assert v7.configs["segment.bytes"].source == 5 and v7.configs["segment.bytes"].value == str(1024**3)
    assert (results["ct-defaults"].num_partitions, results["ct-defaults"].replication_factor) == (1, 1)
    assert results["ct-manual"].num_partitions == 2
    described = with_admin(broker, lambda a: a.describe_topics(["ct-v7", "ct-manual"]))
    assert described["ct-v7"].topic_id == v7.topic_id
    assert sorted(described["ct-manual"].partitions) == [0, 1]


def test_create_topics_request_errors(broker: BrokerRunner) -> None:
    async def go(conn: KafkaConnection) -> dict[str, tuple[int, str | None]]:
        rb = conn.builder(19, 2, 7)
        topics = (
            rb.make(
                "CreatableTopic", name="ct-dup", num_partitions=1, replication_factor=1, assignments=(), configs=()
            ),
            rb.make(
                "CreatableTopic", name="ct-dup", num_partitions=1, replication_factor=1, assignments=(), configs=()
            ),
            rb.make(
                "CreatableTopic",
                name="ct-both",
                num_partitions=2,
                replication_factor=1,
                assignments=(rb.make("CreatableReplicaAssignment", partition_index=0, broker_ids=(0,)),),
                configs=(),
            ),
            rb.make(
                "CreatableTopic",
                name="ct-null",
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=(rb.make("CreatableTopicConfig", name="retention.ms", value=None),),
            ),
            rb.make(
                "CreatableTopic",
                name="ct-badbroker",
                num_partitions=-1,
                replication_factor=-1,
                assignments=(rb.make("CreatableReplicaAssignment", partition_index=0, broker_ids=(7,)),),
                configs=(),
            ),
        )
        response = await conn.send(rb(topics=topics, timeout=datetime.timedelta(seconds=10), validate_only=False))
        return {t.name: (int(t.error_code), t.error_message) for t in response.topics}

    answers = with_conn(broker, go)
    assert answers["ct-dup"][0] == ErrorCode.invalid_request
    assert answers["ct-both"][0] == ErrorCode.invalid_request
    assert answers["ct-null"][0] == ErrorCode.invalid_config
    assert answers["ct-badbroker"][0] == ErrorCode.invalid_replica_assignment
    assert all(message for _, message in answers.values())


@pytest.mark.parametrize("version", range(2, 8))
def test_create_and_delete_topics_every_version(broker: BrokerRunner, version: int) -> None:
    name = f"ct-version-{version}"

    async def go(conn: KafkaConnection) -> None:
        rb = RequestBuilder(19, version)
        topic = rb.make("CreatableTopic", name=name, num_partitions=2, replication_factor=1, assignments=(), configs=())
        response = await conn.send(rb(topics=(topic,), timeout=datetime.timedelta(seconds=10), validate_only=False))
        [result] = response.topics
        assert result.error_code == ErrorCode.none
        if version >= 5:
            assert (result.num_partitions, result.replication_factor) == (2, 1)
            assert {c.name for c in result.configs} >= {"retention.ms", "cleanup.policy"}
        if version >= 7:
            assert result.topic_id != ZERO
        delete_version = min(max(version - 1, 1), 6)
        drb = RequestBuilder(20, delete_version)
        if delete_version >= 6:
            request = drb(
                topics=(drb.make("DeleteTopicState", name=name, topic_id=ZERO),), timeout=datetime.timedelta(seconds=10)
            )
        else:
            request = drb(topic_names=(name,), timeout=datetime.timedelta(seconds=10))
        [deleted] = (await conn.send(request)).responses
        assert deleted.error_code == ErrorCode.none

    with_conn(broker, go)
    assert name not in topic_names(broker)


# --- DeleteTopics ------------------------------------------------------------------------------


def test_delete_topics(broker: BrokerRunner) -> None:
    create(broker, "dt-1")
    create(broker, "dt-2")
    fs = confluent(broker).delete_topics(["dt-1", "dt-missing"], operation_timeout=10)
    assert error_code_of(fs["dt-1"]) == 0
    assert error_code_of(fs["dt-missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "dt-1" not in topic_names(broker)
    own = with_admin(broker, lambda a: a.delete_topics(["dt-2"]))
    assert own == {"dt-2": None}
    assert "dt-2" not in topic_names(broker)


def test_delete_topics_by_id_v6(broker: BrokerRunner) -> None:
    create(broker, "dt-id")
    topic_id = with_admin(broker, lambda a: a.describe_topics(["dt-id"]))["dt-id"].topic_id
    unknown = uuid.uuid4()

    async def go(conn: KafkaConnection) -> list[tuple[str | None, uuid.UUID, int]]:
        rb = RequestBuilder(20, 6)
        states = (
            rb.make("DeleteTopicState", name=None, topic_id=topic_id),
            rb.make("DeleteTopicState", name=None, topic_id=unknown),
            rb.make("DeleteTopicState", name="dt-other", topic_id=unknown),
        )
        response = await conn.send(rb(topics=states, timeout=datetime.timedelta(seconds=10)))
        return [(r.name, r.topic_id, int(r.error_code)) for r in response.responses]

    answers = with_conn(broker, go)
    assert answers == [
        ("dt-id", topic_id, ErrorCode.none),
        (None, unknown, ErrorCode.unknown_topic_id),
        ("dt-other", unknown, ErrorCode.invalid_request),
    ]
    assert "dt-id" not in topic_names(broker)


# --- CreatePartitions --------------------------------------------------------------------------


def test_create_partitions(broker: BrokerRunner) -> None:
    create(broker, "cp-1")
    admin = confluent(broker)
    fs = admin.create_partitions([NewPartitions("cp-1", 3)], operation_timeout=10)
    assert error_code_of(fs["cp-1"]) == 0
    assert len(admin.list_topics("cp-1", timeout=10).topics["cp-1"].partitions) == 3
    fs = admin.create_partitions([NewPartitions("cp-1", 2), NewPartitions("cp-missing", 2)], operation_timeout=10)
    assert error_code_of(fs["cp-1"]) == KafkaError.INVALID_PARTITIONS
    assert error_code_of(fs["cp-missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    own = with_admin(broker, lambda a: a.create_partitions({"cp-1": 5}, validate_only=True))
    assert own == {"cp-1": None}
    assert len(admin.list_topics("cp-1", timeout=10).topics["cp-1"].partitions) == 3
    from odradek.client.admin import NewPartitions as OwnNewPartitions

    errors = with_admin(
        broker,
        lambda a: a.create_partitions(
            {"cp-1": OwnNewPartitions(5, [[0]])},
        ),
    )
    assert errors["cp-1"] is not None and errors["cp-1"].error_code == ErrorCode.invalid_request
    errors = with_admin(broker, lambda a: a.create_partitions({"cp-1": OwnNewPartitions(4, [[3]])}))
    assert errors["cp-1"] is not None and errors["cp-1"].error_code == ErrorCode.invalid_replica_assignment
    assert with_admin(broker, lambda a: a.create_partitions({"cp-1": OwnNewPartitions(4, [[0]])})) == {"cp-1": None}
    # the new partition takes records
    produce(broker, "cp-1", 2, partition=3)
    offsets = with_admin(broker, lambda a: a.list_offsets({TP("cp-1", 3): LATEST}))
    assert offsets[TP("cp-1", 3)].offset == 2


# --- DescribeCluster ---------------------------------------------------------------------------


def test_describe_cluster(broker: BrokerRunner) -> None:
    result = confluent(broker).describe_cluster().result(15)
    assert result.cluster_id and result.controller.id == 0
    [node] = result.nodes
    assert (node.id, node.host, node.port) == (0, "127.0.0.1", broker.port)
    own = with_admin(broker, lambda a: a.describe_cluster())
    assert own.cluster_id == result.cluster_id and own.controller_id == 0
    assert own.brokers == [(0, "127.0.0.1", broker.port, None)]


@pytest.mark.parametrize("version", range(0, 2))
def test_describe_cluster_every_version(broker: BrokerRunner, version: int) -> None:
    async def go(conn: KafkaConnection) -> tuple[Any, Any]:
        rb = RequestBuilder(60, version)
        ok = await conn.send(
            rb(include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False)
        )
        controllers = await conn.send(
            rb(include_cluster_authorized_operations=False, endpoint_type=2, include_fenced_brokers=False)
        )
        return ok, controllers

    ok, controllers = with_conn(broker, go)
    assert ok.error_code == 0 and [b.broker_id for b in ok.brokers] == [0]
    if version >= 1:
        assert controllers.error_code == ErrorCode.unsupported_endpoint_type and controllers.brokers == ()


# --- DeleteRecords -----------------------------------------------------------------------------


def test_delete_records(broker: BrokerRunner) -> None:
    create(broker, "dr-1", partitions=2)
    produce(broker, "dr-1", 10)
    admin = confluent(broker)
    fs = admin.delete_records([TopicPartition("dr-1", 0, 4)])
    [deleted] = fs.values()
    assert deleted.result(15).low_watermark == 4
    earliest = admin.list_offsets({TopicPartition("dr-1", 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(15).offset == 4

    async def consume() -> list[int]:
        async with Consumer(broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            await consumer.assign([TP("dr-1", 0)])
            records = await consumer.poll(5000)
            return [r.offset for r in records]

    assert arun(consume())[0] == 4
    results = with_admin(
        broker,
        lambda a: a.delete_records({TP("dr-1", 0): -1, TP("dr-1", 1): 5, TP("dr-missing", 0): 1, TP("dr-1", 9): 0}),
    )
    assert results[TP("dr-1", 0)].low_watermark == 10 and results[TP("dr-1", 0)].error is None
    assert results[TP("dr-1", 1)].error.error_code == ErrorCode.offset_out_of_range  # type: ignore[union-attr]
    assert results[TP("dr-missing", 0)].error.error_code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    assert results[TP("dr-1", 9)].error.error_code == ErrorCode.unknown_topic_or_partition  # type: ignore[union-attr]
    offsets = with_admin(broker, lambda a: a.list_offsets({TP("dr-1", 0): EARLIEST, TP("dr-1", 1): EARLIEST}))
    assert (offsets[TP("dr-1", 0)].offset, offsets[TP("dr-1", 1)].offset) == (10, 0)


# --- the client on its own ---------------------------------------------------------------------


def test_own_producer_consumer_round_trip(broker: BrokerRunner) -> None:
    create(broker, "own-rt", partitions=3)

    async def go() -> list[tuple[bytes | None, bytes | None, int]]:
        async with OwnProducer(broker.bootstrap_servers, compression="zstd") as producer:
            sent = await producer.send_batch(
                "own-rt", [Record(b"k%d" % (i % 4), b"v%d" % i, [("h", b"x")]) for i in range(20)]
            )
            assert {m.partition for m in sent} <= {0, 1, 2}
        async with Consumer(broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
            await consumer.assign([TP("own-rt", p) for p in range(3)])
            out: list[Any] = []
            while len(out) < 20:
                batch = await consumer.poll(5000)
                assert batch
                out.extend(batch)
            return [(r.key, r.value, r.partition) for r in out]

    records = arun(go())
    assert sorted(v for _, v, _ in records) == sorted(b"v%d" % i for i in range(20))
    partition_of_key: dict[bytes | None, set[int]] = {}
    for key, _, partition in records:
        partition_of_key.setdefault(key, set()).add(partition)
    assert all(len(p) == 1 for p in partition_of_key.values())
