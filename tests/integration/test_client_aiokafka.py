"""aiokafka 0.14 against a real broker."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from odradek.testing import BrokerRunner


async def _roundtrip(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic("aio", num_partitions=2, replication_factor=1)])
    await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, compression_type="gzip")
    await producer.start()
    sent: dict[int, list] = {0: [], 1: []}
    try:
        for i in range(200):
            key = b"k%d" % i if i % 3 else None
            value = b"v%d" % i
            headers = [("idx", b"%d" % i)]
            await producer.send("aio", value=value, key=key, partition=i % 2, headers=headers)
            sent[i % 2].append((key, value, i))
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition("aio", 0), TopicPartition("aio", 1)])
        got: dict[int, list] = {0: [], 1: []}
        while sum(map(len, got.values())) < 200:
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
            for tp, msgs in batch.items():
                for m in msgs:
                    got[tp.partition].append((m.key, m.value, int(dict(m.headers)["idx"])))
                    assert m.offset == len(got[tp.partition]) - 1
        end = await consumer.end_offsets([TopicPartition("aio", 0), TopicPartition("aio", 1)])
    finally:
        await consumer.stop()
    assert got == sent
    assert sorted(end.values()) == [100, 100]


def test_aiokafka_roundtrip(odradek_broker: BrokerRunner) -> None:
    asyncio.run(_roundtrip(odradek_broker.bootstrap_servers))
