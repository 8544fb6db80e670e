"""KafkaZkClient's verbs over the embedded store: registration, elections, topics, partition state."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest

from odradek.errors import TopicExistsError
from odradek.metadata.embedded import EmbeddedStore
from odradek.metadata.errors import (
    BadVersionError,
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    NodeExistsError,
)
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.znodes import BrokerInfo, LeaderAndIsr, PartitionAssignment, TopicPartition, ZkData

from .metadata_support import run, settle


def test_top_level_paths_and_cluster_id() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        a, b = KafkaZkClient(store.session()), KafkaZkClient(store.session())
        await a.create_top_level_paths()
        await b.create_top_level_paths()  # idempotent
        for path in ZkData.persistent_paths():
            assert await a.store.exists(path) is not None
        cluster_id = await a.get_or_create_cluster_id()
        assert len(cluster_id) == 22
        assert await b.get_or_create_cluster_id("other") == cluster_id

    run(scenario)


def test_broker_registration() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        one, two = KafkaZkClient(store.session()), KafkaZkClient(store.session())
        await one.create_top_level_paths()
        await one.register_broker(BrokerInfo(id=1, host="h", port=9092))
        await one.register_broker(BrokerInfo(id=1, host="h", port=9092))  # same session: fine
        await two.register_broker(BrokerInfo(id=0, host="h", port=9093, rack="r"))
        with pytest.raises(BrokerIdAlreadyRegisteredError, match="broker id 1 already registered"):
            await two.register_broker(BrokerInfo(id=1, host="h", port=9094))
        brokers = await one.get_all_brokers()
        assert [(b.id, b.port, b.rack) for b in brokers] == [(0, 9093, "r"), (1, 9092, None)]
        await two.store.close()
        assert await one.get_all_broker_ids() == [1]

    run(scenario)


def test_broker_epoch_is_the_registrations_czxid_and_grows_with_each_registration() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        first, later = KafkaZkClient(store.session()), KafkaZkClient(store.session())
        await first.create_top_level_paths()
        epoch = await first.register_broker(BrokerInfo(id=1, host="h", port=9092))
        assert epoch > 0
        assert await first.register_broker(BrokerInfo(id=1, host="h", port=9092)) == epoch  # retried: same znode
        info = await first.get_broker(1)
        assert info is not None and info.epoch == epoch
        assert info == dataclasses.replace(info, epoch=-1)  # the epoch is not part of a registration's equality
        await first.store.close()  # the ephemeral registration goes with the session
        again = await later.register_broker(BrokerInfo(id=1, host="h", port=9092))
        assert again > epoch
        reread = await later.get_all_brokers()
        assert [b.epoch for b in reread] == [again]

    run(scenario)


def test_controller_election_race_epoch_and_failover() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        a, b = KafkaZkClient(store.session()), KafkaZkClient(store.session())
        assert await a.get_controller_id() is None and await a.get_controller_epoch() is None
        won = await asyncio.gather(a.try_create_controller(1), b.try_create_controller(2))
        assert sorted(won) == [False, True]
        winner, loser = (a, b) if won[0] else (b, a)
        assert await winner.increment_controller_epoch() == 1
        assert await loser.get_controller_id() == (1 if won[0] else 2)
        assert await loser.get_controller_epoch() == (1, 0)

        changes: list[str] = []

        async def on_controller(path: str) -> None:
            changes.append(path)

        loser.store.watch_data("/controller", on_controller)
        await winner.store.close()  # the ephemeral /controller vanishes
        await settle()
        assert changes == ["/controller"] and await loser.get_controller_id() is None
        assert await loser.try_create_controller(9)
        assert await loser.increment_controller_epoch() == 2

    run(scenario)


def test_increment_controller_epoch_conflict_raises_controller_moved() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        zk = KafkaZkClient(store.session())
        assert await zk.increment_controller_epoch() == 1
        real_get = zk.get_controller_epoch

        async def stale() -> tuple[int, int] | None:
            current = await real_get()
            await zk.store.set("/controller_epoch", b"7")  # another controller sneaks in
            return current

        zk.get_controller_epoch = stale  # type: ignore[method-assign]
        with pytest.raises(ControllerMovedError):
            await zk.increment_controller_epoch()

    run(scenario)


def test_try_elect_controller_is_atomic_and_fences_partition_updates() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        a, b = KafkaZkClient(store.session()), KafkaZkClient(store.session())
        elected = await a.try_elect_controller(1)
        assert elected == (1, 1)  # epoch 1; the epoch znode was created with 0, then set
        assert await b.try_elect_controller(2) is None
        tp = TopicPartition("t", 0)
        version = await a.create_partition_state(tp, LeaderAndIsr(1, 0, [1], controller_epoch=1))
        version = await a.update_leader_and_isr(tp, LeaderAndIsr(1, 1, [1], 1), version, elected[1])
        assert version == 1
        await a.store.close()
        b_elected = await b.try_elect_controller(2)
        assert b_elected == (2, 2)
        with pytest.raises(ControllerMovedError):  # the deposed controller's write is refused
            await a_stale_write(store, elected[1])
        state = await b.get_partition_state(tp)
        assert state is not None and state.leader_epoch == 1 and state.zk_version == 1

    async def a_stale_write(store: EmbeddedStore, epoch_zk_version: int) -> None:
        zombie = KafkaZkClient(store.session())
        tp = TopicPartition("t", 0)
        await zombie.update_leader_and_isr(tp, LeaderAndIsr(1, 2, [1], 1), 1, epoch_zk_version)

    run(scenario)


def test_topics_assignment_partition_state_and_deletion() -> None:
    async def scenario() -> None:
        zk = KafkaZkClient(EmbeddedStore().session())
        await zk.create_top_level_paths()
        topic_id = await zk.create_topic_assignment("t", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "100"})
        with pytest.raises(TopicExistsError):
            await zk.create_topic_assignment("t", {0: [1]}, {})
        assert await zk.get_all_topics() == ["t"]
        assert await zk.get_topic_assignment("t") == ({0: [1, 2], 1: [2, 1]}, topic_id)
        assert await zk.get_topic_assignment("nope") == (None, uuid.UUID(int=0))
        assert await zk.get_entity_configs("topics", "t") == {"retention.ms": "100"}

        await zk.set_topic_assignment("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]}, topic_id)
        full = await zk.get_replica_assignment_and_topic_id("t")
        assert full is not None and len(full.partitions) == 3 and full.topic_id == topic_id

        tp = TopicPartition("t", 0)
        assert await zk.create_partition_state(tp, LeaderAndIsr(1, 0, [1, 2], controller_epoch=3)) == 0
        with pytest.raises(NodeExistsError):
            await zk.create_partition_state(tp, LeaderAndIsr(1, 0, [1, 2], controller_epoch=3))
        state = await zk.get_partition_state(tp)
        assert state == LeaderAndIsr(1, 0, (1, 2), 3, zk_version=0)
        assert await zk.update_leader_and_isr(tp, state.new_leader_and_isr(2, [2], 3), 0) == 1
        with pytest.raises(BadVersionError):
            await zk.update_leader_and_isr(tp, state, 0)  # stale zk_version
        assert (await zk.get_partition_states("t"))[0].leader == 2

        await zk.request_topic_deletion("t")
        assert await zk.get_topic_deletions() == ["t"]
        await zk.delete_topic("t")
        await zk.delete_topic_deletion("t")
        assert await zk.get_all_topics() == [] and await zk.get_topic_deletions() == []
        assert await zk.get_entity_configs("topics", "t") == {}
        assert await zk.get_partition_state(tp) is None

    run(scenario)


def test_configs_offsets_reassignment_and_isr_notifications() -> None:
    async def scenario() -> None:
        zk = KafkaZkClient(EmbeddedStore().session())
        await zk.create_top_level_paths()
        await zk.set_entity_configs("brokers", "0", {"log.retention.ms": "5"})
        await zk.set_entity_configs("brokers", "0", {"log.retention.ms": "6"})
        assert await zk.get_entity_configs("brokers", "0") == {"log.retention.ms": "6"}
        changes = await zk.store.get_children("/config/changes")
        assert changes == ["config_change_0000000000", "config_change_0000000001"]
        data, _ = await zk.store.get("/config/changes/" + changes[0])
        assert data == b'{"version":2,"entity_path":"brokers/0"}'

        tp = TopicPartition("t", 3)
        assert await zk.get_consumer_offset("g", tp) is None
        await zk.set_consumer_offset("g", tp, 42)
        await zk.set_consumer_offset("g", tp, 43)
        assert await zk.get_consumer_offset("g", tp) == 43
        assert (await zk.store.get("/consumers/g/offsets/t/3"))[0] == b"43"

        await zk.set_partition_reassignment([PartitionAssignment("t", 0, (0, 1, 2))])
        assert await zk.get_partition_reassignment() == [PartitionAssignment("t", 0, (0, 1, 2))]
        await zk.delete_partition_reassignment()
        assert await zk.get_partition_reassignment() == []

        await zk.propagate_isr_changes([TopicPartition("t", 0)])
        await zk.propagate_isr_changes([TopicPartition("t", 1)])
        assert await zk.pop_isr_change_notifications() == {TopicPartition("t", 0), TopicPartition("t", 1)}
        assert await zk.store.get_children("/isr_change_notification") == []

    run(scenario)


def test_producer_id_blocks_never_overlap() -> None:
    async def scenario() -> None:
        store = EmbeddedStore()
        a, b = KafkaZkClient(store.session()), KafkaZkClient(store.session())
        blocks = await asyncio.gather(*(zk.allocate_producer_id_block(i, 10) for i, zk in enumerate([a, b, a])))
        assert sorted((blk.block_start, blk.block_end) for blk in blocks) == [(0, 9), (10, 19), (20, 29)]
        data, _ = await a.store.get("/latest_producer_id_block")
        assert b'"block_end":"29"' in data

    run(scenario)
