"""Large produce requests written by the broker's I/O threads: order, offsets and bytes intact.

Several confluent-kafka producers send 1 KiB messages to one partition with a long linger, so
their requests carry batches far above the 256 KiB the broker hands to an I/O thread, from
several connections at once. Every message must come back once, each producer's in the order it
was sent, at contiguous offsets, and the segment files must hold valid batches only.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.records import validate_batches
from odradek.replication.replica_manager import IO_THREAD_MIN_BYTES
from odradek.testing import BrokerRunner

PRODUCERS = 3
MESSAGES = 4000
VALUE = 1024


def _produce(bootstrap: str, topic: str, producer_index: int, errors: list[str]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 200,
            "batch.size": 1_000_000,
            "acks": "all",
            "enable.idempotence": False,
        }
    )

    def on_delivery(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))

    for seq in range(MESSAGES):
        value = f"{producer_index}:{seq}:".encode().ljust(VALUE, b"x")
        producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    if producer.flush(60) != 0:
        errors.append(f"producer {producer_index}: messages left unsent")


def test_concurrent_large_produce_requests(odradek_broker: BrokerRunner) -> None:
    topic = f"big-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    errors: list[str] = []
    threads = [
        threading.Thread(target=_produce, args=(odradek_broker.bootstrap_servers, topic, i, errors))
        for i in range(PRODUCERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    assert any(t.name.startswith("odradek-io") for t in threading.enumerate()), "no I/O thread wrote anything"

    consumer = Consumer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    while len(got) < PRODUCERS * MESSAGES:
        batch = consumer.consume(1000, 5)
        assert batch, f"stalled after {len(got)} messages"
        for msg in batch:
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value()))
    consumer.close()
    assert [offset for offset, _ in got] == list(range(PRODUCERS * MESSAGES))
    seen: dict[int, list[int]] = {i: [] for i in range(PRODUCERS)}
    for _, value in got:
        producer_index, seq, _pad = value.split(b":", 2)
        seen[int(producer_index)].append(int(seq))
        assert len(value) == VALUE
    assert all(seqs == list(range(MESSAGES)) for seqs in seen.values())

    log_dir = Path(odradek_broker.data_dir) / f"{topic}-0"
    headers = [
        h
        for f in sorted(os.listdir(log_dir))
        if f.endswith(".log")
        for h in validate_batches((log_dir / f).read_bytes())
    ]
    assert headers[0].base_offset == 0
    assert all(a.base_offset + a.last_offset_delta + 1 == b.base_offset for a, b in itertools.pairwise(headers))
    assert max(h.batch_length for h in headers) >= IO_THREAD_MIN_BYTES
