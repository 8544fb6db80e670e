"""KIP-848 consumer groups with a real client: confluent-kafka (librdkafka 2.16) consumers with
``group.protocol=consumer`` on one broker. The group shares the partitions without two owners,
follows members joining and leaving, commits offsets with member epochs (a restarted group resumes
after them), shows up in ConsumerGroupDescribe and ListGroups, and takes in a classic member (an
eager ``range`` consumer) as one of its own."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import BrokerRunner

TOPIC = "kip848"
PARTITIONS = 6
OVERRIDES = {
    "num.partitions": str(PARTITIONS),
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("kip848")), OVERRIDES).start()
    try:
        admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        yield runner
    finally:
        runner.stop()


def _consumer(broker: BrokerRunner, group: str, **extra: Any) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )
    consumer.subscribe([TOPIC])
    return consumer


def _produce(broker: BrokerRunner, count: int, prefix: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(count):
        producer.produce(TOPIC, f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(15) == 0


def _assigned(
    consumers: list[Consumer], want: Callable[[list[set[int]]], bool], timeout_s: float = 20
) -> list[set[int]]:
    deadline = time.monotonic() + timeout_s
    while True:
        for c in consumers:
            c.poll(0.1)
        sets = [{tp.partition for tp in c.assignment()} for c in consumers]
        if want(sets) or time.monotonic() > deadline:
            return sets


def _disjoint_cover(sets: list[set[int]]) -> bool:
    return sum(len(s) for s in sets) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS))


def test_members_share_the_partitions_and_follow_joins_and_leaves(broker: BrokerRunner) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(broker, group)
    try:
        first = _assigned([a], lambda s: s[0] == set(range(PARTITIONS)))
        assert first == [set(range(PARTITIONS))]
        b = _consumer(broker, group)
        try:
            both = _assigned([a, b], lambda s: _disjoint_cover(s) and all(len(x) == 3 for x in s))
            assert _disjoint_cover(both) and [len(x) for x in both] == [3, 3], both
        finally:
            b.close()  # leaves with epoch -1
        alone = _assigned([a], lambda s: s[0] == set(range(PARTITIONS)))
        assert alone == [set(range(PARTITIONS))]
    finally:
        a.close()


def test_committed_offsets_carry_the_member_epoch_and_a_new_member_resumes_after_them(broker: BrokerRunner) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    _produce(broker, 60, "first")
    a = _consumer(broker, group)
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 60 and time.monotonic() < deadline:
        for msg in a.consume(100, 0.2):
            if msg.error() is None:
                seen.append(msg.value())
    assert len(seen) == 60
    a.commit(asynchronous=False)
    committed = a.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    a.close()
    assert sum(tp.offset for tp in committed) >= 60
    _produce(broker, 12, "second")
    b = _consumer(broker, group)
    later: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(later) < 12 and time.monotonic() < deadline:
        later += [m.value() for m in b.consume(100, 0.2) if m.error() is None]
    b.close()
    assert sorted(later) == sorted(f"second-{i}".encode() for i in range(12))  # nothing of the first round again


def test_the_group_is_described_and_listed_as_a_consumer_group(broker: BrokerRunner) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(broker, group, **{"client.id": "describe-me"})
    try:
        _assigned([a], lambda s: s[0] == set(range(PARTITIONS)))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = admin.list_consumer_groups().result(15)
        mine = [g for g in listed.valid if g.group_id == group]
        assert mine and str(mine[0].type).upper().endswith("CONSUMER"), mine
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert str(described.type).upper().endswith("CONSUMER")
        assert [m.client_id for m in described.members] == ["describe-me"]
        member = described.members[0]
        assert {tp.partition for tp in member.assignment.topic_partitions} == set(range(PARTITIONS))
    finally:
        a.close()


def test_a_classic_member_joins_a_group_of_consumer_protocol_members(broker: BrokerRunner) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(broker, group)
    classic = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
    )
    try:
        _assigned([a], lambda s: s[0] == set(range(PARTITIONS)))
        classic.subscribe([TOPIC])
        both = _assigned([a, classic], lambda s: _disjoint_cover(s) and all(len(x) == 3 for x in s))
        assert _disjoint_cover(both) and [len(x) for x in both] == [3, 3], both
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert str(described.type).upper().endswith("CONSUMER") and len(described.members) == 2
    finally:
        classic.close()
        a.close()


def test_a_regex_subscription_gets_every_matching_topic(broker: BrokerRunner) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("kip848-extra", 2, 1)])["kip848-extra"].result(30)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["^kip848.*"])
    try:
        wanted = {(TOPIC, p) for p in range(PARTITIONS)} | {("kip848-extra", 0), ("kip848-extra", 1)}
        deadline = time.monotonic() + 20
        got: set[tuple[str, int]] = set()
        while got != wanted and time.monotonic() < deadline:
            consumer.poll(0.1)
            got = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        assert got == wanted
    finally:
        consumer.close()


def test_the_cli_lists_types_and_describes_epochs_and_target_assignments(
    broker: BrokerRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    from odradek.cli.consumer_groups import main

    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(broker, group, **{"client.id": "cli-member"})
    try:
        _assigned([a], lambda s: s[0] == set(range(PARTITIONS)))
        capsys.readouterr()
        assert main(["--bootstrap-server", broker.bootstrap_servers, "--list", "--type"]) == 0
        listed = [line.split() for line in capsys.readouterr().out.splitlines()]
        assert listed[0] == ["GROUP", "TYPE"] and [group, "consumer"] in listed
        assert main(["--bootstrap-server", broker.bootstrap_servers, "--describe", "--group", group, "--state"]) == 0
        state = capsys.readouterr().out.split()
        assert "GROUP-EPOCH" in state and "TARGET-ASSIGNMENT-EPOCH" in state and "Stable" in state
        args = ["--describe", "--group", group, "--members", "--verbose"]
        assert main(["--bootstrap-server", broker.bootstrap_servers, *args]) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()]
        assert rows[0][-4:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        member = rows[1]
        everything = f"{TOPIC}({','.join(map(str, range(PARTITIONS)))})"
        assert "cli-member" in member and member[-3] == everything and member[-1] == everything
    finally:
        a.close()


_KILLED_MEMBER = """
import json, sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
read = []
while len(read) < 6:
    read += [m.value().decode() for m in c.consume(100, 0.2) if m.error() is None]
c.commit(asynchronous=False)  # everything it read is committed
print(json.dumps(read), flush=True)
sys.stdin.read()  # then it hangs until killed
"""


def test_a_killed_member_loses_its_partitions_after_its_session_and_nothing_committed_is_read_again(
    broker: BrokerRunner,
) -> None:
    import json
    import os
    import signal
    import subprocess
    import sys

    group = f"g-{uuid.uuid4().hex[:6]}"
    topic = f"killed-{uuid.uuid4().hex[:6]}"  # its own topic: a new group reads from the start
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    every = {f"killed-{i}" for i in range(60)}
    survivor = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    survivor.subscribe([topic])
    victim = None
    seen: list[str] = []
    try:
        # nothing is produced until both members hold partitions: the survivor reads nothing early
        _assigned([survivor], lambda s: s[0] == set(range(PARTITIONS)))
        victim = subprocess.Popen(
            [sys.executable, "-c", _KILLED_MEMBER, broker.bootstrap_servers, group, topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        shared = _assigned([survivor], lambda s: 0 < len(s[0]) < PARTITIONS)
        assert 0 < len(shared[0]) < PARTITIONS
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for i in range(60):
            producer.produce(topic, f"killed-{i}".encode(), partition=i % PARTITIONS)
        assert producer.flush(15) == 0
        assert victim.stdout is not None
        victim_read = set(json.loads(victim.stdout.readline()))
        assert victim_read and victim_read <= every
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        t0 = time.monotonic()
        whole_at = None
        deadline = t0 + 40
        while time.monotonic() < deadline and (whole_at is None or set(seen) | victim_read != every):
            seen += [m.value().decode() for m in survivor.consume(100, 0.2) if m.error() is None]
            if whole_at is None and {tp.partition for tp in survivor.assignment()} == set(range(PARTITIONS)):
                whole_at = time.monotonic()
        assert whole_at is not None and whole_at - t0 < 20  # its session (6 s) ran out, its partitions moved
    finally:
        if victim is not None and victim.poll() is None:
            victim.kill()
        survivor.close()
    assert set(seen) | victim_read == every  # nothing lost
    assert not set(seen) & victim_read  # nothing the victim committed is read again
    assert len(seen) == len(set(seen))


def test_a_static_member_that_comes_back_keeps_its_partitions_and_epoch_place(broker: BrokerRunner) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    a = _consumer(broker, group, **{"group.instance.id": "static-a"})
    b = _consumer(broker, group, **{"group.instance.id": "static-b"})
    try:
        before = _assigned([a, b], lambda s: _disjoint_cover(s) and all(len(x) == 3 for x in s))
        assert _disjoint_cover(before)
        b.close()  # a static member leaves with epoch -2: its place is kept for the session timeout
        kept = _assigned([a], lambda s: s[0] == set(range(PARTITIONS)), timeout_s=2)
        assert kept == [before[0]]  # nothing moved to a while b may come back
        b = _consumer(broker, group, **{"group.instance.id": "static-b"})
        again = _assigned([a, b], lambda s: _disjoint_cover(s) and all(len(x) == 3 for x in s))
        assert again == before  # b got its partitions back; a kept its own
    finally:
        a.close()
        b.close()
