"""The ZooKeeper consumer's partition assignment (Kafka 0.8.2's range and roundrobin) and its config."""

from __future__ import annotations

import pytest

from odradek.zkclients.assignors import range_assign, roundrobin_assign
from odradek.zkclients.consumer_connector import ConsumerConfig


def test_range_gives_each_thread_a_contiguous_run_extra_partitions_first() -> None:
    subs = {"c2": {"t": 1}, "c1": {"t": 2}}
    got = range_assign(subs, {"t": list(range(7))})
    # threads sorted as strings: c1-0, c1-1, c2-0; 7 partitions: 3, 2, 2
    assert got == {"c1-0": [("t", 0), ("t", 1), ("t", 2)], "c1-1": [("t", 3), ("t", 4)], "c2-0": [("t", 5), ("t", 6)]}
    six = range_assign({"a": {"t": 1}, "b": {"t": 1}, "c": {"t": 1}}, {"t": list(range(6))})
    assert [len(v) for _k, v in sorted(six.items())] == [2, 2, 2]
    more_threads = range_assign({"a": {"t": 3}}, {"t": [0]})
    assert more_threads == {"a-0": [("t", 0)], "a-1": [], "a-2": []}


def test_range_is_per_topic_and_only_for_subscribers() -> None:
    got = range_assign({"a": {"x": 1, "y": 1}, "b": {"x": 1}}, {"x": [0, 1], "y": [0, 1]})
    assert got == {"a-0": [("x", 0), ("y", 0), ("y", 1)], "b-0": [("x", 1)]}


def test_roundrobin_deals_hash_ordered_partitions_over_all_threads() -> None:
    subs = {"a": {"x": 1, "y": 1}, "b": {"x": 1, "y": 1}}
    got = roundrobin_assign(subs, {"x": [0, 1, 2], "y": [0, 1, 2]})
    dealt = sorted(tp for v in got.values() for tp in v)
    assert dealt == [("x", 0), ("x", 1), ("x", 2), ("y", 0), ("y", 1), ("y", 2)]
    assert sorted(len(v) for v in got.values()) == [3, 3]
    # "[x,0]".hashCode() < "[x,1]".hashCode() < ...: consecutive partitions alternate threads
    assert got["a-0"][0] == ("x", 0) and got["b-0"][0] == ("x", 1)
    with pytest.raises(ValueError, match="same topics"):
        roundrobin_assign({"a": {"x": 1}, "b": {"y": 1}}, {"x": [0], "y": [0]})


def test_config_takes_kafka_property_names() -> None:
    props = {"auto.commit.interval.ms": "250", "auto.commit.enable": "false", "auto.offset.reset": "smallest"}
    config = ConsumerConfig.from_properties("g", "zk:2181", {**props, "consumer.id": "me"})
    assert (config.auto_commit_interval_ms, config.auto_commit_enable, config.consumer_id) == (250, False, "me")
    with pytest.raises(ValueError, match="unknown consumer property"):
        ConsumerConfig.from_properties("g", "zk:2181", {"no.such.key": "1"})
    with pytest.raises(ValueError, match="smallest or largest"):
        ConsumerConfig.from_properties("g", "zk:2181", {"auto.offset.reset": "sometimes"})
