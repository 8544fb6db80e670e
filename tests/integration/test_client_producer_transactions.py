"""odradek's own producer: idempotence and transactions against a real broker, read back with
confluent-kafka consumers in both isolation levels."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CTopicPartition

from odradek.client.cluster import TopicPartition
from odradek.client.producer import Producer
from odradek.errors import KafkaError as OdradekKafkaError
from odradek.testing import BrokerRunner


def _read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([CTopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(100, 0.5)
            values += [m.value() for m in msgs if m.error() is None]
            if any(m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF for m in msgs):
                break
    finally:
        consumer.close()
    return values


def test_idempotent_producer_numbers_its_batches(odradek_broker: BrokerRunner) -> None:
    bootstrap = odradek_broker.bootstrap_servers

    async def go() -> None:
        async with Producer(bootstrap, enable_idempotence=True) as producer:
            for i in range(5):
                meta = await producer.send("idem", b"v%d" % i, partition=0)
                assert meta.offset == i
            assert producer.transactions is not None and producer.transactions.producer_id >= 0

    asyncio.run(go())
    assert _read(bootstrap, "idem", "read_uncommitted") == [b"v%d" % i for i in range(5)]


def test_commit_abort_offsets_and_fencing(odradek_broker: BrokerRunner) -> None:
    bootstrap = odradek_broker.bootstrap_servers

    async def go() -> None:
        async with Producer(bootstrap, transactional_id="tx-client") as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            await producer.send("txn", b"committed-1", partition=0)
            await producer.send_offsets_to_transaction({TopicPartition("txn", 0): 42}, "txn-group")
            await producer.commit_transaction()
            producer.begin_transaction()
            await producer.send("txn", b"aborted", partition=0)
            await producer.abort_transaction()
            producer.begin_transaction()
            await producer.send("txn", b"committed-2", partition=0)
            await producer.commit_transaction()
            producer.begin_transaction()
            await producer.send("txn", b"fenced", partition=0)
            async with Producer(bootstrap, transactional_id="tx-client") as newer:
                await newer.init_transactions()  # aborts the open transaction and fences the first
            with pytest.raises(OdradekKafkaError):
                await producer.commit_transaction()

    asyncio.run(go())
    assert _read(bootstrap, "txn", "read_committed") == [b"committed-1", b"committed-2"]
    assert set(_read(bootstrap, "txn", "read_uncommitted")) >= {b"committed-1", b"aborted", b"committed-2"}
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-group", "enable.auto.commit": False})
    try:
        [committed] = group.committed([CTopicPartition("txn", 0)], timeout=10)
        assert committed.offset == 42
    finally:
        group.close()
