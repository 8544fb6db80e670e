"""Batch reads: subscriptions, offset and timestamp ranges, metadata columns."""

from __future__ import annotations

from typing import Any

import pytest
from spark_helpers import create_topic, produce

pytestmark = pytest.mark.spark

BASE_MS = 1_700_000_000_000
PARTITIONS = 3
PER_PARTITION = 10


def _record(p: int, i: int) -> dict[str, Any]:
    return {
        "key": f"k{p}-{i}".encode(),
        "value": f"v{p}-{i}".encode(),
        "partition": p,
        "timestamp": BASE_MS + p * 1000 + i * 100,
        "headers": [("h", str(i).encode()), ("empty", None)] if i % 2 == 0 else None,
    }


@pytest.fixture
def events(odradek_broker: Any) -> str:
    """Topic ``events``: 3 partitions x 10 records; record i of partition p has offset i and
    timestamp BASE + p*1000 + i*100."""
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "events", PARTITIONS)
    produce(bootstrap, "events", (_record(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)))
    return str(bootstrap)


def offsets(spark: Any, bootstrap: str, **options: str) -> list[tuple[str, int, int]]:
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = reader.load().select("topic", "partition", "offset").collect()
    return sorted((r["topic"], r["partition"], r["offset"]) for r in rows)


def expected(ranges: dict[int, range], topic: str = "events") -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, offs in ranges.items() for o in offs)


def test_subscribe_reads_every_record_with_metadata_columns(spark: Any, events: str) -> None:
    frame = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", events)
        .option("subscribe", "events")
        .option("includeHeaders", "true")
        .load()
    )
    assert [f.name for f in frame.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]  # fmt: skip
    rows = frame.selectExpr("*", "unix_millis(timestamp) AS ts_ms").collect()
    assert len(rows) == PARTITIONS * PER_PARTITION
    for row in rows:
        p, i = row["partition"], row["offset"]
        want = _record(p, i)
        assert (bytes(row["key"]), bytes(row["value"]), row["topic"]) == (want["key"], want["value"], "events")
        assert row["ts_ms"] == want["timestamp"]
        assert row["timestampType"] == 0
        headers = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"] or []]
        assert headers == (want["headers"] or [])


def test_schema_without_headers_and_default_range(spark: Any, events: str) -> None:
    frame = spark.read.format("odradek").option("kafka.bootstrap.servers", events).option("subscribe", "events").load()
    assert frame.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,timestampType:int>"
    )
    assert frame.count() == 30


def test_subscribe_pattern_and_assign(spark: Any, events: str) -> None:
    create_topic(events, "events2", 1)
    create_topic(events, "other", 1)
    produce(events, "events2", [{"value": b"a"}, {"value": b"b"}])
    produce(events, "other", [{"value": b"c"}])
    got = offsets(spark, events, subscribePattern="events.*")
    assert got == [*expected({p: range(10) for p in range(3)}), ("events2", 0, 0), ("events2", 0, 1)]
    assert offsets(spark, events, assign='{"events":[0,2]}') == expected({0: range(10), 2: range(10)})
    assert offsets(spark, events, subscribe="events2,missing") == [("events2", 0, 0), ("events2", 0, 1)]


def test_json_starting_and_ending_offsets(spark: Any, events: str) -> None:
    got = offsets(
        spark,
        events,
        subscribe="events",
        startingOffsets='{"events":{"0":2,"1":-2,"2":5}}',
        endingOffsets='{"events":{"0":5,"1":3,"2":-1}}',
    )
    assert got == expected({0: range(2, 5), 1: range(0, 3), 2: range(5, 10)})
    assert offsets(spark, events, subscribe="events", startingOffsets="earliest", endingOffsets="latest") == expected(
        {p: range(10) for p in range(3)}
    )


def test_timestamp_ranges(spark: Any, events: str) -> None:
    window = {"startingTimestamp": str(BASE_MS + 500), "endingTimestamp": str(BASE_MS + 1500)}
    got = offsets(spark, events, subscribe="events", **window)
    assert got == expected({0: range(5, 10), 1: range(0, 5)})
    by_partition = f'{{"events":{{"0":{BASE_MS + 300},"1":{BASE_MS + 1900},"2":{BASE_MS}}}}}'
    got = offsets(spark, events, subscribe="events", startingOffsetsByTimestamp=by_partition)
    assert got == expected({0: range(3, 10), 1: range(9, 10), 2: range(10)})
    future = str(BASE_MS + 10**9)
    latest = offsets(
        spark, events, subscribe="events", startingTimestamp=future, startingOffsetsByTimestampStrategy="latest"
    )
    assert latest == []
    with pytest.raises(Exception, match="No offset matched from request of topic-partition events-"):
        offsets(spark, events, subscribe="events", startingTimestamp=future)


def test_min_partitions_splits_tasks_without_changing_rows(spark: Any, events: str) -> None:
    frame = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", events)
        .option("subscribe", "events")
        .option("minPartitions", "6")
        .load()
    )
    assert frame.rdd.getNumPartitions() == 6
    rows = frame.select("partition", "offset").collect()
    assert sorted((r[0], r[1]) for r in rows) == [(p, o) for p in range(3) for o in range(10)]


def test_empty_and_missing_topics_read_nothing(spark: Any, odradek_broker: Any) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "quiet", 2)
    assert offsets(spark, bootstrap, subscribe="quiet") == []
    assert offsets(spark, bootstrap, subscribe="does-not-exist") == []


def test_deleted_records_fail_or_are_skipped_per_fail_on_data_loss(spark: Any, odradek_broker: Any) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "aged", 1)
    produce(bootstrap, "aged", ({"value": b"%d" % i} for i in range(20)))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition("aged", 0, 10)]).values():
        future.result(timeout=30)  # the log now starts at offset 10, as after retention
    with pytest.raises(Exception, match=r"Could not read records in offset \[5, 20\) for topic partition aged-0"):
        offsets(spark, bootstrap, subscribe="aged", startingOffsets='{"aged":{"0":5}}')
    kept = offsets(spark, bootstrap, subscribe="aged", startingOffsets='{"aged":{"0":5}}', failOnDataLoss="false")
    assert kept == [("aged", 0, o) for o in range(10, 20)]
    past_end = {"startingOffsets": '{"aged":{"0":15}}', "endingOffsets": '{"aged":{"0":25}}'}
    with pytest.raises(Exception, match=r"offset \[20, 25\) for topic partition aged-0 .* the partition ends at 20"):
        offsets(spark, bootstrap, subscribe="aged", **past_end)
    short = offsets(spark, bootstrap, subscribe="aged", failOnDataLoss="false", **past_end)
    assert short == [("aged", 0, o) for o in range(15, 20)]


def test_a_cleaned_compacted_topic_reads_its_last_values_without_data_loss(
    spark: Any, odradek_broker_factory: Any
) -> None:
    """The cleaner leaves gaps between offsets; with failOnDataLoss (the default) Spark reads the
    kept records, each key once with its last value, and reports nothing (only offsets below the
    log start are data loss)."""
    import time
    from pathlib import Path

    from confluent_kafka.admin import AdminClient, NewTopic

    broker = odradek_broker_factory(overrides={"log.cleaner.backoff.ms": "100"})
    bootstrap = broker.bootstrap_servers
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("table", 1, 1, config=config)])["table"].result(30)
    records = [{"key": b"k%02d" % k, "value": b"v%d-%02d" % (r, k)} for r in range(5) for k in range(40)]
    last = {r["key"]: r["value"] for r in records}
    produce(bootstrap, "table", records)
    # two records over half a segment each: the second starts the active segment, so all else is cleanable
    produce(bootstrap, "table", ({"key": b"roll", "value": b"r" * 2200} for _ in range(2)))
    checkpoint = Path(broker.data_dir) / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + 30
    while "table 0 " not in (checkpoint.read_text() if checkpoint.exists() else ""):
        assert time.monotonic() < deadline, "the cleaner did not clean table-0"
        time.sleep(0.05)
    frame = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "table")
    rows = frame.load().select("key", "value", "offset").collect()
    got = [(bytes(r["key"]), bytes(r["value"]), r["offset"]) for r in rows if bytes(r["key"]) != b"roll"]
    assert {k: v for k, v, _ in got} == last
    assert len(got) == len(last)  # each key once
    assert min(o for _, _, o in got) == 160  # the range starts at 0, in the gap the cleaner left
