"""KIP-932 share groups consumed by a real client: confluent-kafka (librdkafka 2.16)'s
``ShareConsumer`` on one broker. More consumers than partitions all receive records and none is
delivered twice; implicit acknowledgement accepts what a poll returned; explicit RELEASE redelivers
with a higher delivery count and REJECT never; the delivery-count limit stops redelivery; a
consumer killed -9 holding locks loses its records to the others once the locks run out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from odradek.testing import BrokerRunner

LOCK_MS = 3000
LIMIT = 3
OVERRIDES = {
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": str(LIMIT),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("sharecons")), OVERRIDES).start()
    try:
        yield runner
    finally:
        runner.stop()


def _setup(broker: BrokerRunner, partitions: int, records: int) -> tuple[str, str]:
    """A fresh topic holding ``records`` records ``r<i>`` and a group reading it from the start."""
    topic, group = f"sc-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(records):
        producer.produce(topic, f"r{i}".encode(), partition=i % partitions)
    assert producer.flush(15) == 0
    return topic, group


def _consumer(broker: BrokerRunner, group: str, topic: str, **extra: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, **extra})
    consumer.subscribe([topic])
    return consumer


def _values(batch: Any) -> list[bytes]:
    return [m.value() for m in batch or [] if m.error() is None]


def test_more_consumers_than_partitions_all_receive_records_and_none_twice(broker: BrokerRunner) -> None:
    topic, group = _setup(broker, partitions=2, records=0)
    consumers = [_consumer(broker, group, topic) for _ in range(4)]
    try:
        for c in consumers:  # every member joined (and was assigned) before anything is produced
            c.poll(0.2)
        time.sleep(2.5)

        def produce() -> None:  # in rounds, so each round's records go to whichever members fetch first
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
            for i in range(400):
                producer.produce(topic, f"r{i}".encode(), partition=i % 2)
                if i % 10 == 9:
                    producer.flush(15)
                    time.sleep(0.05)
            assert producer.flush(15) == 0

        producing = threading.Thread(target=produce)
        producing.start()
        seen: Counter[bytes] = Counter()
        per_consumer = [0] * len(consumers)
        deadline = time.monotonic() + 40
        while len(seen) < 400 and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                got = _values(c.poll(0.1))
                per_consumer[i] += len(got)
                seen.update(got)
        producing.join(30)
        assert set(seen) == {f"r{i}".encode() for i in range(400)}
        assert max(seen.values()) == 1  # implicit acknowledgement: nothing delivered twice
        assert all(n > 0 for n in per_consumer), per_consumer  # 4 members on 2 partitions: all served
    finally:
        for c in consumers:
            c.close()


def test_release_redelivers_and_reject_never(broker: BrokerRunner) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = _setup(broker, partitions=1, records=20)
    consumer = _consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deliveries: Counter[bytes] = Counter()
    released, rejected = b"r3", b"r4"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            batch = consumer.poll(0.5) or []
            for m in batch:
                if m.error() is not None:
                    continue
                deliveries[m.value()] += 1
                if m.value() == released and deliveries[released] == 1:
                    consumer.acknowledge(m, AcknowledgeType.RELEASE)
                elif m.value() == rejected:
                    consumer.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch:
                consumer.commit_sync(15)
            if deliveries[released] >= 2 and len(deliveries) == 20:
                break
        for _ in range(4):  # nothing more comes: the rejected record is never delivered again
            consumer.commit_sync(15)
            deliveries.update(_values(consumer.poll(0.5)))
    finally:
        consumer.close()
    assert len(deliveries) == 20
    assert deliveries[released] == 2 and deliveries[rejected] == 1
    assert all(n == 1 for v, n in deliveries.items() if v != released)


def test_the_delivery_count_limit_stops_redelivery(broker: BrokerRunner) -> None:
    from confluent_kafka import AcknowledgeType

    topic, group = _setup(broker, partitions=1, records=1)
    consumer = _consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deliveries = 0
    try:
        deadline = time.monotonic() + 30
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 3:
            batch = [m for m in consumer.poll(0.5) or [] if m.error() is None]
            for m in batch:
                deliveries += 1
                consumer.acknowledge(m, AcknowledgeType.RELEASE)
            if batch:
                consumer.commit_sync(15)
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    assert deliveries == LIMIT


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 1000})
    c.subscribe([sys.argv[3]])
    while True:
        got = [m for m in c.poll(0.5) or [] if m.error() is None]
        if got:
            print(len(got), flush=True)
            time.sleep(3600)  # holds the locks until killed
    """
)


def test_a_consumer_killed_holding_locks_loses_its_records_to_the_others(broker: BrokerRunner) -> None:
    topic, group = _setup(broker, partitions=1, records=50)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, broker.bootstrap_servers, group, topic],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline() or 0)
        assert held > 0
        os.kill(holder.pid, signal.SIGKILL)  # no close: its locks stay until they run out
        holder.wait(10)
        killed_at = time.monotonic()
        consumer = _consumer(broker, group, topic)
        seen: Counter[bytes] = Counter()
        first_at = None
        try:
            deadline = time.monotonic() + 30
            while len(seen) < 50 and time.monotonic() < deadline:
                got = _values(consumer.poll(0.5))
                if got and first_at is None:
                    first_at = time.monotonic()
                seen.update(got)
        finally:
            consumer.close()
        assert set(seen) == {f"r{i}".encode() for i in range(50)}
        if held == 50:  # everything was locked: nothing could come before the locks ran out
            assert first_at is not None and first_at - killed_at >= LOCK_MS / 1000 * 0.5
    finally:
        if holder.poll() is None:
            holder.kill()
