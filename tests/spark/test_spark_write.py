"""Batch writes: column rules, topic routing, keys, partitions and headers land where they should."""

from __future__ import annotations

from typing import Any

import pytest
from spark_helpers import consume_all, create_topic

pytestmark = pytest.mark.spark

SCHEMA = "key string, value string, topic string, partition int, headers array<struct<key:string,value:binary>>"


def test_rows_land_in_their_topic_and_partition(spark: Any, odradek_broker: Any) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "a", 2)
    create_topic(bootstrap, "b", 1)
    rows = [
        ("k1", "v1", "a", 1, [("h", b"x"), ("null", None)]),
        ("k2", "v2", "b", None, None),
        (None, "v3", "a", 0, []),
        ("k4", None, "b", 0, None),  # null value: a tombstone
    ]
    frame = spark.createDataFrame(rows, SCHEMA).repartition(2)
    frame.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    in_a = consume_all(bootstrap, "a", 2, expected=2)
    in_b = consume_all(bootstrap, "b", 1, expected=2)
    by_value = {m.value(): (m.key(), m.partition(), m.headers()) for m in in_a}
    assert by_value == {b"v1": (b"k1", 1, [("h", b"x"), ("null", None)]), b"v3": (None, 0, None)}
    assert {m.key(): m.value() for m in in_b} == {b"k2": b"v2", b"k4": None}


def test_topic_option_overrides_the_column_and_binary_columns_work(spark: Any, odradek_broker: Any) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "target", 1)
    frame = spark.createDataFrame([(b"\x00\x01", b"\xff", "ignored")] * 3, "key binary, value binary, topic string")
    frame.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", "target").mode(
        "append"
    ).save()
    got = consume_all(bootstrap, "target", 1, expected=3)
    assert [(m.key(), m.value()) for m in got] == [(b"\x00\x01", b"\xff")] * 3


def test_same_key_same_partition_as_a_java_producer(spark: Any, odradek_broker: Any) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "keyed", 4)
    keys = [f"user-{i}" for i in range(20)]
    frame = spark.createDataFrame([(k, "v") for k in keys], "key string, value string")
    frame.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", "keyed").mode(
        "append"
    ).save()
    got = {m.key().decode(): m.partition() for m in consume_all(bootstrap, "keyed", 4, expected=20)}
    # Kafka's murmur2 partitioner: toPositive(murmur2(key)) % partitions
    assert got == {k: _murmur2(k.encode()) % 4 for k in keys}


def test_null_topic_and_overwrite_fail_clearly(spark: Any, odradek_broker: Any) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    frame = spark.createDataFrame([(None, "v")], "topic string, value string")
    with pytest.raises(Exception, match=r"contains a null topic\. Use the `topic` option"):
        frame.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        frame.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode("overwrite").save()


def _murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` followed by ``toPositive``."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    if tail:
        rest = data[length - tail :]
        if tail >= 3:
            h ^= rest[2] << 16
        if tail >= 2:
            h ^= rest[1] << 8
        h ^= rest[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h & 0x7FFFFFFF
