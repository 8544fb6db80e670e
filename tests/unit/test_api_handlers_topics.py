"""CreateTopics and Metadata on fakes of their services (no authorizer)."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.metadata.v12 import request as metadata_v12

from odradek.errors import ErrorCode
from odradek.server.apis import create_topics, metadata

from .api_fakes import FakeMetadataCache, FakeServices, call


def _create(*topics: tuple[str, int]) -> create_v7.CreateTopicsRequest:
    return create_v7.CreateTopicsRequest(
        topics=tuple(
            create_v7.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=(),
                configs=(create_v7.CreatableTopicConfig(name="retention.ms", value="1000"),),
            )
            for name, partitions in topics
        ),
        timeout=datetime.timedelta(0),
        validate_only=False,
    )


def test_create_topics_creates_each_topic_and_answers_its_partitions_and_configs() -> None:
    services = FakeServices()
    response = call(create_topics, services, 7, _create(("a", 3)))
    (result,) = response.topics
    assert (result.name, result.error_code, result.num_partitions, result.replication_factor) == ("a", 0, 3, 1)
    assert ("retention.ms", "1000") in {(c.name, c.value) for c in result.configs}
    ((name, partitions, replication, options),) = services.admin.created
    assert (name, partitions, replication, options["configs"]) == ("a", 3, 1, {"retention.ms": "1000"})


def test_create_topics_answers_duplicates_and_existing_topics_per_topic() -> None:
    services = FakeServices()
    services.admin.overrides["old"] = {}
    response = call(create_topics, services, 7, _create(("dup", 1), ("dup", 2), ("old", 1)))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("dup", ErrorCode.invalid_request),
        ("dup", ErrorCode.invalid_request),
        ("old", ErrorCode.topic_already_exists),
    ]
    assert services.admin.created == []


def _metadata(*names: str, auto: bool = True) -> metadata_v12.MetadataRequest:
    return metadata_v12.MetadataRequest(
        topics=tuple(metadata_v12.MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False,
    )


def test_metadata_describes_known_topics_brokers_and_the_controller() -> None:
    cache = FakeMetadataCache({"t": 2})
    response = call(metadata, FakeServices(metadata_cache=cache), 12, _metadata("t"))
    assert (response.cluster_id, response.controller_id) == ("cluster-1", 1)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "broker-1", 9092)]
    (topic,) = response.topics
    assert (topic.name, topic.error_code, topic.topic_id) == ("t", ErrorCode.none, cache.topics["t"].topic_id)
    assert [(p.partition_index, p.leader_id, p.isr_nodes) for p in topic.partitions] == [(0, 1, (1,)), (1, 1, (1,))]


def test_metadata_of_unknown_topics_asks_for_auto_creation_and_answers_its_error() -> None:
    services = FakeServices()
    created = call(metadata, services, 12, _metadata("new"))
    refused = call(metadata, services, 12, _metadata("other", auto=False))
    unknown_id = call(
        metadata,
        services,
        12,
        metadata_v12.MetadataRequest(
            topics=(metadata_v12.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    assert [(t.name, t.error_code) for t in created.topics] == [("new", ErrorCode.leader_not_available)]
    assert [(t.name, t.error_code) for t in refused.topics] == [("other", ErrorCode.unknown_topic_or_partition)]
    assert [(t.name, t.error_code) for t in unknown_id.topics] == [(None, ErrorCode.unknown_topic_id)]
    assert services.admin.auto_created == ["new", "other"]


def test_metadata_answers_a_topic_named_twice_once() -> None:
    cache = FakeMetadataCache({"t": 1})
    response = call(metadata, FakeServices(metadata_cache=cache), 12, _metadata("t", "u", "t", "t", auto=False))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("t", ErrorCode.none),
        ("u", ErrorCode.unknown_topic_or_partition),
    ]
