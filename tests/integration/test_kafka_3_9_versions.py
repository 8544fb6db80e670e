"""Kafka 3.9's version ranges against real clients: clients infer 3.9, consume over Fetch v13+
(topics by id), and the newest ListOffsets and Fetch versions answer as Kafka does."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.errors import ErrorCode
from odradek.server.apis import fetch as fetch_api
from odradek.testing import BrokerRunner

from .admin_support import create, module_broker, with_conn


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    yield from module_broker(tmp_path_factory, "v39")


def test_kafka_python_infers_kafka_3_9(broker: BrokerRunner) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        assert consumer.config["api_version"] == (3, 9)
    finally:
        consumer.close()


def test_confluent_consumes_over_fetch_by_topic_id(broker: BrokerRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    create(broker, "by-id", partitions=2)
    versions: list[int] = []
    handle = fetch_api.handle

    async def recording(ctx: Any) -> Any:
        versions.append(ctx.api_version)
        return await handle(ctx)

    monkeypatch.setattr(fetch_api, "handle", recording)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        producer.produce("by-id", value=b"v%d" % i, partition=i % 2)
    assert producer.flush(15) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "by-id", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["by-id"])
        values = set()
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.add(msg.value())
            if len(values) == 20:
                break
        assert values == {b"v%d" % i for i in range(20)}
    finally:
        consumer.close()
    assert versions and max(versions) >= 13  # librdkafka 2.x fetches by topic id from Kafka 3.1's v13


async def _fetch(conn: KafkaConnection, version: int, topic_id: uuid.UUID, replica_id: int = -1) -> Any:
    rb = RequestBuilder(1, version)
    part = rb.make(
        "FetchPartition",
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    fields: dict[str, Any] = {}
    if rb.has("replica_state"):
        fields["replica_state"] = rb.make("ReplicaState", replica_id=replica_id, replica_epoch=-1)
    else:
        fields["replica_id"] = replica_id
    return await conn.send(
        rb(
            cluster_id=None,
            max_wait=datetime.timedelta(milliseconds=100),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(rb.make("FetchTopic", topic_id=topic_id, partitions=(part,)),),
            forgotten_topics_data=(),
            rack_id="",
            **fields,
        )
    )


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_fetch_by_id_and_unknown_ids(broker: BrokerRunner, version: int) -> None:
    create(broker, f"ids-{version}")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(f"ids-{version}", value=b"hello", partition=0)
    assert producer.flush(15) == 0

    async def go(conn: KafkaConnection) -> tuple[Any, Any, Any, uuid.UUID]:
        metadata = RequestBuilder(3, 12)
        meta = await conn.send(
            metadata(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
        [topic_id] = [t.topic_id for t in meta.topics if t.name == f"ids-{version}"]
        known = await _fetch(conn, version, topic_id)
        unknown = await _fetch(conn, version, uuid.uuid4())
        zero = await _fetch(conn, version, uuid.UUID(int=0))
        return known, unknown, zero, topic_id

    known, unknown, zero, topic_id = with_conn(broker, go)
    assert topic_id != uuid.UUID(int=0)
    [topic] = known.responses
    assert topic.topic_id == topic_id
    [part] = topic.partitions
    assert part.error_code == ErrorCode.none and part.high_watermark == 1 and part.records
    for answer in (unknown, zero):
        [topic] = answer.responses
        assert topic.partitions[0].error_code == ErrorCode.unknown_topic_id


def test_list_offsets_v9_local_and_tiered_timestamps(broker: BrokerRunner) -> None:
    create(broker, "lo9")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for _ in range(3):
        producer.produce("lo9", value=b"x", partition=0)
    assert producer.flush(15) == 0

    async def go(conn: KafkaConnection) -> dict[int, tuple[int, int, int]]:
        rb = RequestBuilder(2, 9)
        out = {}
        for ts in (-1, -2, -4, -5):
            part = rb.make("ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=ts)
            res = await conn.send(
                rb(
                    replica_id=-1,
                    isolation_level=0,
                    topics=(rb.make("ListOffsetsTopic", name="lo9", partitions=(part,)),),
                )
            )
            p = res.topics[0].partitions[0]
            out[ts] = (int(p.error_code), p.offset, p.leader_epoch)
        return out

    answers = with_conn(broker, go)
    assert answers[-1][:2] == (0, 3)
    assert answers[-2][:2] == answers[-4][:2] == (0, 0)
    assert answers[-5] == (0, -1, -1)
