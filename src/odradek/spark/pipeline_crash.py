"""The demo's crash run: run 2 of the streaming query in a driver process of its own (rate-limited by
``maxOffsetsPerTrigger``, so the output comes in several batches), killed with SIGKILL in the middle
of a micro-batch.

``python -m odradek.spark.pipeline_crash '<json>'`` starts a Spark session, runs the demo query
(:func:`odradek.spark.pipeline.run_query`) and, in the ``N``-th micro-batch that has output
(``kill_after_output_batches``), once that batch's rows are committed to Kafka and before Spark
records the batch as done in the checkpoint's commit log, prints ``killed in batch <id>`` and
sends itself SIGKILL: no ``finally``, no shutdown hook, the JVM goes with its parent's pipe. The
next run from the same checkpoint replays that batch; the exactly-once sink must then add
nothing. :func:`run_killed_query` is the parent's side.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from odradek.spark.pipeline import RELEASE_WAIT_S, PipelineConfig, application_session, run_query

__all__ = ["run_killed_query"]

KILLED_PREFIX = "killed in batch "


def run_killed_query(
    bootstrap: str, config: PipelineConfig, checkpoint: Path, parquet_dir: Path, query_id: str, timeout_s: float = 600
) -> int:
    """Run the crash run in a child process; the id of the batch it was killed in. Raises
    RuntimeError when the child was not killed as planned (too few batches with output, an error)."""
    fields = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(config).items()}
    args = {
        "bootstrap": bootstrap,
        "config": fields,
        "checkpoint": str(checkpoint),
        "parquet_dir": str(parquet_dir),
        "query_id": query_id,
    }
    child = subprocess.run(
        [sys.executable, "-m", "odradek.spark.pipeline_crash", json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    killed = [line for line in child.stdout.splitlines() if line.startswith(KILLED_PREFIX)]
    if child.returncode != -signal.SIGKILL or not killed:
        raise RuntimeError(
            f"the crash run ended with status {child.returncode} instead of being killed in a batch; "
            f"stderr: {child.stderr[-2000:]}"
        )
    return int(killed[-1][len(KILLED_PREFIX) :])


def main(argv: list[str]) -> int:
    args: dict[str, Any] = json.loads(argv[0])
    fields = dict(args["config"])
    fields["output_dir"] = Path(fields["output_dir"])
    config = PipelineConfig(**fields)
    spark = application_session(config, "odradek-demo-crash", release_wait_s=RELEASE_WAIT_S)
    remaining = [config.kill_after_output_batches or 1]

    def after_write(batch_id: int) -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            print(f"{KILLED_PREFIX}{batch_id}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    run_query(
        spark,
        args["bootstrap"],
        config,
        Path(args["checkpoint"]),
        Path(args["parquet_dir"]),
        config.max_offsets_per_trigger,
        args["query_id"],
        after_write,
    )
    return 0  # not killed: fewer batches with output than asked for


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
