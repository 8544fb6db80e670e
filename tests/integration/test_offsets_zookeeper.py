"""OffsetCommit v0 / OffsetFetch v0 keep offsets in the metadata store, as Kafka 0.8.2 did in ZooKeeper."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.errors import ErrorCode
from odradek.protocol import legacy_messages as legacy
from odradek.storage.topic_partition import TopicPartition
from odradek.testing import BrokerRunner

from .group_support import create_topic


def _commit_v0(group: str, topic: str, offsets: dict[int, int], metadata: str = "") -> Any:
    return legacy.OffsetCommitRequestV0(
        group_id=group,
        topics=(
            legacy.OffsetCommitRequestTopicV0(
                name=topic,
                partitions=tuple(
                    legacy.OffsetCommitRequestPartitionV0(
                        partition_index=p, committed_offset=o, committed_metadata=metadata
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
    )


def _fetch_v0(group: str, topic: str, partitions: tuple[int, ...]) -> Any:
    return legacy.OffsetFetchRequestV0(
        group_id=group, topics=(legacy.OffsetFetchRequestTopicV0(name=topic, partition_indexes=partitions),)
    )


def _run(broker: BrokerRunner, scenario: Any) -> Any:
    host, port = broker.bootstrap_servers.split(":")

    async def main() -> Any:
        conn = await KafkaConnection(host, int(port), client_id="zk-offsets").connect()
        try:
            return await scenario(conn)
        finally:
            await conn.close()

    return asyncio.run(main())


def test_v0_commit_and_fetch_use_the_znode(odradek_broker: BrokerRunner) -> None:
    create_topic(odradek_broker.bootstrap_servers, "zk-topic", 2)

    async def scenario(conn: KafkaConnection) -> None:
        assert conn.api_versions[8][0] == 0 and conn.api_versions[9][0] == 0
        res = await conn.send(_commit_v0("old-group", "zk-topic", {0: 17, 1: 4}, "ignored by ZooKeeper storage"))
        assert [(p.partition_index, p.error_code) for p in res.topics[0].partitions] == [
            (0, ErrorCode.none),
            (1, ErrorCode.none),
        ]
        res = await conn.send(_commit_v0("old-group", "missing-topic", {0: 1}))
        assert res.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        res = await conn.send(_fetch_v0("old-group", "zk-topic", (0, 1)))
        assert [
            (p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in res.topics[0].partitions
        ] == [
            (0, 17, "", ErrorCode.none),
            (1, 4, "", ErrorCode.none),
        ]
        res = await conn.send(_fetch_v0("never-committed", "zk-topic", (0,)))
        assert (res.topics[0].partitions[0].committed_offset, res.topics[0].partitions[0].error_code) == (
            -1,
            ErrorCode.none,
        )
        res = await conn.send(_fetch_v0("old-group", "missing-topic", (0,)))
        assert res.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition

    _run(odradek_broker, scenario)
    broker = odradek_broker.broker
    assert broker is not None
    stored = odradek_broker.call(lambda: broker.zk.get_consumer_offset("old-group", TopicPartition("zk-topic", 0)))
    assert stored == 17
    data, _ = odradek_broker.call(lambda: broker.store.get("/consumers/old-group/offsets/zk-topic/1"))
    assert data == b"4"
    # ZooKeeper offsets and __consumer_offsets are separate stores, as in Kafka
    coordinator = broker.group_coordinator
    assert coordinator.group("old-group") is None


def test_v1_commit_goes_to_consumer_offsets_not_zookeeper(odradek_broker: BrokerRunner) -> None:
    create_topic(odradek_broker.bootstrap_servers, "kafka-topic", 1)

    async def scenario(conn: KafkaConnection) -> Any:
        found = await conn.send(RequestBuilder(10, 3)(key="v1-group", key_type=0))  # as clients do first
        assert found.error_code == ErrorCode.none
        for _ in range(50):
            req = legacy.OffsetCommitRequestV1(
                group_id="v1-group",
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=(
                    legacy.OffsetCommitRequestTopicV1(
                        name="kafka-topic",
                        partitions=(
                            legacy.OffsetCommitRequestPartitionV1(
                                partition_index=0, committed_offset=9, commit_timestamp=-1, committed_metadata="v1"
                            ),
                        ),
                    ),
                ),
            )
            res = await conn.send(req)
            code = res.topics[0].partitions[0].error_code
            if code not in (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available):
                return code
            await asyncio.sleep(0.1)
        return None

    assert _run(odradek_broker, scenario) == ErrorCode.none
    broker = odradek_broker.broker
    assert broker is not None
    coordinator = broker.group_coordinator
    value = coordinator.group("v1-group").offset(TopicPartition("kafka-topic", 0))
    assert (value.offset, value.metadata) == (9, "v1")
    assert (
        odradek_broker.call(lambda: broker.zk.get_consumer_offset("v1-group", TopicPartition("kafka-topic", 0))) is None
    )
