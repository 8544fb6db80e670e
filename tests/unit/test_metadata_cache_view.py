"""The metadata cache as the coordinators' MetadataView: partition counts, leaders, live brokers."""

from __future__ import annotations

import uuid

from odradek.coordinator.runtime import MetadataView
from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.server.metadata_cache import MetadataCache
from odradek.storage.topic_partition import TopicPartition


def test_metadata_cache_answers_the_coordinators_view() -> None:
    cache = MetadataCache()
    view: MetadataView = cache
    assert view.partition_count("__consumer_offsets") is None
    states = {
        TopicPartition("__consumer_offsets", 0): PartitionState(2, 1, [2], [2]),
        TopicPartition("__consumer_offsets", 1): PartitionState(-1, 1, [], [2]),
    }
    brokers = [BrokerInfo(id=2, host="h2", port=9093)]
    cache.update(1, 1, brokers, states, {"__consumer_offsets": uuid.uuid4()}, set())
    assert view.partition_count("__consumer_offsets") == 2
    assert view.leader_of(TopicPartition("__consumer_offsets", 0)) == 2
    assert view.leader_of(TopicPartition("__consumer_offsets", 1)) == -1  # offline
    assert view.leader_of(TopicPartition("__consumer_offsets", 5)) == -1  # unknown
    assert view.broker_address(2) == ("h2", 9093) and view.broker_address(3) is None
    assert view.alive_broker_ids() == [2]
    cache.update(1, 1, brokers, {}, {}, {"__consumer_offsets"})
    assert view.partition_count("__consumer_offsets") is None


def test_brokers_on_a_listener_kip_103() -> None:
    cache = MetadataCache()
    brokers = [
        BrokerInfo(id=1, host="h1", port=9092, endpoints=["INTERNAL://10.0.0.1:9094", "SASL_SSL://b1.example:9093"]),
        BrokerInfo(id=2, host="h2", port=9092, endpoints=["INTERNAL://10.0.0.2:9094"]),
    ]
    cache.update(1, 1, brokers, {}, {}, set())
    external = cache.brokers_on("SASL_SSL")
    assert [(b.id, b.host, b.port) for b in external.values()] == [(1, "b1.example", 9093)]
    internal = cache.brokers_on("INTERNAL")
    assert [(b.id, b.host, b.port) for b in internal.values()] == [(1, "10.0.0.1", 9094), (2, "10.0.0.2", 9094)]
    assert cache.brokers_on("PLAINTEXT") == {}
    cache.update(1, 1, brokers[1:], {}, {}, set())  # the next update replaces the cached views
    assert cache.brokers_on("SASL_SSL") == {}
