"""The Spark data source on a 3-broker odradek cluster: read throughput by executor cores, and the
exactly-once sink against the plain sink.

Starts one ZooKeeper (Debian's package, :class:`odradek.testing_zk.ZooKeeperServer`) and a
3-broker ``odradek cluster`` (:class:`odradek.cli.cluster.LocalCluster`, broker processes), fills a
topic of ``--partitions`` partitions (replication factor 3, ``min.insync.replicas=2``) with
``--records`` records of ``--value-bytes`` bytes, then for each Spark master:

* ``local[1]``, ``local[2]``: Spark in this process;
* ``standalone-1-core``, ``standalone-2-cores``: a Spark standalone master and one worker with 2
  cores started from the pyspark package (:class:`odradek.spark.standalone.StandaloneCluster`),
  the application limited to 1 or 2 cores (``spark.cores.max`` = ``spark.executor.cores``), so
  executors run in their own JVM and Python workers; skipped with ``--no-standalone``;
* or only the ``--master`` given (any URL Spark accepts; ``--cores-max`` sizes the application).

``read``: ``spark.read.format("odradek")`` of the whole topic into Spark's ``noop`` sink after a
small warm-up query (so worker start-up is not counted): seconds, rows/s and MB/s (key and value
bytes). ``write``: ``--write-records`` generated rows written with ``df.write.format("odradek")``
to a fresh topic (replication factor 3, ``min.insync.replicas=2``), ``--write-tasks`` tasks, once
with the plain at-least-once sink and once with ``deliveryGuarantee=exactly-once`` (one Kafka
transaction per task); rows/s, MB/s and the ratio. Prints one JSON document.

Everything shares the machine (brokers, ZooKeeper, Spark's JVMs); on 2 cores the figures compare
configurations against each other, not against a production cluster.

    .venv/bin/python bench/spark_cluster.py [--records 300000] [--value-bytes 100] [--partitions 4]
        [--write-records 100000] [--write-tasks 2] [--master spark://host:7077 --cores-max 2]
        [--no-standalone] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from common import log, machine_info
from odradek.cli.cluster import LocalCluster
from odradek.testing_zk import ZooKeeperServer
from spark_bench import produce_records

TOPIC = "bench-read"
KEY_BYTES = 8
BROKER_SETTINGS = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}
"""Internal topics replicated 3 times (the transaction coordinator survives a broker) but small."""
TOPIC_CONFIG = {"min.insync.replicas": "2"}


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    """Create ``topic`` (replication factor 3) and wait until every partition has a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 3, config=TOPIC_CONFIG)]).values():
        future.result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=5).topics.get(topic)
        ready = described is not None and described.error is None and len(described.partitions) == partitions
        if ready and all(p.leader >= 0 for p in described.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{topic}: not every partition has a leader after {timeout_s} s")


def rates(rows: int, row_bytes: int, seconds: float) -> dict[str, float]:
    return {
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds) if seconds > 0 else 0.0,
        "mb_per_s": round(rows * row_bytes / seconds / 1e6, 2) if seconds > 0 else 0.0,
    }


@contextmanager
def session(master: str, cores: int | None, name: str) -> Iterator[Any]:
    """A Spark session on ``master``; on a cluster master the application gets ``cores`` cores
    in one executor (``spark.cores.max`` = ``spark.executor.cores``)."""
    from odradek.spark.deploy import application_conf
    from odradek.spark.pipeline import spark_session

    conf = application_conf(master, cores, cores)
    if not master.startswith("local"):
        conf["spark.executor.memory"] = "512m"
    spark = spark_session(master, shuffle_partitions=2, app_name=name, conf=conf)
    try:
        yield spark
    finally:
        spark.stop()


def measure_read(spark: Any, bootstrap: str, partitions: int, records: int, value_bytes: int) -> dict[str, float]:
    def reader() -> Any:  # DataFrameReader.option mutates: a fresh reader per query
        return spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)

    warm_up = json.dumps({TOPIC: {str(p): 10 for p in range(partitions)}})
    reader().option("endingOffsets", warm_up).load().write.format("noop").mode("overwrite").save()
    started = time.perf_counter()
    reader().load().write.format("noop").mode("overwrite").save()
    return rates(records, KEY_BYTES + value_bytes, time.perf_counter() - started)


def measure_write(spark: Any, bootstrap: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    """Plain and exactly-once writes of the same generated rows, each to a fresh topic."""
    frame = spark.range(args.write_records, numPartitions=args.write_tasks).selectExpr(
        "lpad(cast(id as string), 8, '0') as key", f"repeat('x', {args.value_bytes}) as value"
    )
    guarantees = ("at-least-once", "exactly-once")
    for topic in (f"bench-write-{label}-warm-up", *(f"bench-write-{label}-{g}" for g in guarantees)):
        create_topic(bootstrap, topic, args.partitions)
    # warm-up: Python workers started, the sink imported, producers' metadata paths exercised
    warm_up = frame.limit(100).write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    warm_up.option("topic", f"bench-write-{label}-warm-up").mode("append").save()
    result: dict[str, Any] = {"tasks": args.write_tasks}
    for guarantee in guarantees:
        topic = f"bench-write-{label}-{guarantee}"
        writer = frame.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
        if guarantee == "exactly-once":
            writer = writer.option("deliveryGuarantee", "exactly-once").option("queryId", f"bench-{label}")
            writer = writer.option("batchId", "0")
        started = time.perf_counter()
        writer.mode("append").save()
        result[guarantee] = rates(args.write_records, KEY_BYTES + args.value_bytes, time.perf_counter() - started)
    plain, eos = result["at-least-once"]["rows_per_s"], result["exactly-once"]["rows_per_s"]
    result["exactly_once_vs_plain"] = round(eos / plain, 3) if plain else None
    return result


def run_master(master: str, cores: int | None, label: str, bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    log(f"{label}: {master}" + (f" with {cores} core(s)" if cores else ""))
    with session(master, cores, f"odradek-bench-{label}") as spark:
        entry: dict[str, Any] = {"master": master, "cores": cores}
        entry["read"] = measure_read(spark, bootstrap, args.partitions, args.records, args.value_bytes)
        if not args.no_write:
            entry["write"] = measure_write(spark, bootstrap, label, args)
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--write-records", type=int, default=100_000)
    parser.add_argument("--write-tasks", type=int, default=2)
    parser.add_argument("--master", help="measure only this Spark master (e.g. spark://host:7077)")
    parser.add_argument("--cores-max", type=int, help="with --master: cores of the application")
    parser.add_argument("--no-standalone", action="store_true", help="local masters only")
    parser.add_argument("--no-write", action="store_true", help="read throughput only")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of the harness")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.write_records = 20_000, 5_000
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    result: dict[str, Any] = {
        "records": args.records,
        "value_bytes": args.value_bytes,
        "partitions": args.partitions,
        "replication_factor": 3,
        "brokers": 3,
    }
    with tempfile.TemporaryDirectory(prefix="odradek-spark-cluster-bench-") as tmp, ZooKeeperServer() as zookeeper:
        cluster = LocalCluster(3, Path(tmp) / "odradek", zookeeper.chroot_connect(), overrides=BROKER_SETTINGS)
        with cluster:
            bootstrap = cluster.bootstrap_servers
            create_topic(bootstrap, TOPIC, args.partitions)
            log(f"filling {TOPIC}: {args.records} records")
            result["produce_seconds"] = round(produce_records(bootstrap, TOPIC, args.records, args.value_bytes), 2)
            runs: dict[str, Any] = {}
            if args.master:
                runs["given"] = run_master(args.master, args.cores_max, "given", bootstrap, args)
            else:
                for cores in (1, 2):
                    runs[f"local-{cores}"] = run_master(f"local[{cores}]", None, f"local-{cores}", bootstrap, args)
                if not args.no_standalone:
                    runs.update(standalone_runs(Path(tmp) / "spark", bootstrap, args))
            result["runs"] = runs
    result["environment"] = machine_info()
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


def standalone_runs(base_dir: Path, bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """Read (and write) figures with 1 and 2 executor cores on a standalone master and worker."""
    from odradek.spark.standalone import StandaloneCluster

    runs: dict[str, Any] = {}
    with StandaloneCluster(workers=1, cores_per_worker=2, memory="1g", base_dir=base_dir) as spark_cluster:
        for cores in (1, 2):
            label = f"standalone-{cores}-core{'s' if cores > 1 else ''}"
            runs[label] = run_master(spark_cluster.master_url, cores, label, bootstrap, args)
            spark_cluster.wait_until(lambda status: status.cores_used == 0, timeout_s=60)
    return runs


if __name__ == "__main__":
    sys.exit(main())
