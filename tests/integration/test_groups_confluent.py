"""Consumer groups with confluent-kafka (librdkafka 2.16): rebalances, commits, restarts, static members."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.testing import BrokerRunner

from .group_support import create_topic, produce, run_member_churn, wait_until

pytestmark = pytest.mark.slow


def _consumer(bootstrap: str, group: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **conf,
        }
    )


def _group_state(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.describe_consumer_groups([group])[group].result(10)
    del admin
    return result


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_share_partitions_through_leave_and_crash(odradek_broker: BrokerRunner, assignor: str) -> None:
    timings = run_member_churn(odradek_broker.bootstrap_servers, "confluent", assignor, f"churn-{assignor}", "churn")
    assert timings["after_kill"] < 6.0 + 5.0, timings


def test_group_is_stable_within_seconds(odradek_broker: BrokerRunner) -> None:
    b = odradek_broker.bootstrap_servers
    create_topic(b, "fast", 3)
    assigned = threading.Event()
    consumer = _consumer(b, "fast-group")
    start = time.monotonic()
    consumer.subscribe(["fast"], on_assign=lambda c, ps: assigned.set())
    deadline = start + 5
    while not assigned.is_set() and time.monotonic() < deadline:
        consumer.poll(0.02)
    elapsed = time.monotonic() - start
    try:
        assert assigned.is_set()
        # the first join also creates __consumer_offsets; the bound is loose because the suite's
        # other workers share the two cores (1.04 s was seen there); bench/group_settle_bench.py
        # measures the settle time itself
        assert elapsed < 2.5, f"joined in {elapsed:.3f} s"
        wait_until(lambda: _group_state(b, "fast-group").state == ConsumerGroupState.STABLE, 5, "Stable")
    finally:
        consumer.close()


def _consume(consumer: Consumer, count: int, timeout: float = 20) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and not msg.error():
            out.append(msg)
    return out


def test_resume_at_committed_offset_and_survive_broker_restart(odradek_broker_factory: Any, tmp_path: Any) -> None:
    data_dir = str(tmp_path / "restart")
    broker = odradek_broker_factory(data_dir)
    port = broker.port
    broker.stop()
    listeners = {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    broker = BrokerRunner(data_dir, listeners).start()
    try:
        b = broker.bootstrap_servers
        create_topic(b, "resume", 1)
        produce(b, "resume", 50, partitions=1)
        first = _consumer(b, "resumers")
        first.subscribe(["resume"])
        got = _consume(first, 20)
        assert [m.offset() for m in got] == list(range(20))
        first.commit(offsets=[TopicPartition("resume", 0, 20, "checkpoint \u2713")], asynchronous=False)
        first.close()

        second = _consumer(b, "resumers")
        second.subscribe(["resume"])
        assert [m.offset() for m in _consume(second, 5)] == [20, 21, 22, 23, 24]
        second.commit(offsets=[TopicPartition("resume", 0, 25)], asynchronous=False)
        member_before = _group_state(b, "resumers").members[0].member_id

        # restart the broker under the live consumer: the group and its offsets come back from
        # __consumer_offsets, and the member carries on in the same generation
        broker.stop()
        broker = BrokerRunner(data_dir, listeners).start()
        committed = second.committed([TopicPartition("resume", 0)], timeout=20)
        assert committed[0].offset == 25
        state = _group_state(b, "resumers")
        assert state.state == ConsumerGroupState.STABLE
        assert [m.member_id for m in state.members] == [member_before]
        assert [m.offset() for m in _consume(second, 5)] == [25, 26, 27, 28, 29]
        second.close()

        third = _consumer(b, "resumers")
        metadata = third.committed([TopicPartition("resume", 0)], timeout=10)
        third.close()
        assert metadata[0].offset == 25
    finally:
        broker.stop()
        broker.cleanup()


def test_static_member_restart_keeps_assignment_without_rebalance(odradek_broker: BrokerRunner) -> None:
    b = odradek_broker.bootstrap_servers
    create_topic(b, "static", 4)
    revoked: list[str] = []

    def member(instance: str) -> Consumer:
        c = _consumer(b, "statics", **{"group.instance.id": instance, "session.timeout.ms": 10000})
        c.subscribe(["static"], on_revoke=lambda _c, _ps: revoked.append(instance))
        return c

    a, c = member("a"), member("b")

    def polled(*consumers: Consumer) -> bool:
        for consumer in consumers:
            consumer.poll(0.05)
        return True

    wait_until(
        lambda: polled(a, c) and len(a.assignment()) == len(c.assignment()) == 2,
        20,
        "both static members assigned",
    )
    wait_until(lambda: polled(a, c) and _group_state(b, "statics").state == ConsumerGroupState.STABLE, 10, "Stable")
    assert odradek_broker.broker is not None
    coordinator = odradek_broker.broker.group_coordinator
    generation = coordinator.group("statics").generation_id
    before_b = sorted(tp.partition for tp in c.assignment())
    before_a = sorted(tp.partition for tp in a.assignment())
    revoked.clear()
    c.close()  # a static member does not send LeaveGroup
    restarted = member("b")
    try:
        wait_until(lambda: polled(a, restarted) and bool(restarted.assignment()), 10, "restarted member assigned")
        for _ in range(20):
            a.poll(0.05)
            restarted.poll(0.05)
        assert sorted(tp.partition for tp in restarted.assignment()) == before_b
        assert sorted(tp.partition for tp in a.assignment()) == before_a
        assert "a" not in revoked
        assert coordinator.group("statics").generation_id == generation
        state = _group_state(b, "statics")
        assert state.state == ConsumerGroupState.STABLE
        assert sorted(m.group_instance_id for m in state.members) == ["a", "b"]
    finally:
        restarted.close()
        a.close()


def test_unique_group_ids_do_not_interfere(odradek_broker: BrokerRunner) -> None:
    b = odradek_broker.bootstrap_servers
    create_topic(b, "shared", 2)
    produce(b, "shared", 5, partitions=2)
    consumers = [_consumer(b, f"solo-{uuid.uuid4()}") for _ in range(2)]
    try:
        for c in consumers:
            c.subscribe(["shared"])
        for c in consumers:
            assert len(_consume(c, 10)) == 10
    finally:
        for c in consumers:
            c.close()
