"""Share groups with ACLs on, as Kafka 4's ``KafkaApis`` authorizes them: ShareFetch and
ShareAcknowledge need READ on the group (else the whole request is GROUP_AUTHORIZATION_FAILED) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions);
DescribeShareGroupOffsets needs DESCRIBE on the group and the topics, AlterShareGroupOffsets READ
on both, DeleteShareGroupOffsets DELETE on the group and READ on the topics.

Every connection is ``User:ANONYMOUS`` on PLAINTEXT; the test grants and revokes its ACLs on the
running broker between requests.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.runner import BrokerRunner

from .authz_support import acl, grant, revoke, start_with_acls
from .share_wire import acquired_offsets, partitions, share_acknowledge, share_fetch, topic_id

GROUP, OTHER = "sg", "sg-other"
OPEN, HIDDEN = "share-open", "share-hidden"
ACCEPT = 1


@pytest.fixture
def broker(odradek_broker_factory: Callable[..., BrokerRunner], tmp_path: Any) -> BrokerRunner:
    """ANONYMOUS may read ``sg`` and read and write ``share-open``; ``share-hidden`` has no ACL."""
    runner = start_with_acls(
        odradek_broker_factory,
        str(tmp_path / "acl"),
        [
            acl(ResourceType.GROUP, GROUP, AclOperation.READ),
            acl(ResourceType.TOPIC, OPEN, AclOperation.READ),
            acl(ResourceType.TOPIC, OPEN, AclOperation.WRITE),
        ],
        **{"group.share.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000"},
    )
    assert runner.broker is not None
    for topic in (OPEN, HIDDEN):
        runner.call(functools.partial(runner.broker.admin.create_topic, topic, 1, 1))
    producer = Producer({"bootstrap.servers": runner.bootstrap_servers})
    for i in range(5):
        producer.produce(OPEN, f"r{i}".encode(), partition=0)
    assert producer.flush(15) == 0
    return runner


def _run(broker: BrokerRunner, scenario: Callable[[KafkaConnection], Any]) -> Any:
    async def go() -> Any:
        async with KafkaConnection("127.0.0.1", broker.port) as conn:
            return await scenario(conn)

    return asyncio.run(go())


def _hidden_id(broker: BrokerRunner) -> Any:
    """The id of a topic Metadata does not show this principal (no DESCRIBE)."""
    assert broker.broker is not None
    return broker.broker.metadata_cache.topic_id(HIDDEN)


def test_share_fetch_and_acknowledge_need_read_on_the_group_and_each_topic(broker: BrokerRunner) -> None:
    async def scenario(conn: KafkaConnection) -> None:
        open_id, hidden_id = await topic_id(conn, OPEN), _hidden_id(broker)
        refused = await share_fetch(conn, OTHER, "m0", 0, open_id)
        assert refused.error_code == ErrorCode.group_authorization_failed and not refused.responses
        refused_ack = await share_acknowledge(conn, OTHER, "m0", 1, open_id, {0: [(0, 0, [ACCEPT])]})
        assert refused_ack.error_code == ErrorCode.group_authorization_failed
        hidden = await share_fetch(conn, GROUP, "m1", 0, hidden_id)
        assert hidden.error_code == ErrorCode.none
        assert partitions(hidden)[0].error_code == ErrorCode.topic_authorization_failed
        opened = await share_fetch(conn, GROUP, "m2", 0, open_id)  # places the share-partition
        assert opened.error_code == ErrorCode.none and partitions(opened)[0].error_code == ErrorCode.none
        return None

    _run(broker, scenario)
    # the share-partition started at the latest offset: records produced now are acquired
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(3):
        producer.produce(OPEN, f"late{i}".encode(), partition=0)
    assert producer.flush(15) == 0

    async def acquire_then_lose_read(conn: KafkaConnection) -> None:
        tid = await topic_id(conn, OPEN)
        got = acquired_offsets(partitions(await share_fetch(conn, GROUP, "m3", 0, tid))[0])
        epoch = 1
        if len(got) < 3:  # a new session's first answer may come before the records are there
            got |= acquired_offsets(partitions(await share_fetch(conn, GROUP, "m3", 1, tid, max_wait_ms=2000))[0])
            epoch = 2
        assert set(got) == {5, 6, 7}
        revoke(broker, acl(ResourceType.TOPIC, OPEN, AclOperation.READ))
        try:
            denied = await share_acknowledge(conn, GROUP, "m3", epoch, tid, {0: [(5, 7, [ACCEPT] * 3)]})
            assert denied.error_code == ErrorCode.none
            assert partitions(denied)[0].error_code == ErrorCode.topic_authorization_failed
        finally:
            grant(broker, acl(ResourceType.TOPIC, OPEN, AclOperation.READ))
        settled = await share_acknowledge(conn, GROUP, "m3", epoch + 1, tid, {0: [(5, 7, [ACCEPT] * 3)]})
        assert partitions(settled)[0].error_code == ErrorCode.none

    _run(broker, acquire_then_lose_read)


def _offsets_request(conn: KafkaConnection, api: ApiKey, group: str, topic: str) -> Any:
    if api is ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS:
        rb = conn.builder(api, 0, 1)
        wanted = rb.make("DescribeShareGroupOffsetsRequestTopic", topic_name=topic, partitions=(0,))
        return rb(groups=(rb.make("DescribeShareGroupOffsetsRequestGroup", group_id=group, topics=(wanted,)),))
    if api is ApiKey.ALTER_SHARE_GROUP_OFFSETS:
        rb = conn.builder(api, 0, 0)
        part = rb.make("AlterShareGroupOffsetsRequestPartition", partition_index=0, start_offset=1)
        return rb(
            group_id=group,
            topics=(rb.make("AlterShareGroupOffsetsRequestTopic", topic_name=topic, partitions=(part,)),),
        )
    rb = conn.builder(api, 0, 0)
    return rb(group_id=group, topics=(rb.make("DeleteShareGroupOffsetsRequestTopic", topic_name=topic),))


def _codes(api: ApiKey, resp: Any) -> tuple[int, list[int]]:
    """(the group's error, the topic's or its partitions' errors)."""
    if api is ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS:
        g = resp.groups[0]
        return int(g.error_code), [int(p.error_code) for t in g.topics for p in t.partitions]
    if api is ApiKey.ALTER_SHARE_GROUP_OFFSETS:
        return int(resp.error_code), [int(p.error_code) for t in resp.responses for p in t.partitions]
    return int(resp.error_code), [int(t.error_code) for t in resp.responses]


def test_share_group_offsets_apis_authorize_the_group_and_the_topics(broker: BrokerRunner) -> None:
    # a member joins (READ on the group, DESCRIBE on the topic through READ) and leaves: the group exists, empty
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP})
    consumer.subscribe([OPEN])
    deadline = time.monotonic() + 20
    assert broker.broker is not None
    coordinator = broker.broker.group_coordinator
    while time.monotonic() < deadline and coordinator.share_groups.group(GROUP) is None:
        consumer.poll(0.2)
    consumer.close()
    refused_group = ErrorCode.group_authorization_failed
    refused_topic = ErrorCode.topic_authorization_failed

    async def scenario(conn: KafkaConnection) -> dict[str, tuple[int, list[int]]]:
        out = {}
        for api in (
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        ):
            for group, topic in ((OTHER, OPEN), (GROUP, HIDDEN), (GROUP, OPEN)):
                out[f"{api.name} {group} {topic}"] = _codes(
                    api, await conn.send(_offsets_request(conn, api, group, topic))
                )
        grant(broker, acl(ResourceType.GROUP, GROUP, AclOperation.DELETE))
        api = ApiKey.DELETE_SHARE_GROUP_OFFSETS
        out["DELETE granted"] = _codes(api, await conn.send(_offsets_request(conn, api, GROUP, OPEN)))
        return out

    got = _run(broker, scenario)
    for api in ("DESCRIBE_SHARE_GROUP_OFFSETS", "ALTER_SHARE_GROUP_OFFSETS", "DELETE_SHARE_GROUP_OFFSETS"):
        assert got[f"{api} {OTHER} {OPEN}"][0] == refused_group, (api, got)
    assert got[f"DESCRIBE_SHARE_GROUP_OFFSETS {GROUP} {HIDDEN}"] == (0, [refused_topic])
    assert got[f"DESCRIBE_SHARE_GROUP_OFFSETS {GROUP} {OPEN}"] == (0, [0])
    assert got[f"ALTER_SHARE_GROUP_OFFSETS {GROUP} {HIDDEN}"] == (0, [refused_topic])
    assert got[f"ALTER_SHARE_GROUP_OFFSETS {GROUP} {OPEN}"] == (0, [0])
    # READ on the group is not DELETE
    assert got[f"DELETE_SHARE_GROUP_OFFSETS {GROUP} {OPEN}"][0] == refused_group
    assert got["DELETE granted"] == (0, [0])
