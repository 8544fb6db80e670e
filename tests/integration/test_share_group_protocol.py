"""KIP-932 share groups with a real client: confluent-kafka (librdkafka 2.16)'s ``ShareConsumer``
joins a share group on one broker through ShareGroupHeartbeat, shows up with its assignment in
ShareGroupDescribe and as a ``share`` group in ListGroups (both spoken raw), keeps DeleteGroups off
while it is a member, and leaves on close so the group can be deleted; two consumers split the
partitions. Records are not fetched here."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.testing import BrokerRunner

TOPIC = "kip932"
PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("kip932")), {"num.partitions": str(PARTITIONS)}).start()
    try:
        admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        yield runner
    finally:
        runner.stop()


def _send(broker: BrokerRunner, api_key: ApiKey, version: int, **fields: Any) -> Any:
    host, port = broker.bootstrap_servers.split(":")

    async def main() -> Any:
        conn = await KafkaConnection(host, int(port), client_id="share-test").connect()
        try:
            return await conn.send(RequestBuilder(api_key, version)(**fields))
        finally:
            await conn.close()

    return asyncio.run(main())


def _describe(broker: BrokerRunner, group: str) -> Any:
    response = _send(broker, ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=True)
    (described,) = response.groups
    return described


def _wait_described(broker: BrokerRunner, consumer: ShareConsumer, group: str, timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        assert len(consumer.poll(0.2)) == 0  # records are not served to share consumers here
        described = _describe(broker, group)
        assigned = {p for m in described.members for t in m.assignment.topic_partitions for p in t.partitions}
        if assigned == set(range(PARTITIONS)) or time.monotonic() > deadline:
            return described


def test_a_share_consumer_joins_is_described_and_leaves(broker: BrokerRunner) -> None:
    group = f"s-{uuid.uuid4().hex[:6]}"
    consumer = ShareConsumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "client.id": "share-member"}
    )
    consumer.subscribe([TOPIC])
    try:
        described = _wait_described(broker, consumer, group)
        assert described.error_code == ErrorCode.none
        assert (described.group_state, described.assignor_name) == ("Stable", "simple")
        assert described.group_epoch >= 1 and described.authorized_operations > 0
        (member,) = described.members
        assert member.client_id == "share-member" and list(member.subscribed_topic_names) == [TOPIC]
        assert member.member_epoch == described.assignment_epoch
        (assigned,) = member.assignment.topic_partitions
        assert assigned.topic_name == TOPIC and sorted(assigned.partitions) == list(range(PARTITIONS))
        listed = _send(broker, ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=("share",))
        mine = [g for g in listed.groups if g.group_id == group]
        assert [(g.group_type, g.protocol_type, g.group_state) for g in mine] == [("share", "share", "Stable")]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        refused = admin.delete_consumer_groups([group])
        with pytest.raises(KafkaException) as refusal:
            refused[group].result(15)
        assert refusal.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        consumer.close()  # leaves the group (member epoch -1)
    left = _describe(broker, group)
    assert left.error_code == ErrorCode.none and left.group_state == "Empty" and list(left.members) == []
    admin.delete_consumer_groups([group])[group].result(15)
    assert _describe(broker, group).error_code == ErrorCode.group_id_not_found


def test_two_share_consumers_split_the_partitions(broker: BrokerRunner) -> None:
    group = f"s-{uuid.uuid4().hex[:6]}"
    consumers = [ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group}) for _ in range(2)]
    for c in consumers:
        c.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + 30
        while True:
            for c in consumers:
                c.poll(0.1)
            described = _describe(broker, group)
            sets = [{p for t in m.assignment.topic_partitions for p in t.partitions} for m in described.members]
            done = len(sets) == 2 and set().union(*sets) == set(range(PARTITIONS)) and not sets[0] & sets[1]
            if done or time.monotonic() > deadline:
                break
        assert done, described
        assert sorted(len(s) for s in sets) == [1, 2]
        assert len({m.member_epoch for m in described.members}) == 1
    finally:
        for c in consumers:
            c.close()
