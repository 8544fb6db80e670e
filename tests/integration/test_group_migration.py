"""Online migration of a group between the classic and the consumer protocol, with real clients on
one broker: confluent-kafka (librdkafka 2.16) consumers of a classic group with the
``cooperative-sticky`` assignor are consuming when a ``group.protocol=consumer`` member joins the
same group id: the group becomes a consumer group and everyone keeps consuming; when that member
leaves, the group is a classic group again and the classic members carry on. Throughout, no
partition is owned by two consumers at once (checked at every rebalance callback) and every record
produced before, during and after the switches is consumed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import BrokerRunner

TOPIC = "migrating"
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
    runner = BrokerRunner(str(tmp_path_factory.mktemp("migration")), OVERRIDES).start()
    try:
        admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        yield runner
    finally:
        runner.stop()


class Members:
    """Consumers polled in turn from this thread, their rebalance callbacks checking that a
    partition is assigned to one of them only once its previous owner released it."""

    def __init__(self, broker: BrokerRunner, group: str) -> None:
        self.broker = broker
        self.group = group
        self.consumers: dict[str, Consumer] = {}
        self.owned: dict[str, set[int]] = {}
        self.seen: set[bytes] = set()
        self.overlaps: list[str] = []

    def add(self, name: str, **config: Any) -> Consumer:
        settings = {
            "bootstrap.servers": self.broker.bootstrap_servers,
            "group.id": self.group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 200,
            **config,
        }
        consumer = Consumer(settings)
        self.consumers[name] = consumer
        self.owned[name] = set()

        def on_assign(_c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                holders = [other for other, owned in self.owned.items() if tp.partition in owned and other != name]
                if holders:
                    self.overlaps.append(f"{name} got partition {tp.partition} still owned by {holders}")
                self.owned[name].add(tp.partition)

        def on_revoke(_c: Consumer, partitions: list[TopicPartition]) -> None:
            self.owned[name] -= {tp.partition for tp in partitions}

        consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        return consumer

    def remove(self, name: str) -> None:
        self.consumers.pop(name).close()  # the revocation callback runs here
        self.owned.pop(name)

    def poll(self) -> None:
        for consumer in self.consumers.values():
            for msg in consumer.consume(200, 0.05):
                if msg.error() is None:
                    self.seen.add(msg.value())

    def until(self, done: Callable[[], bool], timeout_s: float = 30, each: Callable[[], None] | None = None) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if each is not None:
                each()
            self.poll()
            if done():
                return True
        return False

    def covered(self, members: int) -> bool:
        """Every partition owned by exactly one consumer, and each of ``members`` consumers owns some."""
        sets = [self.owned[n] for n in self.consumers]
        return (
            len(sets) == members
            and all(sets)
            and sum(len(s) for s in sets) == PARTITIONS
            and set().union(*sets) == set(range(PARTITIONS))
        )

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.close()


def _group_type(broker: BrokerRunner, group: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    listed = admin.list_consumer_groups().result(15)
    mine = [g for g in listed.valid if g.group_id == group]
    return str(mine[0].type).rsplit(".", 1)[-1].upper() if mine else ""


class Feed:
    """Records produced a few at a time while the consumers rebalance."""

    def __init__(self, broker: BrokerRunner) -> None:
        self.producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        self.sent: set[bytes] = set()

    def produce(self, prefix: str, count: int) -> None:
        for _ in range(count):
            value = f"{prefix}-{len(self.sent)}".encode()
            self.producer.produce(TOPIC, value, partition=len(self.sent) % PARTITIONS)
            self.sent.add(value)
        self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(15) == 0


def test_a_classic_group_upgrades_to_a_consumer_group_and_back_while_consuming(broker: BrokerRunner) -> None:
    group = f"mig-{uuid.uuid4().hex[:6]}"
    members = Members(broker, group)
    feed = Feed(broker)
    classic = {
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "max.poll.interval.ms": 30000,
    }
    try:
        members.add("classic-1", **classic)
        members.add("classic-2", **classic)
        assert members.until(lambda: members.covered(2)), members.owned
        assert _group_type(broker, group) == "CLASSIC"
        feed.produce("before", 60)
        feed.flush()
        assert members.until(lambda: feed.sent <= members.seen)

        # a consumer-protocol member joins: the group becomes a consumer group
        members.add("modern", **{"group.protocol": "consumer"})
        assert members.until(lambda: members.covered(3), each=lambda: feed.produce("upgrade", 2)), members.owned
        assert _group_type(broker, group) == "CONSUMER"
        feed.produce("mixed", 30)
        feed.flush()
        assert members.until(lambda: feed.sent <= members.seen), sorted(feed.sent - members.seen)[:10]

        # it leaves: the group is a classic group again, and the classic members share everything
        members.remove("modern")
        assert members.until(lambda: members.covered(2), each=lambda: feed.produce("downgrade", 2)), members.owned
        assert _group_type(broker, group) == "CLASSIC"
        feed.produce("after", 30)
        feed.flush()
        assert members.until(lambda: feed.sent <= members.seen), sorted(feed.sent - members.seen)[:10]
        assert not members.overlaps, members.overlaps
    finally:
        members.close()
