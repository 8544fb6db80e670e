"""Handlers read version-dependent request fields by version number: each field is honoured from
the first version that carries it and ignored before, spoken raw at every version (odradek's client).

Covers the fields of Metadata (v4's ``allow_auto_topic_creation``, v10's topic ids in the answer,
v12's topics named by id), Fetch (topics by name up to v12; v9's ``current_leader_epoch``),
ListOffsets (v2's ``isolation_level``), InitProducerId, AddPartitionsToTxn (v0-3's single
transaction) and ListTransactions (v1's ``duration_filter``).
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.testing import BrokerRunner

from .admin_support import create, module_broker, with_conn

ZERO = uuid.UUID(int=0)
TOPIC = "hv-records"
RECORDS = 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    for runner in module_broker(tmp_path_factory, "handler-versions"):
        create(runner, TOPIC)
        producer = Producer({"bootstrap.servers": runner.bootstrap_servers, "linger.ms": 1})
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        yield runner


def _metadata(conn: KafkaConnection, version: int, names: list[str], allow_auto: bool) -> Any:
    rb = RequestBuilder(ApiKey.METADATA, version)
    topics = tuple(rb.make("MetadataRequestTopic", name=n, topic_id=None) for n in names)
    return conn.send(
        rb(
            topics=topics,
            allow_auto_topic_creation=allow_auto,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
    )


@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_auto_creation_flag_from_v4(broker: BrokerRunner, version: int) -> None:
    """Before v4 a named unknown topic is always created; from v4 only when the request allows it."""
    missing = f"hv-auto-{version}"

    async def go(conn: KafkaConnection) -> tuple[Any, Any]:
        refused = await _metadata(conn, version, [missing], allow_auto=False)
        known = await _metadata(conn, version, [TOPIC], allow_auto=False)
        return refused, known

    refused, known = with_conn(broker, go)
    [topic] = refused.topics
    if version < 4:  # no flag: the broker creates it (the answer may still lack its leader)
        assert topic.error_code in (ErrorCode.none, ErrorCode.leader_not_available)
    else:
        assert topic.error_code == ErrorCode.unknown_topic_or_partition
    [answered] = known.topics
    assert answered.error_code == ErrorCode.none and answered.name == TOPIC
    assert [p.partition_index for p in answered.partitions] == [0]
    if version >= 10:
        assert answered.topic_id not in (None, ZERO)


def test_metadata_names_a_topic_by_id_from_v12(broker: BrokerRunner) -> None:
    async def go(conn: KafkaConnection) -> tuple[Any, Any]:
        [known] = (await _metadata(conn, 12, [TOPIC], allow_auto=False)).topics
        by_id = {}
        for version in (10, 12):
            rb = RequestBuilder(ApiKey.METADATA, version)
            topic = rb.make("MetadataRequestTopic", name=None, topic_id=known.topic_id)
            by_id[version] = await conn.send(
                rb(
                    topics=(topic,),
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                )
            )
        return known, by_id

    known, by_id = with_conn(broker, go)
    [v12] = by_id[12].topics
    assert (v12.error_code, v12.name, v12.topic_id) == (ErrorCode.none, TOPIC, known.topic_id)
    [v10] = by_id[10].topics  # Kafka refuses ids before v12
    assert (v10.error_code, v10.name) == (ErrorCode.invalid_request, "")


def _fetch_by_name(conn: KafkaConnection, version: int, leader_epoch: int) -> Any:
    rb = RequestBuilder(ApiKey.FETCH, version)
    part = rb.make(
        "FetchPartition",
        partition=0,
        current_leader_epoch=leader_epoch,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return conn.send(
        rb(
            replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=100),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(rb.make("FetchTopic", topic=TOPIC, partitions=(part,)),),
            forgotten_topics_data=(),
            rack_id="",
        )
    )


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_by_name_and_the_leader_epoch_from_v9(broker: BrokerRunner, version: int) -> None:
    async def go(conn: KafkaConnection) -> tuple[Any, Any]:
        return await _fetch_by_name(conn, version, -1), await _fetch_by_name(conn, version, 1000)

    plain, future_epoch = with_conn(broker, go)
    [topic] = plain.responses
    [part] = topic.partitions
    assert (topic.topic, part.error_code, part.high_watermark) == (TOPIC, ErrorCode.none, RECORDS)
    assert part.records  # the stored batches
    [future] = future_epoch.responses[0].partitions
    if version >= 9:  # a leader epoch newer than the leader's (KIP-320)
        assert future.error_code == ErrorCode.unknown_leader_epoch and not future.records
    else:  # no such field: read as usual
        assert future.error_code == ErrorCode.none and future.records


@pytest.mark.parametrize("version", range(1, 10))
def test_list_offsets_every_version(broker: BrokerRunner, version: int) -> None:
    async def go(conn: KafkaConnection) -> Any:
        rb = RequestBuilder(ApiKey.LIST_OFFSETS, version)
        part = rb.make("ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1)
        topic = rb.make("ListOffsetsTopic", name=TOPIC, partitions=(part,))
        return await conn.send(rb(replica_id=-1, isolation_level=1, topics=(topic,), timeout=datetime.timedelta(0)))

    [topic] = with_conn(broker, go).topics
    [part] = topic.partitions
    # no open transaction: the last stable offset is the high watermark, whichever isolation level
    assert (part.error_code, part.offset) == (ErrorCode.none, RECORDS)


RETRIABLE = (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress)


async def _init_producer_id(conn: KafkaConnection, version: int, txn: str, pid: int = -1, epoch: int = -1) -> Any:
    """FindCoordinator (which creates ``__transaction_state``) then InitProducerId, each retried
    while the transaction coordinator is still being set up."""
    find = RequestBuilder(ApiKey.FIND_COORDINATOR, 3)
    deadline = time.monotonic() + 15
    while (await conn.send(find(key=txn, key_type=1))).error_code != ErrorCode.none:
        assert time.monotonic() < deadline, "no transaction coordinator"
        await asyncio.sleep(0.05)
    rb = RequestBuilder(ApiKey.INIT_PRODUCER_ID, version)
    while True:
        answer = await conn.send(
            rb(
                transactional_id=txn,
                transaction_timeout=datetime.timedelta(seconds=30),
                producer_id=pid,
                producer_epoch=epoch,
            )
        )
        if answer.error_code not in RETRIABLE or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("version", range(0, 6))
def test_init_producer_id_every_version(broker: BrokerRunner, version: int) -> None:
    txn = f"hv-txn-{version}"

    async def go(conn: KafkaConnection) -> tuple[Any, Any, Any]:
        first = await _init_producer_id(conn, version, txn)
        again = await _init_producer_id(conn, version, txn, first.producer_id, first.producer_epoch)
        arb = RequestBuilder(ApiKey.ADD_PARTITIONS_TO_TXN, min(version, 3))
        added = await conn.send(
            arb(
                v3_and_below_transactional_id=txn,
                v3_and_below_producer_id=again.producer_id,
                v3_and_below_producer_epoch=again.producer_epoch,
                v3_and_below_topics=(arb.make("AddPartitionsToTxnTopic", name=TOPIC, partitions=(0,)),),
            )
        )
        return first, again, added

    first, again, added = with_conn(broker, go)
    assert first.error_code == ErrorCode.none and first.producer_id >= 0
    assert (again.error_code, again.producer_id) == (ErrorCode.none, first.producer_id)
    assert again.producer_epoch == first.producer_epoch + 1
    [result] = added.results_by_topic_v3_and_below
    assert [(p.partition_index, p.partition_error_code) for p in result.results_by_partition] == [(0, ErrorCode.none)]


@pytest.mark.parametrize("version", range(0, 2))
def test_list_transactions_duration_filter_from_v1(broker: BrokerRunner, version: int) -> None:
    txn = f"hv-list-{version}"

    async def go(conn: KafkaConnection) -> Any:
        pid = await _init_producer_id(conn, 5, txn)
        add = RequestBuilder(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
        await conn.send(
            add(
                v3_and_below_transactional_id=txn,
                v3_and_below_producer_id=pid.producer_id,
                v3_and_below_producer_epoch=pid.producer_epoch,
                v3_and_below_topics=(add.make("AddPartitionsToTxnTopic", name=TOPIC, partitions=(0,)),),
            )
        )
        rb = RequestBuilder(ApiKey.LIST_TRANSACTIONS, version)
        # an hour-long duration filter: a transaction just begun is younger, so v1 leaves it out
        return await conn.send(rb(state_filters=(), producer_id_filters=(), duration_filter=3_600_000))

    listed = with_conn(broker, go)
    assert listed.error_code == ErrorCode.none
    ids = {t.transactional_id for t in listed.transaction_states}
    if version >= 1:
        assert txn not in ids
    else:
        assert txn in ids
