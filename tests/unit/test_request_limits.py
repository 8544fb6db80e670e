"""Request limits: entry counts, capped timeouts and fetch sizes, and the partition budget."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.fetch.v12.request import FetchRequest
from kio.static.primitive import i16, i32, i32Timedelta

from odradek.errors import InvalidPartitionsError, PolicyViolationError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema
from odradek.protocol.messages import build, nested
from odradek.replication.partition import PartitionState
from odradek.server.config import KafkaConfig
from odradek.server.metadata_cache import MetadataCache
from odradek.server.request_limits import PartitionLimits, RequestTooLarge, bound_request, count_entries
from odradek.storage.topic_partition import TopicPartition

CONFIG = KafkaConfig(
    {
        "odradek.request.max.entries": "1000",
        "odradek.request.max.timeout.ms": "60000",
        "fetch.max.bytes": "1048576",
        "odradek.max.partitions.per.request": "100",
        "odradek.max.partitions.per.broker": "50",
    }
)


def _topics(n: int, partitions: int = 1) -> CreateTopicsRequest:
    topic = CreatableTopic(
        name="t", num_partitions=i32(partitions), replication_factor=i16(1), assignments=(), configs=()
    )
    return CreateTopicsRequest(topics=(topic,) * n, timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)))


def _fetch(replica_id: int, max_bytes: int, max_wait_ms: int) -> FetchRequest:
    return FetchRequest(
        cluster_id=None,
        replica_id=replica_id,
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(1),
        max_bytes=i32(max_bytes),
        isolation_level=0,
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_a_request_over_the_entry_limit_is_refused_naming_the_key() -> None:
    assert bound_request(ApiKey.CREATE_TOPICS, _topics(1000), CONFIG).topics
    with pytest.raises(RequestTooLarge, match=r"odradek\.request\.max\.entries=1000"):
        bound_request(ApiKey.CREATE_TOPICS, _topics(1001), CONFIG)


def test_counting_stops_past_the_limit() -> None:
    request = _topics(2_000_000)
    started = time.perf_counter()
    assert count_entries(request, 10) > 10
    assert time.perf_counter() - started < 0.05
    assert count_entries(_topics(3), 10) == 3


def test_the_controllers_requests_carry_any_number_of_entries() -> None:
    request = _topics(5000)  # any dataclass: the API key decides
    assert bound_request(ApiKey.UPDATE_METADATA, request, CONFIG) is request


def test_timeouts_above_the_cap_are_lowered_and_others_kept() -> None:
    huge = CreateTopicsRequest(topics=(), timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=2**31 - 1)))
    assert bound_request(ApiKey.CREATE_TOPICS, huge, CONFIG).timeout == datetime.timedelta(seconds=60)
    small = _topics(1)
    assert bound_request(ApiKey.CREATE_TOPICS, small, CONFIG) is small


def test_a_consumer_fetch_is_capped_at_fetch_max_bytes_and_a_followers_is_not() -> None:
    consumer = bound_request(ApiKey.FETCH, _fetch(-1, 2**31 - 1, 2**31 - 1), CONFIG)
    assert consumer.max_bytes == 1048576
    assert consumer.max_wait == datetime.timedelta(seconds=60)
    follower = bound_request(ApiKey.FETCH, _fetch(1, 2**31 - 1, 500), CONFIG)
    assert follower.max_bytes == 2**31 - 1


def _cache_with(replicas: int) -> MetadataCache:
    cache = MetadataCache()
    states = {TopicPartition("old", p): PartitionState(0, 0, [0], [0]) for p in range(replicas)}
    cache.update(0, 1, [], states, {"old": uuid.uuid4()}, set())
    return cache


def test_more_new_partitions_than_the_request_limit_is_invalid_partitions() -> None:
    limits = PartitionLimits(CONFIG, MetadataCache())
    refused = pytest.raises(InvalidPartitionsError, match=r"2147483647 new partitions.*per\.request=100")
    with refused, limits.reserve("t", 2**31 - 1, 1, 3):
        pass
    assert limits.reserved == 0


def test_the_cluster_total_counts_the_cache_and_creations_under_way() -> None:
    limits = PartitionLimits(CONFIG, _cache_with(40))
    with limits.reserve("a", 5, 1, 1):
        assert limits.reserved == 5
        refused = pytest.raises(PolicyViolationError, match=r"per\.broker=50 x 1 live brokers")
        with refused, limits.reserve("b", 6, 1, 1):
            pass
        with limits.reserve("b", 5, 1, 1):
            assert limits.reserved == 10
    assert limits.reserved == 0
    with limits.reserve("c", 30, 2, 2):  # 40 + 60 replicas on 2 brokers: 100 allowed
        pass


def test_config_and_acl_requests_are_bounded_by_their_resources() -> None:
    schema = api_schema(32, 4)
    resource = nested(schema.request_type, "DescribeConfigsResource")
    entries = tuple(build(resource, resource_type=2, resource_name=f"t{i}", configuration_keys=None) for i in range(11))
    config = KafkaConfig({"odradek.request.max.resources": "10"})
    request = build(schema.request_type, resources=entries[:10], include_synonyms=False, include_documentation=False)
    assert bound_request(ApiKey.DESCRIBE_CONFIGS, request, config) is request
    over = build(schema.request_type, resources=entries, include_synonyms=False, include_documentation=False)
    with pytest.raises(RequestTooLarge, match=r"11 resources, more than odradek\.request\.max\.resources=10"):
        bound_request(ApiKey.DESCRIBE_CONFIGS, over, config)
