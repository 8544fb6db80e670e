"""``odradek demo``: the clickstream pipeline, end to end, on an embedded broker and local Spark.

::

    odradek demo [--master local[*]] [--output demo-output] [--data-dir DIR] [--events 6000]
                 [--seed 7] [--top 3] [--max-offsets-per-trigger 1000]
                 [--master-webui URL] [--cores-max N] [--executor-cores N] [--executor-timeout S]
                 [--ship-package] [--bootstrap-servers H:P,... [--replication-factor 3] [--min-insync-replicas 2]]

Starts a broker in this process (data in ``--data-dir``, which must be empty or new, or in a
temporary directory removed afterwards; with ``--bootstrap-servers`` the running cluster there
instead, on topics with ``--replication-factor`` and ``--min-insync-replicas``), runs
:func:`odradek.spark.pipeline.run_pipeline` (clickstream -> ``page_visits`` -> Spark Structured
Streaming -> ``page_visit_counts`` and Parquet under ``--output``), prints the results, the
broker's data files (partition directories, segment and index files with their sizes) and the
znode tree, then stops everything it started.

Any master Spark accepts works. On a cluster master the demo's applications run one after the
other, each stopping its session before the next starts, so the demo needs one application's
cores: on a ``spark://`` master it first reads the master's JSON (``--master-webui``, default
``http://<master host>:8080``) and fails at once when fewer free cores than needed
(``--executor-cores``, default 1) are there; an application that gets no executor within
``--executor-timeout`` seconds fails too. Executors import ``odradek`` from their Python
(``PYSPARK_PYTHON``, this interpreter on same-machine workers), or from a zip of this process's
package shipped with ``SparkContext.addPyFile`` when ``--ship-package`` is given.
``odradek demo-cluster`` (:mod:`odradek.cli.demo_cluster`) runs the same on a 3-broker cluster and a
Spark standalone cluster, with faults.

Exit status: 0 when Spark's results equal the counts computed directly from the generated
events; 1 when they differ or a step fails (one line on stderr says which); 2 on bad arguments.
Needs the ``spark`` extra (pyspark, pyarrow, confluent-kafka) and Java 17+ on PATH.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["add_pipeline_arguments", "bad_arguments", "main", "pipeline_config"]


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``odradek demo`` and ``odradek demo-cluster`` share (see :func:`pipeline_config`)."""
    parser.add_argument("--output", default="demo-output", help="output folder for Parquet and the checkpoint")
    parser.add_argument("--events", type=int, default=6000, help="click events to generate (default 6000)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--top", type=int, default=3, help="top pages kept per window (default 3)")
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=1000, help="rate limit of the first streaming run"
    )
    parser.add_argument("--master-webui", help="a spark:// master's web UI (default http://<master host>:8080)")
    parser.add_argument("--cores-max", type=int, help="spark.cores.max of each application on a cluster master")
    parser.add_argument("--executor-cores", type=int, help="spark.executor.cores on a cluster master")
    parser.add_argument(
        "--executor-timeout", type=float, default=120.0, help="seconds an application may wait for an executor"
    )
    parser.add_argument(
        "--ship-package", action="store_true", help="ship this odradek package to the executors (addPyFile)"
    )


def bad_arguments(args: argparse.Namespace) -> str | None:
    """Why the shared options are unusable, or None."""
    if args.events <= 0 or args.top <= 0 or args.max_offsets_per_trigger <= 0:
        return "--events, --top and --max-offsets-per-trigger must be positive"
    if any(v is not None and v <= 0 for v in (args.cores_max, args.executor_cores)) or args.executor_timeout <= 0:
        return "--cores-max, --executor-cores and --executor-timeout must be positive"
    return None


def pipeline_config(args: argparse.Namespace, master: str, **extra: Any) -> Any:
    """The :class:`~odradek.spark.pipeline.PipelineConfig` of the shared options; ``extra`` fields win."""
    from odradek.spark.pipeline import PipelineConfig

    fields: dict[str, Any] = {
        "output_dir": Path(args.output).resolve(),
        "master": master,
        "events": args.events,
        "seed": args.seed,
        "top_n": args.top,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "cores_max": args.cores_max,
        "executor_cores": args.executor_cores,
        "master_webui": args.master_webui,
        "executor_timeout_s": args.executor_timeout,
        "ship_package": args.ship_package,
    }
    return PipelineConfig(**{**fields, **extra})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek demo", description="Run the clickstream pipeline demo.")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument("--data-dir", help="broker data dir (empty or new; default: a temporary dir)")
    parser.add_argument("--bootstrap-servers", help="run on this running cluster instead of an embedded broker")
    parser.add_argument("--replication-factor", type=int, default=1, help="of both topics (default 1)")
    parser.add_argument("--min-insync-replicas", type=int, help="min.insync.replicas of both topics")
    add_pipeline_arguments(parser)
    return parser


def _on_running_cluster(args: argparse.Namespace) -> int:
    """The pipeline against ``--bootstrap-servers`` (topics ``page_visits`` and ``page_visit_counts``
    must not exist yet); prints the results and the check, starts and stops no broker."""
    from odradek.spark.pipeline import run_pipeline, summary

    config = pipeline_config(
        args, args.master, replication_factor=args.replication_factor, min_insync_replicas=args.min_insync_replicas
    )
    started = time.monotonic()
    try:
        result = run_pipeline(args.bootstrap_servers, config, lambda line: print(line, flush=True))
    except Exception as exc:
        print(f"odradek demo: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print()
    for line in summary(result, config.top_n):
        print(line)
    print(f"\ndemo finished in {time.monotonic() - started:.0f}s")
    return 0 if result.ok else 1


def print_data_dir(data_dir: Path) -> None:
    """Every file under the broker's data dir with its size, grouped by directory."""
    print(f"\nBroker data dir {data_dir}:")
    for directory, subdirs, files in sorted(os.walk(data_dir)):
        subdirs.sort()
        rel = Path(directory).relative_to(data_dir)
        depth = len(rel.parts)
        if depth:
            print(f"{'  ' * depth}{rel.name}/")
        for name in sorted(files):
            size = (Path(directory) / name).stat().st_size
            print(f"{'  ' * (depth + 1)}{name:<32} {size:>10,} bytes")


def print_znodes(data_dir: Path) -> None:
    """The znode tree of the embedded metadata store, via ``odradek zk --data-dir DIR tree /``."""
    print("\nZnode tree (odradek zk --data-dir ... tree /):")
    sys.stdout.flush()
    try:
        from odradek.cli.zk import main as zk_main
    except ImportError as exc:  # pragma: no cover - only when the zk command is missing
        print(f"  (odradek zk unavailable: {exc})")
        return
    zk_main(["--data-dir", str(data_dir), "tree", "/"])


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = bad_arguments(args)
    if problem:
        print(f"odradek demo: {problem}", file=sys.stderr)
        return 2
    if args.bootstrap_servers:
        return _on_running_cluster(args)
    temporary = None
    if args.data_dir:
        data_dir = Path(args.data_dir).resolve()
        if data_dir.exists() and any(data_dir.iterdir()):
            print(f"odradek demo: --data-dir {data_dir} is not empty; pass an empty or new directory", file=sys.stderr)
            return 2
        data_dir.mkdir(parents=True, exist_ok=True)
    else:
        temporary = tempfile.TemporaryDirectory(prefix="odradek-demo-")
        data_dir = Path(temporary.name)

    from odradek.server.runner import BrokerRunner
    from odradek.spark.pipeline import run_pipeline, summary

    config = pipeline_config(args, args.master)
    started = time.monotonic()
    broker = BrokerRunner(str(data_dir), overrides={"num.partitions": "1", "auto.create.topics.enable": "false"})
    try:
        broker.start()
        print(f"odradek broker running on {broker.bootstrap_servers}, data in {data_dir}")
        result = run_pipeline(broker.bootstrap_servers, config, lambda line: print(line, flush=True))
        print()
        for line in summary(result, config.top_n):
            print(line)
        print(f"Parquet: {config.output_dir / 'page_visit_counts'}")
        print_data_dir(data_dir)
        print_znodes(data_dir)
    except Exception as exc:
        print(f"odradek demo: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        broker.stop()
        if temporary is not None:
            temporary.cleanup()
    print(f"\ndemo finished in {time.monotonic() - started:.0f}s; broker stopped")
    return 0 if result.ok else 1
