"""The share coordinator on real brokers: a share-partition's state written through the
persister (the broker's own, and one outside any broker over the inter-broker APIs 83-87) is read
back; on a 3-broker cluster on a real ZooKeeper, the coordinator's broker is killed with SIGKILL
and the same state is read from the new coordinator, which loaded ``__share_group_state``."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster
from odradek.client.connection import KafkaConnection
from odradek.coordinator.share.records import share_coordinator_key
from odradek.errors import ErrorCode
from odradek.metadata.codec import uuid_from_kafka_string
from odradek.protocol.api_keys import ApiKey
from odradek.server.runner import BrokerRunner
from odradek.share.persister import DefaultStatePersister, FindCoordinatorLocator
from odradek.share.state import DeliveryState, SharePartitionKey, ShareState, ShareStateError, StateBatch
from odradek.testing_zk import ZooKeeperServer

ACK, ARCHIVED, AVAILABLE = DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED, DeliveryState.AVAILABLE
TOPIC = "share-state"


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


@pytest.mark.timeout(120)
def test_state_written_through_the_persisters_reads_back(odradek_broker: BrokerRunner) -> None:
    runner = odradek_broker
    broker = runner.broker
    assert broker is not None
    runner.call(lambda: broker.admin.create_topic(TOPIC, 2, 1))
    topic_id = broker.metadata_cache.topic_id(TOPIC)
    assert topic_id is not None
    key = SharePartitionKey("local-group", topic_id, 1)

    async def through_the_broker_s_persister() -> tuple[ShareState | None, ShareState | None]:
        persister = broker.share_persister
        before = await persister.read_state(key, 0)
        await persister.initialize_state(key, 0, 10)
        await persister.write_state(key, 0, 0, 10, [StateBatch(10, 14, ACK, 1), StateBatch(15, 19, AVAILABLE, 1)])
        return before, await persister.read_state(key, 0)

    before, after = runner.call(through_the_broker_s_persister)
    assert before is None
    assert after == ShareState(0, 10, 0, (StateBatch(10, 14, ACK, 1), StateBatch(15, 19, AVAILABLE, 1)))

    async def over_the_wire() -> None:
        remote = DefaultStatePersister(FindCoordinatorLocator([_address(runner.bootstrap_servers)]))
        try:
            assert await remote.read_state(key, 0) == ShareState(0, 10, 0, after.batches)
            await remote.write_state(key, 0, 1, 12, [StateBatch(15, 16, ARCHIVED, 5)], delivery_complete_count=4)
            state = await remote.read_state(key, 1)
            assert state == ShareState(
                0,
                12,
                1,
                (StateBatch(12, 14, ACK, 1), StateBatch(15, 16, ARCHIVED, 5), StateBatch(17, 19, AVAILABLE, 1)),
            )
            assert await remote.read_summary(key, 1) == ShareState(0, 12, 1)
            with pytest.raises(ShareStateError) as fenced:
                await remote.write_state(key, 0, 0, -1, [])
            assert fenced.value.error_code is ErrorCode.fenced_leader_epoch
            other = SharePartitionKey("local-group", topic_id, 0)
            assert await remote.read_state(other, 0) is None
            assert await remote.read_summary(other, 0) is None
            with pytest.raises(ShareStateError) as unknown:
                await remote.initialize_state(SharePartitionKey("g", uuid.uuid4(), 0), 0, 0)
            assert unknown.value.error_code is ErrorCode.unknown_topic_or_partition
            await remote.delete_state(key)
            assert await remote.read_state(key, 1) is None
        finally:
            await remote.close()

        async with KafkaConnection(*_address(runner.bootstrap_servers)) as conn:
            find = conn.builder(ApiKey.FIND_COORDINATOR, 6, 6)
            response = await conn.send(find(key_type=2, coordinator_keys=("no-topic-id", share_coordinator_key(key))))
            assert [c.error_code for c in response.coordinators] == [ErrorCode.invalid_request, ErrorCode.none]
            assert response.coordinators[1].node_id == broker.broker_id
            old = conn.builder(ApiKey.FIND_COORDINATOR, 3, 3)
            response = await conn.send(old(key=share_coordinator_key(key), key_type=2))
            assert response.error_code == ErrorCode.invalid_request  # SHARE needs v6

    asyncio.run(over_the_wire())


# --- a 3-broker cluster ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    overrides = {
        "share.coordinator.state.topic.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "3",
        "share.coordinator.state.topic.min.isr": "2",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "3",
        "group.share.heartbeat.interval.ms": "1000",
        "group.share.min.heartbeat.interval.ms": "1000",
        "group.share.session.timeout.ms": "15000",
        "group.share.min.session.timeout.ms": "6000",
    }
    c = odradek_cluster_module(3, overrides=overrides, zookeeper_connect=zookeeper_server.chroot_connect())
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
    yield c


def _topic_id(cluster: LocalCluster) -> uuid.UUID:
    data = cluster.wait_until(lambda: cluster.read_znode(f"/brokers/topics/{TOPIC}"), message="topic znode")
    return uuid_from_kafka_string(json.loads(data)["topic_id"])


@pytest.mark.zookeeper
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_new_coordinator_reads_the_state_after_the_old_one_is_killed(cluster: LocalCluster) -> None:
    key = SharePartitionKey("failover-group", _topic_id(cluster), 2)
    everyone = [_address(cluster.broker(i).bootstrap_servers) for i in sorted(cluster.brokers)]
    batches = [StateBatch(100, 149, ACK, 1), StateBatch(150, 150, ARCHIVED, 5), StateBatch(151, 199, AVAILABLE, 2)]

    async def write() -> tuple[int, ShareState | None]:
        locate = FindCoordinatorLocator(everyone)
        persister = DefaultStatePersister(locate)
        try:
            await persister.initialize_state(key, 1, 100)
            await persister.write_state(key, 1, 3, 100, batches[:2])
            await persister.write_state(key, 1, 3, -1, batches[2:], delivery_complete_count=51)
            coordinator = (await locate(share_coordinator_key(key))).broker_id
            return coordinator, await persister.read_state(key, 3)
        finally:
            await persister.close()

    victim, written = asyncio.run(write())
    assert written == ShareState(1, 100, 3, tuple(batches))
    cluster.kill9(victim)
    try:
        survivors = [_address(cluster.broker(i).bootstrap_servers) for i in sorted(cluster.brokers) if i != victim]

        async def read_again() -> tuple[int, ShareState | None, ShareState | None]:
            locate = FindCoordinatorLocator(survivors)
            persister = DefaultStatePersister(locate, max_wait_ms=60000)
            try:
                state = await persister.read_state(key, 3)
                coordinator = (await locate(share_coordinator_key(key))).broker_id
                await persister.write_state(key, 1, 4, 151, [])  # and the new coordinator takes writes
                return coordinator, state, await persister.read_state(key, 4)
            finally:
                await persister.close()

        coordinator, state, after = asyncio.run(read_again())
        assert coordinator != victim
        assert state == written
        assert after == ShareState(1, 151, 4, (batches[2],))
    finally:
        cluster.restart(victim)


QUEUE = "share-queue"


@pytest.mark.zookeeper
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_share_consumer_never_gets_an_accepted_record_again_after_the_leader_is_killed(cluster: LocalCluster) -> None:
    """KIP-932 across a leader failover: records accepted (acknowledgements confirmed) before the
    partition's leader is killed -9 are never delivered again by the new leader, which starts
    from the share state kept in ``__share_group_state``; every record is delivered."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    group = f"sq-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(QUEUE, 1, 3, config={"min.insync.replicas": "2"})])[QUEUE].result(30)
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]
    ).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})

    def produce(prefix: str) -> set[bytes]:
        batch = {f"{prefix}{i}".encode() for i in range(150)}
        for v in sorted(batch):
            producer.produce(QUEUE, v, partition=0)
        assert producer.flush(60) == 0
        return batch

    values = produce("before-")
    consumer = ShareConsumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe([QUEUE])
    accepted: set[bytes] = set()
    after_kill: list[bytes] = []

    def consume(until: Callable[[], bool], timeout_s: float, into: list[bytes] | None) -> None:
        deadline = time.monotonic() + timeout_s
        while not until() and time.monotonic() < deadline:
            batch = [m for m in consumer.poll(0.5) or [] if m.error() is None]
            for m in batch:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            if into is not None:
                into.extend(m.value() for m in batch)
            if not batch:
                continue
            try:
                results = consumer.commit_sync(30)
            except Exception:  # during the failover: not confirmed, so not counted as accepted
                continue
            if all(error is None for error in results.values()):
                accepted.update(m.value() for m in batch)

    victim = -1
    accepted_before: set[bytes] = set()
    try:
        consume(lambda: values <= accepted, 60, None)
        assert values <= accepted
        state = cluster.read_znode(f"/brokers/topics/{QUEUE}/partitions/0/state")
        victim = int(json.loads(state or b"{}")["leader"])
        accepted_before = set(accepted)
        cluster.kill9(victim)
        values |= produce("after-")  # to the new leader, which loads the group's share state
        consume(lambda: values <= accepted | set(after_kill), 120, after_kill)
    finally:
        consumer.close()
        if victim >= 0:
            cluster.restart(victim)
    assert values <= accepted | set(after_kill), f"{len(values - accepted - set(after_kill))} never delivered"
    again = accepted_before & set(after_kill)
    assert not again, f"{len(again)} accepted records delivered again, e.g. {sorted(again)[:5]}"
