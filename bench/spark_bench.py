"""Spark data source throughput and micro-batch latency against an in-process odradek broker.

Prints one JSON object:

* ``batch_read``: ``spark.read.format("odradek")`` of every record of a topic into Spark's
  ``noop`` sink: rows/s through the Arrow path (executors fetch with confluent-kafka and yield
  ``pyarrow.RecordBatch`` es). A warm-up query runs first so worker start-up is not counted.
* ``micro_batch``: a ``readStream`` of a one-partition topic holding ``batches`` x
  ``batch-records`` records, with ``maxOffsetsPerTrigger`` under ``Trigger.AvailableNow`` into
  ``noop``: median and p90 ``triggerExecution`` time of the small batches (offset planning, the
  Spark job, checkpoint writes) and the first batch separately.

The broker runs in this process on its own thread (odradek.testing.BrokerRunner) and Spark runs
``local[2]``, so everything shares the machine.

    .venv/bin/python bench/spark_bench.py [--records 300000] [--value-bytes 100] [--batch-records 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import BrokerRunner

TOPIC = "bench"
PARTITIONS = 4
STREAM_TOPIC = "bench_stream"


def produce_records(bootstrap: str, topic: str, records: int, value_bytes: int) -> float:
    """Produce ``records`` records (8-byte zero-padded keys, one random value of ``value_bytes``)
    in big batches; seconds until all are acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 10,
            "batch.size": 1024 * 1024,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    value = os.urandom(value_bytes)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=b"%08d" % (i % 100_000_000))
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0
    return time.perf_counter() - started


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    return produce_records(bootstrap, topic, records, value_bytes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=1000, help="maxOffsetsPerTrigger of the stream")
    parser.add_argument("--batches", type=int, default=20, help="micro-batches to time")
    args = parser.parse_args(argv)

    from odradek.spark.pipeline import spark_session

    with tempfile.TemporaryDirectory(prefix="odradek-spark-bench-") as tmp, BrokerRunner(tmp) as broker:
        bootstrap = broker.bootstrap_servers
        produce_s = fill(bootstrap, TOPIC, PARTITIONS, args.records, args.value_bytes)
        fill(bootstrap, STREAM_TOPIC, 1, args.batches * args.batch_records, args.value_bytes)
        spark = spark_session("local[2]", shuffle_partitions=2, app_name="odradek-spark-bench")
        try:

            def reader() -> Any:  # DataFrameReader.option mutates: a fresh reader per query
                source = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
                return source.option("subscribe", TOPIC)

            warm_up = json.dumps({TOPIC: {str(p): 10 for p in range(PARTITIONS)}})
            # warm-up: start the Python workers and import pyarrow before timing
            reader().option("endingOffsets", warm_up).load().write.format("noop").mode("overwrite").save()
            started = time.perf_counter()
            reader().load().write.format("noop").mode("overwrite").save()
            read_s = time.perf_counter() - started

            frame = (
                spark.readStream.format("odradek")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", STREAM_TOPIC)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(args.batch_records))
                .load()
            )
            stream = (
                frame.writeStream.format("noop")
                .option("checkpointLocation", os.path.join(tmp, "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            stream.awaitTermination(600)
            progress = [p for p in stream.recentProgress if p["numInputRows"] > 0]
            durations = [p["durationMs"]["triggerExecution"] for p in progress]
            rows = [p["numInputRows"] for p in progress]
        finally:
            spark.stop()

    steady = sorted(durations[1:]) or durations
    result = {
        "records": args.records,
        "value_bytes": args.value_bytes,
        "partitions": PARTITIONS,
        "produce_seconds": round(produce_s, 2),
        "batch_read": {
            "rows": args.records,
            "seconds": round(read_s, 2),
            "rows_per_s": round(args.records / read_s),
        },
        "micro_batch": {
            "max_offsets_per_trigger": args.batch_records,
            "batches": len(durations),
            "rows_per_batch_median": statistics.median(rows) if rows else 0,
            "first_batch_ms": durations[0] if durations else None,
            "median_ms": statistics.median(steady) if steady else None,
            "p90_ms": steady[int(0.9 * (len(steady) - 1))] if steady else None,
        },
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "spark_master": "local[2]",
        },
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
