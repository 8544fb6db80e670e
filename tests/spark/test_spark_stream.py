"""Streaming reads: admission control, restarts from the checkpoint, the latest anchor, stream writes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import consume_all, create_topic, produce

pytestmark = pytest.mark.spark


def _stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run_to_parquet(frame: Any, base: Path) -> list[int]:
    """Run ``frame`` (AvailableNow) into Parquet under ``base``; return input rows per batch."""
    query = (
        frame.selectExpr("partition", "offset", "cast(value as string) AS value")
        .writeStream.format("parquet")
        .option("path", str(base / "out"))
        .option("checkpointLocation", str(base / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def _parquet_rows(spark: Any, base: Path) -> list[tuple[int, int]]:
    return sorted((r[0], r[1]) for r in spark.read.parquet(str(base / "out")).select("partition", "offset").collect())


def test_max_offsets_per_trigger_splits_available_now_into_batches(
    spark: Any, odradek_broker: Any, tmp_path: Path
) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "clicks", 2)
    produce(bootstrap, "clicks", ({"value": b"x%d" % i, "partition": i % 2} for i in range(250)))
    frame = _stream(spark, bootstrap, "clicks", startingOffsets="earliest", maxOffsetsPerTrigger="100")
    assert _run_to_parquet(frame, tmp_path) == [100, 100, 50]
    assert _parquet_rows(spark, tmp_path) == sorted((p, o) for p in range(2) for o in range(125))


def test_restart_from_checkpoint_reads_every_record_exactly_once(
    spark: Any, odradek_broker: Any, tmp_path: Path
) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "orders", 3)
    produce(bootstrap, "orders", ({"value": b"a%d" % i, "partition": i % 3} for i in range(30)))
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "20"}
    assert sum(_run_to_parquet(_stream(spark, bootstrap, "orders", **options), tmp_path)) == 30
    produce(bootstrap, "orders", ({"value": b"b%d" % i, "partition": i % 3} for i in range(25)))
    assert sum(_run_to_parquet(_stream(spark, bootstrap, "orders", **options), tmp_path)) == 25
    assert _run_to_parquet(_stream(spark, bootstrap, "orders", **options), tmp_path) == []
    rows = _parquet_rows(spark, tmp_path)
    assert len(rows) == len(set(rows)) == 55
    per_partition = {0: 10 + 9, 1: 10 + 8, 2: 10 + 8}  # 30 round-robin records, then 25 more
    assert rows == [(p, o) for p, n in per_partition.items() for o in range(n)]


def test_latest_is_anchored_across_a_restart_before_the_first_commit(
    spark: Any, odradek_broker: Any, tmp_path: Path
) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "views", 1)
    produce(bootstrap, "views", ({"value": b"old%d" % i} for i in range(10)))
    options = {"startingOffsets": "latest", "groupIdPrefix": f"anchor-{tmp_path.name}"}
    _run_to_parquet(_stream(spark, bootstrap, "views", **options), tmp_path / "first")
    # The first run resolved latest (offset 10) and died before Spark journaled anything: the
    # restarted query finds no checkpoint and must start from the same offsets, not the new end.
    shutil.rmtree(tmp_path / "first")
    produce(bootstrap, "views", ({"value": b"new%d" % i} for i in range(5)))
    _run_to_parquet(_stream(spark, bootstrap, "views", **options), tmp_path / "second")
    values = sorted(r[0] for r in spark.read.parquet(str(tmp_path / "second" / "out")).select("value").collect())
    assert values == [f"new{i}" for i in range(5)]


def test_stream_copy_to_another_topic_keeps_keys_headers_and_partitions(
    spark: Any, odradek_broker: Any, tmp_path: Path
) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "src", 2)
    create_topic(bootstrap, "dst", 2)
    records = [
        {"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2, "headers": [("n", b"%d" % i)]} for i in range(40)
    ]
    produce(bootstrap, "src", records)
    options = {"startingOffsets": "earliest", "includeHeaders": "true", "maxOffsetsPerTrigger": "15"}
    frame = _stream(spark, bootstrap, "src", **options)
    query = (
        frame.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "dst")  # wins over the source's topic column
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = consume_all(bootstrap, "dst", 2, expected=40)
    got = sorted((m.key(), m.value(), m.partition(), tuple(m.headers() or ())) for m in copied)
    want = sorted((r["key"], r["value"], r["partition"], tuple(r["headers"])) for r in records)
    assert got == want
