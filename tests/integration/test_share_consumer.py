"""KIP-932 share groups consumed by a real client: confluent-kafka (librdkafka 2.16)'s
``ShareConsumer`` on one broker. More consumers than partitions all receive records and none is
delivered twice; implicit acknowledgement accepts what a poll returned; explicit RELEASE redelivers
with a higher delivery count and REJECT never; the delivery-count limit stops redelivery; a
consumer killed -9 holding locks loses its records to the others (its connection's share session
ends with it)."""

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
        # its connection closed with it: its share session ends and its records are released at
        # once (the lock duration is the bound only when a connection lingers; see test_share_fetch)
        assert first_at is not None and first_at - killed_at < LOCK_MS / 1000 + 5
    finally:
        if holder.poll() is None:
            holder.kill()


def _cli(broker: BrokerRunner, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[list[str]]]:
    from odradek.cli.share_groups import main

    code = main(["--bootstrap-server", broker.bootstrap_servers, *args])
    return code, [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()]


def test_the_cli_describes_resets_and_deletes_a_share_groups_offsets(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = _setup(broker, partitions=1, records=10)
    consumer = _consumer(broker, group, topic)
    seen: Counter[bytes] = Counter()
    deadline = time.monotonic() + 30
    while len(seen) < 10 and time.monotonic() < deadline:
        seen.update(_values(consumer.poll(0.5)))
    consumer.poll(0.5)  # acknowledges the last records (implicit mode)
    code, members = _cli(broker, capsys, "--describe", "--group", group, "--members", "--verbose")
    assert code == 0 and members[0][:5] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert len(members) == 2 and members[1][0] == group and members[1][-1] == f"{topic}:0"
    code, state = _cli(broker, capsys, "--describe", "--group", group, "--state")
    assert state[1][-2:] == ["Stable", "1"]
    consumer.close()
    assert len(seen) == 10
    code, listed = _cli(broker, capsys, "--list")
    assert code == 0 and [group] in listed
    code, state = _cli(broker, capsys, "--describe", "--group", group, "--state")
    assert code == 0 and state[1][0] == group and state[1][-2:] == ["Empty", "0"]
    code, rows = _cli(broker, capsys, "--describe", "--group", group)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
    assert rows[1][:3] == [group, topic, "0"] and rows[1][4:] == ["10", "0"]  # all 10 done
    code, rows = _cli(broker, capsys, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "4")
    assert code == 0 and rows[1] == [group, topic, "0", "4"]  # a dry run
    code, rows = _cli(broker, capsys, "--describe", "--group", group)
    assert rows[1][4] == "10"
    code, rows = _cli(
        broker, capsys, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "4", "--execute"
    )
    assert code == 0
    code, rows = _cli(broker, capsys, "--describe", "--group", group)
    assert rows[1][4:] == ["4", "6"]
    again = _consumer(broker, group, topic)  # the records from 4 on are delivered again
    redelivered: Counter[bytes] = Counter()
    deadline = time.monotonic() + 30
    while len(redelivered) < 6 and time.monotonic() < deadline:
        redelivered.update(_values(again.poll(0.5)))
    again.close()
    assert set(redelivered) == {f"r{i}".encode() for i in range(4, 10)}
    code, rows = _cli(broker, capsys, "--delete-offsets", "--group", group, "--topic", topic)
    assert code == 0 and rows[1] == [topic, "Successful"]
    code, rows = _cli(broker, capsys, "--describe", "--group", group)
    assert rows[1:] == []
    code, rows = _cli(broker, capsys, "--delete", "--group", group)
    assert code == 0
    code, listed = _cli(broker, capsys, "--list")
    assert [group] not in listed
