"""``odradek demo``: the clickstream pipeline, end to end, on an embedded broker and local Spark.

::

    odradek demo [--master local[*]] [--output demo-output] [--data-dir DIR] [--events 6000]
                 [--seed 7] [--top 3] [--max-offsets-per-trigger 1000]

Starts a broker in this process (data in ``--data-dir``, which must be empty or new, or in a
temporary directory removed afterwards), runs :func:`odradek.spark.pipeline.run_pipeline`
(clickstream -> ``page_visits`` -> Spark Structured Streaming -> ``page_visit_counts`` and Parquet
under ``--output``), prints the results, the broker's data files (partition directories,
segment and index files with their sizes) and the znode tree, then stops everything it started.

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

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek demo", description="Run the clickstream pipeline demo.")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument("--output", default="demo-output", help="output folder for Parquet and the checkpoint")
    parser.add_argument("--data-dir", help="broker data dir (empty or new; default: a temporary dir)")
    parser.add_argument("--events", type=int, default=6000, help="click events to generate (default 6000)")
    parser.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    parser.add_argument("--top", type=int, default=3, help="top pages kept per window (default 3)")
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, default=1000, help="rate limit of the first streaming run"
    )
    return parser


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
    if args.events <= 0 or args.top <= 0 or args.max_offsets_per_trigger <= 0:
        print("odradek demo: --events, --top and --max-offsets-per-trigger must be positive", file=sys.stderr)
        return 2
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
    from odradek.spark.pipeline import PipelineConfig, run_pipeline, summary

    config = PipelineConfig(
        output_dir=Path(args.output).resolve(),
        master=args.master,
        events=args.events,
        seed=args.seed,
        top_n=args.top,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )
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
