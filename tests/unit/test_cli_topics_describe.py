"""``odradek topics --describe`` output and reports, from constructed metadata (no broker).

A three-broker cluster (ids 1, 2, 3) where broker 3 is gone: the Metadata response no longer
lists it, and its partitions have no leader or a shrunken ISR.
"""

from __future__ import annotations

import argparse
import uuid

import pytest

from odradek.cli.common import CommandError
from odradek.cli.topics import (
    DescribeFilters,
    check_args,
    describe_lines,
    is_at_min_isr,
    is_unavailable,
    is_under_min_isr,
    is_under_replicated,
    partition_line,
    select_topics,
    topic_line,
)
from odradek.client.admin import ConfigEntry
from odradek.client.cluster import PartitionInfo, TopicDescription

LIVE = {1, 2}
TOPIC_ID = uuid.UUID("8c6e4a67-82db-4654-a7ab-dd963361fe92")
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def partition(p: int, leader: int, replicas: list[int], isr: list[int]) -> PartitionInfo:
    return PartitionInfo(partition=p, leader=leader, leader_epoch=0, replicas=replicas, isr=isr)


HEALTHY = partition(0, 1, [1, 2, 3], [1, 2, 3])
SHRUNK = partition(1, 2, [2, 3, 1], [2, 1])
LEADERLESS = partition(2, -1, [3], [3])
GONE_LEADER = partition(3, 3, [3, 1], [3])

TOPIC = TopicDescription(
    name="events",
    topic_id=TOPIC_ID,
    partitions={p.partition: p for p in (GONE_LEADER, LEADERLESS, SHRUNK, HEALTHY)},
)
CONFIGS = {
    "min.insync.replicas": ConfigEntry("min.insync.replicas", "2", DYNAMIC_TOPIC_CONFIG),
    "retention.ms": ConfigEntry("retention.ms", "604800000", DEFAULT_CONFIG),
    "cleanup.policy": ConfigEntry("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG),
    "segment.bytes": ConfigEntry("segment.bytes", "1073741824", STATIC_BROKER_CONFIG),
}
DEFAULTS_ONLY = {
    "min.insync.replicas": ConfigEntry("min.insync.replicas", "1", DEFAULT_CONFIG),
    "retention.ms": ConfigEntry("retention.ms", "604800000", DEFAULT_CONFIG),
}


def lines(filters: DescribeFilters, configs: dict[str, ConfigEntry] = CONFIGS) -> list[str]:
    return describe_lines(TOPIC, configs, filters, LIVE)


def test_predicates() -> None:
    assert [is_under_replicated(p) for p in (HEALTHY, SHRUNK, LEADERLESS, GONE_LEADER)] == [False, True, False, True]
    assert [is_unavailable(p, LIVE, LIVE) for p in (HEALTHY, SHRUNK, LEADERLESS, GONE_LEADER)] == [
        False,
        False,
        True,
        True,
    ]
    # a leader the Metadata response lists but DescribeCluster does not count as live
    assert is_unavailable(HEALTHY, {2}, {1, 2})
    assert [is_under_min_isr(p, 2, LIVE) for p in (HEALTHY, SHRUNK, LEADERLESS, GONE_LEADER)] == [
        False,
        False,
        True,
        True,
    ]
    assert is_under_min_isr(SHRUNK, 3, LIVE) and not is_under_min_isr(SHRUNK, None, LIVE)
    assert [is_at_min_isr(p, 2) for p in (HEALTHY, SHRUNK, LEADERLESS, GONE_LEADER)] == [False, True, False, False]
    assert not is_at_min_isr(SHRUNK, None)


def test_kafka_layout() -> None:
    assert topic_line(TOPIC, CONFIGS) == (
        "Topic: events\tTopicId: jG5KZ4LbRlSnq92WM2H-kg\tPartitionCount: 4\tReplicationFactor: 3\t"
        "Configs: cleanup.policy=compact,min.insync.replicas=2,segment.bytes=1073741824"
    )
    assert topic_line(TopicDescription("empty"), {}) == (
        "Topic: empty\tPartitionCount: 0\tReplicationFactor: 0\tConfigs: "
    )
    assert (
        partition_line("events", SHRUNK, LIVE) == "\tTopic: events\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,1"
    )
    assert (
        partition_line("events", LEADERLESS, LIVE) == "\tTopic: events\tPartition: 2\tLeader: none\tReplicas: 3\tIsr: 3"
    )
    # the leader is a broker the Metadata response does not list: no leader, as Kafka's admin client
    assert "\tLeader: none\t" in partition_line("events", GONE_LEADER, LIVE)
    assert "\tLeader: 3\t" in partition_line("events", GONE_LEADER, {1, 2, 3})


def test_describe_everything_in_partition_order() -> None:
    out = lines(DescribeFilters())
    assert out[0].startswith("Topic: events\t")
    assert [line.split("\t")[2] for line in out[1:]] == [f"Partition: {p}" for p in range(4)]


def test_under_replicated_and_unavailable_reports() -> None:
    under = lines(DescribeFilters(under_replicated=True))
    assert under == [partition_line("events", SHRUNK, LIVE), partition_line("events", GONE_LEADER, LIVE)]
    unavailable = lines(DescribeFilters(unavailable=True))
    assert unavailable == [partition_line("events", LEADERLESS, LIVE), partition_line("events", GONE_LEADER, LIVE)]
    healthy = TopicDescription("ok", partitions={0: HEALTHY})
    for filters in (DescribeFilters(under_replicated=True), DescribeFilters(unavailable=True)):
        assert describe_lines(healthy, CONFIGS, filters, LIVE) == []


def test_min_isr_reports_use_the_topic_config() -> None:
    assert lines(DescribeFilters(under_min_isr=True)) == [
        partition_line("events", LEADERLESS, LIVE),
        partition_line("events", GONE_LEADER, LIVE),
    ]
    assert lines(DescribeFilters(at_min_isr=True)) == [partition_line("events", SHRUNK, LIVE)]
    # min.insync.replicas=1: only the leaderless partitions are under it, the single-ISR ones at it
    assert lines(DescribeFilters(under_min_isr=True), DEFAULTS_ONLY) == lines(DescribeFilters(unavailable=True))
    assert lines(DescribeFilters(at_min_isr=True), DEFAULTS_ONLY) == [
        partition_line("events", LEADERLESS, LIVE),
        partition_line("events", GONE_LEADER, LIVE),
    ]


def test_topics_with_overrides_prints_topic_lines_only() -> None:
    assert lines(DescribeFilters(with_overrides=True)) == [topic_line(TOPIC, CONFIGS)]
    assert lines(DescribeFilters(with_overrides=True), DEFAULTS_ONLY) == []
    assert topic_line(TOPIC, DEFAULTS_ONLY).endswith("\tConfigs: ")


def test_topic_selection_as_kafka_include_list() -> None:
    names = ["orders", "payments", "orders-dlq", "__consumer_offsets"]
    assert select_topics(names, None) == ["__consumer_offsets", "orders", "orders-dlq", "payments"]
    assert select_topics(names, "orders") == ["orders"]
    assert select_topics(names, "orders.*") == ["orders", "orders-dlq"]
    assert select_topics(names, "' orders, payments '") == ["orders", "payments"]
    assert select_topics(names, "__.*|orders") == ["__consumer_offsets", "orders"]
    assert select_topics(names, "__.*|orders", exclude_internal=True) == ["orders"]
    with pytest.raises(CommandError, match=r"^\(\[ is an invalid regex\.$"):
        select_topics(names, "([")


def _args(
    *flags: str, action: str = "describe", topic: str | None = None, if_exists: bool = False
) -> argparse.Namespace:
    values = {a: a == action for a in ("create", "list", "describe", "alter", "delete")}
    for name in (
        "under_replicated_partitions",
        "unavailable_partitions",
        "under_min_isr_partitions",
        "at_min_isr_partitions",
        "topics_with_overrides",
        "exclude_internal",
    ):
        values[name] = name.replace("_", "-") in flags
    return argparse.Namespace(topic=topic, if_exists=if_exists, **values)


def test_flag_combinations() -> None:
    assert check_args(_args("under-replicated-partitions")) is None
    assert check_args(_args("exclude-internal", action="list")) is None
    assert check_args(_args("unavailable-partitions", action="list")) == (
        'Option "[unavailable-partitions]" can\'t be used with option "[list]"'
    )
    assert check_args(_args("under-replicated-partitions", "topics-with-overrides")) == (
        'Option "[under-replicated-partitions]" can\'t be used with option "[topics-with-overrides]"'
    )
    assert check_args(_args("exclude-internal", action="delete", topic="t")) == (
        'Option "[exclude-internal]" can\'t be used with option "[delete]"'
    )
    assert check_args(_args(if_exists=True)) == "--topic is required to describe a topic"
