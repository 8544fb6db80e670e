"""What real consumers see during rebalances: commits in revoke callbacks, cooperative leaves,
static members (confluent-kafka / librdkafka 2.16), each checked against Kafka's coordinator rules."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.coordinator.group import GroupCoordinator, GroupState
from odradek.errors import ErrorCode
from odradek.testing import BrokerRunner

from .group_support import create_topic, produce, wait_until

pytestmark = pytest.mark.slow

LEAVE_GROUP = 13


def _consumer(bootstrap: str, group: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            **conf,
        }
    )


def _coordinator(broker: BrokerRunner) -> GroupCoordinator:
    assert broker.broker is not None
    return broker.broker.group_coordinator


def _polling(*consumers: Consumer) -> Callable[[Callable[[], bool]], Callable[[], bool]]:
    """Wrap a condition so every check polls ``consumers`` first (callbacks run inside poll)."""

    def wrap(condition: Callable[[], bool]) -> Callable[[], bool]:
        def check() -> bool:
            for consumer in consumers:
                consumer.poll(0.02)
            return condition()

        return check

    return wrap


def _observe(seconds: float, *consumers: Consumer) -> None:
    """Keep serving the consumers' callbacks for ``seconds`` (a window in which nothing else may happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.02)


def _partitions(consumer: Consumer) -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment())


def _describe(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(10)


# --- OffsetCommit during a rebalance -------------------------------------------------------------


def test_commit_in_revoke_callback_of_an_eager_rebalance_is_stored(odradek_broker: BrokerRunner) -> None:
    """Kafka accepts a commit of the generation being rebalanced while the group is
    PreparingRebalance: an eager consumer's revoke callback runs before it rejoins, and its
    commit must succeed and be what the next owner resumes from."""
    b = odradek_broker.bootstrap_servers
    create_topic(b, "revoking", 2)
    produce(b, "revoking", 10, partitions=2)
    coordinator = _coordinator(odradek_broker)
    outcomes: list[tuple[int, list[tuple[int, Any]]] | str] = []

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        group = coordinator.group("revokers")
        state = group.state if group is not None else None
        try:
            done = consumer.commit(
                offsets=[TopicPartition("revoking", tp.partition, 7) for tp in partitions], asynchronous=False
            )
        except KafkaException as exc:
            outcomes.append(f"{state}: {exc}")
        else:
            assert state is GroupState.PREPARING_REBALANCE, state
            outcomes.append((len(partitions), [(tp.partition, tp.error) for tp in done]))

    first = _consumer(b, "revokers", **{"partition.assignment.strategy": "range"})
    first.subscribe(["revoking"], on_revoke=on_revoke)
    second = _consumer(b, "revokers", **{"partition.assignment.strategy": "range"})
    try:
        wait_until(_polling(first)(lambda: len(first.assignment()) == 2), 20, "first member owns both partitions")
        second.subscribe(["revoking"])
        wait_until(
            _polling(first, second)(lambda: len(first.assignment()) == len(second.assignment()) == 1),
            20,
            "partitions shared",
        )
        assert outcomes == [(2, [(0, None), (1, None)])]
        committed = second.committed([TopicPartition("revoking", 0), TopicPartition("revoking", 1)], timeout=10)
        assert [tp.offset for tp in committed] == [7, 7]
    finally:
        second.close()
        first.close()


def test_commits_without_membership_follow_the_group_state(odradek_broker: BrokerRunner) -> None:
    """A consumer that never subscribed commits with generation -1 and no member id: refused
    with UNKNOWN_MEMBER_ID while the group has members, accepted once it is Empty."""
    b = odradek_broker.bootstrap_servers
    create_topic(b, "simple", 1)
    member = _consumer(b, "mixed")
    member.subscribe(["simple"])
    outsider = _consumer(b, "mixed")
    offsets = [TopicPartition("simple", 0, 3)]
    try:
        wait_until(_polling(member)(lambda: len(member.assignment()) == 1), 20, "member assigned")
        with pytest.raises(KafkaException) as refused:
            outsider.commit(offsets=offsets, asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID
        member.close()
        group = _coordinator(odradek_broker).group("mixed")
        assert group is not None
        wait_until(lambda: group.state is GroupState.EMPTY, 10, "group Empty")
        done = outsider.commit(offsets=offsets, asynchronous=False)
        assert done is not None and [(tp.offset, tp.error) for tp in done] == [(3, None)]
        assert outsider.committed([TopicPartition("simple", 0)], timeout=10)[0].offset == 3
    finally:
        outsider.close()


# --- cooperative rebalancing ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["close", "unsubscribe"])
def test_cooperative_member_leaving_gives_the_other_one_incremental_assignment(
    odradek_broker: BrokerRunner, how: str
) -> None:
    """With cooperative-sticky, when one of two members leaves (LeaveGroup on close, or on
    unsubscribe), the group rebalances once (generation + 1): the remaining member keeps its
    partitions (no revoke callback) and gets one assign callback carrying exactly the departed
    member's partitions; the departed member gets one revoke callback with its own."""
    b = odradek_broker.bootstrap_servers
    create_topic(b, "coop", 4)
    coordinator = _coordinator(odradek_broker)
    calls: dict[str, list[tuple[str, list[int]]]] = {"stay": [], "go": []}

    def member(name: str) -> Consumer:
        consumer = _consumer(b, "coop-group", **{"partition.assignment.strategy": "cooperative-sticky"})
        consumer.subscribe(
            ["coop"],
            on_assign=lambda _c, ps: calls[name].append(("assign", sorted(tp.partition for tp in ps))),
            on_revoke=lambda _c, ps: calls[name].append(("revoke", sorted(tp.partition for tp in ps))),
            on_lost=lambda _c, ps: calls[name].append(("lost", sorted(tp.partition for tp in ps))),
        )
        return consumer

    stay, go = member("stay"), member("go")
    try:

        def shared() -> bool:
            group = coordinator.group("coop-group")
            mine, theirs = _partitions(stay), _partitions(go)
            return (
                group is not None
                and group.state is GroupState.STABLE
                and bool(mine)
                and bool(theirs)
                and sorted(mine + theirs) == [0, 1, 2, 3]
            )

        wait_until(_polling(stay, go)(shared), 30, "both members assigned")
        _observe(1.0, stay, go)
        assert shared(), calls
        group = coordinator.group("coop-group")
        assert group is not None
        generation = group.generation_id
        kept, departing = _partitions(stay), _partitions(go)
        calls["stay"].clear()
        calls["go"].clear()

        if how == "close":
            go.close()
        else:
            go.unsubscribe()
        remaining = (stay,) if how == "close" else (stay, go)
        wait_until(
            _polling(*remaining)(lambda: _partitions(stay) == [0, 1, 2, 3] and group.state is GroupState.STABLE),
            20,
            "remaining member owns every partition",
        )
        _observe(1.5, *remaining)
        assert calls["stay"] == [("assign", departing)], calls
        assert calls["go"] == [("revoke", departing)], calls
        assert _partitions(stay) == sorted(kept + departing)
        assert group.generation_id == generation + 1
        assert list(group.members) == [stay.memberid()]
    finally:
        stay.close()
        if how == "unsubscribe":
            go.close()


# --- static membership (KIP-345) ------------------------------------------------------------------


def test_two_static_members_are_both_in_the_group_and_leave_in_one_batch(odradek_broker: BrokerRunner) -> None:
    """Two consumers with distinct ``group.instance.id`` are both members (DescribeGroups shows
    both with their assignments); a LeaveGroup v3+ naming both instance ids and an unknown one
    removes the two (per-member NONE) and answers the unknown one UNKNOWN_MEMBER_ID; the
    consumers then rejoin as the same instances."""
    b = odradek_broker.bootstrap_servers
    create_topic(b, "statics", 4)
    coordinator = _coordinator(odradek_broker)
    consumers = [_consumer(b, "pair", **{"group.instance.id": name, "session.timeout.ms": 10000}) for name in "xy"]
    for consumer in consumers:
        consumer.subscribe(["statics"])
    x, y = consumers
    try:

        def both_assigned() -> bool:
            group = coordinator.group("pair")
            return (
                group is not None
                and group.state is GroupState.STABLE
                and sorted(_partitions(x) + _partitions(y)) == [0, 1, 2, 3]
                and bool(_partitions(x))
                and bool(_partitions(y))
            )

        wait_until(_polling(x, y)(both_assigned), 30, "both static members assigned")
        described = _describe(b, "pair")
        assert sorted(m.group_instance_id for m in described.members) == ["x", "y"]
        owned = {
            m.group_instance_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members
        }
        assert owned == {"x": _partitions(x), "y": _partitions(y)}
        group = coordinator.group("pair")
        assert group is not None
        generation = group.generation_id
        old_ids = {m.group_instance_id: m.member_id for m in described.members}

        host, port = b.split(":")

        async def leave() -> Any:
            conn = await KafkaConnection(host, int(port), client_id="admin").connect()
            try:
                rb = RequestBuilder(LEAVE_GROUP, 5)
                members = tuple(
                    rb.make("MemberIdentity", member_id="", group_instance_id=i, reason="maintenance")
                    for i in ("x", "y", "z")
                )
                return await conn.send(rb(group_id="pair", members=members))
            finally:
                await conn.close()

        res = asyncio.run(leave())
        assert res.error_code == ErrorCode.none
        assert [(m.group_instance_id, m.error_code) for m in res.members] == [
            ("x", ErrorCode.none),
            ("y", ErrorCode.none),
            ("z", ErrorCode.unknown_member_id),
        ]
        wait_until(
            _polling(x, y)(lambda: both_assigned() and group.generation_id > generation),
            30,
            "both static members rejoined",
        )
        rejoined = {m.group_instance_id: m.member_id for m in _describe(b, "pair").members}
        assert sorted(rejoined) == ["x", "y"]
        assert all(rejoined[i] != old_ids[i] for i in "xy")
    finally:
        for consumer in consumers:
            consumer.close()
