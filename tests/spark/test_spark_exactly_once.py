"""The sink's ``deliveryGuarantee=exactly-once``: replayed micro-batches, retried tasks and zombie
attempts add nothing that a read_committed consumer sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, produce, read_committed

pytestmark = pytest.mark.spark


def _write(frame: Any, bootstrap: str, topic: str, batch_id: int) -> None:
    (
        frame.write.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly-once")
        .option("queryId", "eos-test")
        .option("batchId", str(batch_id))
        .mode("append")
        .save()
    )


def test_a_replayed_batch_adds_nothing_and_a_zombie_is_aborted(spark: Any, odradek_broker: Any) -> None:
    from confluent_kafka import Producer

    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "eos-out", 2)
    first = spark.createDataFrame([(f"a{i}",) for i in range(30)], "value string").repartition(2)
    _write(first, bootstrap, "eos-out", 0)
    _write(first, bootstrap, "eos-out", 0)  # the driver died after writing, before checkpointing: replay
    # a zombie attempt of task partition 0 of batch 1 left an open transaction behind
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": "odradek-sink-eos-test-0"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("eos-out", b"zombie", partition=0)
    assert zombie.flush(10) == 0
    second = spark.createDataFrame([(f"b{i}",) for i in range(10)], "value string").repartition(2)
    _write(second, bootstrap, "eos-out", 1)
    seen = read_committed(bootstrap, "eos-out", 2)
    assert sorted(seen) == sorted([f"a{i}".encode() for i in range(30)] + [f"b{i}".encode() for i in range(10)])


def test_a_streaming_query_replaying_its_last_batch_writes_it_once(
    spark: Any, odradek_broker: Any, tmp_path: Path
) -> None:
    bootstrap = odradek_broker.bootstrap_servers
    create_topic(bootstrap, "eos-src", 2)
    create_topic(bootstrap, "eos-dst", 2)
    produce(bootstrap, "eos-src", ({"value": b"v%d" % i, "partition": i % 2} for i in range(60)))
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        frame = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", "eos-src")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "25")
            .load()
            .select("value")
        )
        query = (
            frame.writeStream.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "eos-dst")
            .option("deliveryGuarantee", "exactly-once")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) >= 3  # 60 records, 25 per trigger
    commits[-1].unlink()  # as if the driver had been killed after the write, before the commit log
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()  # Spark replays the last batch: its tasks find it written
    seen = read_committed(bootstrap, "eos-dst", 2)
    assert sorted(seen) == sorted(b"v%d" % i for i in range(60))
