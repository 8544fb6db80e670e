"""``odradek demo-cluster``: the clickstream pipeline on a 3-broker cluster and a Spark standalone
cluster, through broker, driver and executor failures, exactly once.

::

    odradek demo-cluster [--workers 1] [--cores-per-worker 2] [--worker-memory 1g] [--no-faults]
                         [--output demo-output] [--events 6000] [--seed 7] [--top 3]
                         [--max-offsets-per-trigger 1000] [--executor-timeout 120] [--ship-package]

Starts, all on 127.0.0.1 and under one temporary directory (kept and named when a step fails):

- Apache ZooKeeper (Debian's package, :mod:`odradek.testing_zk`) and three ``odradek broker``
  processes (:class:`odradek.cli.cluster.LocalCluster`) with a 6 s ZooKeeper session and a 2 s
  replica lag bound, so a killed leader is replaced within seconds;
- a Spark standalone master and ``--workers`` workers from the pyspark package
  (:class:`odradek.spark.standalone.StandaloneCluster`).

Then runs :func:`odradek.spark.pipeline.run_pipeline` on the master with both topics at
replication factor 3 and ``min.insync.replicas=2`` while :class:`odradek.spark.faults.FaultInjector`
kills (SIGKILL) the leader of ``page_visits``-0 and the leader of ``page_visit_counts``-0 in the
middle of the stream and restarts them, and kills one executor; the pipeline kills its own driver
once, as ``odradek demo`` does. Prints the results, the exact-count check and the timeline of the
faults, and stops everything it started, also on failure, Ctrl-C or SIGTERM.

Exit status: 0 when the check passes, 1 when it fails or a step fails, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

from odradek.cli.demo import add_pipeline_arguments, bad_arguments, pipeline_config

__all__ = ["BROKER_OVERRIDES", "main"]

BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "2000",
    "controller.socket.timeout.ms": "5000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.fetch.backoff.ms": "200",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
"""Every broker's settings: short failure detection, replicated internal topics."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek demo-cluster",
        description="Run the clickstream pipeline on a 3-broker cluster and a Spark standalone cluster, with faults.",
    )
    parser.add_argument("--workers", type=int, default=1, help="Spark workers (default 1)")
    parser.add_argument("--cores-per-worker", type=int, default=2, help="cores each worker offers (default 2)")
    parser.add_argument("--worker-memory", default="1g", help="memory each worker offers executors (default 1g)")
    parser.add_argument("--no-faults", action="store_true", help="kill no broker and no executor")
    add_pipeline_arguments(parser)
    return parser


def _raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = bad_arguments(args) or (
        "--workers and --cores-per-worker must be positive" if min(args.workers, args.cores_per_worker) <= 0 else None
    )
    if problem:
        print(f"odradek demo-cluster: {problem}", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    base = Path(tempfile.mkdtemp(prefix="odradek-demo-cluster-"))
    started = time.monotonic()
    ok = False
    try:
        ok = _run(args, base)
    except KeyboardInterrupt:
        print("odradek demo-cluster: interrupted; stopping everything", file=sys.stderr)
    except Exception as exc:
        print(f"odradek demo-cluster: failed: {type(exc).__name__}: {exc} (logs in {base})", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if ok:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\ndemo-cluster finished in {time.monotonic() - started:.0f}s; everything it started is stopped")
    return 0 if ok else 1


def _run(args: argparse.Namespace, base: Path) -> bool:
    from odradek.cli.cluster import LocalCluster
    from odradek.spark.faults import FaultInjector
    from odradek.spark.pipeline import EVENTS_TOPIC, RESULTS_TOPIC, run_pipeline, summary
    from odradek.spark.standalone import StandaloneCluster

    kafka = LocalCluster(3, base / "kafka", overrides=BROKER_OVERRIDES)
    spark = StandaloneCluster(args.workers, args.cores_per_worker, args.worker_memory, base / "spark")
    injector: FaultInjector | None = None
    try:
        kafka.start()
        print(f"ZooKeeper {kafka.zookeeper_connect}; brokers {kafka.bootstrap_servers}")
        spark.start()
        status = spark.status()
        print(
            f"Spark standalone master {spark.master_url} (web UI {spark.webui_url}): "
            f"{status.workers} worker(s), {status.cores} cores; logs in {base}"
        )
        config = pipeline_config(
            args, spark.master_url, master_webui=spark.webui_url, replication_factor=3, min_insync_replicas=2
        )
        if not args.no_faults:
            injector = FaultInjector(
                kafka,
                config.output_dir / "checkpoint",
                EVENTS_TOPIC,
                RESULTS_TOPIC,
                spark_cluster=spark,
                out=lambda line: print(line, flush=True),
            ).start()
        result = run_pipeline(kafka.bootstrap_servers, config, lambda line: print(line, flush=True))
        print()
        for line in summary(result, config.top_n):
            print(line)
        print(f"Parquet: {config.output_dir / RESULTS_TOPIC}")
        if injector is not None:
            injector.stop()
            _print_timeline(injector, result.killed_in_batch)
        return bool(result.ok)
    finally:
        if injector is not None:
            injector.stop()
        spark.stop()
        kafka.close()


def _print_timeline(injector: Any, killed_in_batch: int | None) -> None:
    print("\nFaults injected (seconds since the pipeline started):")
    for at, text in injector.timeline:
        print(f"  {at:7.1f}s  {text}")
    if killed_in_batch is not None:
        print(f"  driver of the crash run killed (SIGKILL) in batch {killed_in_batch}, its application restarted")
    if not injector.done.is_set():
        print("  (the stream ended before every planned fault was injected)")
