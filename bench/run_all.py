"""Every benchmark, one JSON document: what ``make bench`` runs (about 5 minutes on 2 cores).

1. ``storage``: ``storage_bench.py`` (append, index lookup and read of one partition log, no broker).
2. ``compare``: ``compare.py`` (odradek and Tansu side by side through confluent-kafka, medians of
   ``--reps`` repetitions and ratios; odradek's raw load and resource figures; the targets).
3. ``raw_load_large``: one ``raw_load.py`` run against odradek with ``--large-bytes`` (4 GiB by
   default) of Produce then Fetch, the size the throughput target is stated for, after a plain
   sequential write of the same size as the machine's reference; skipped, with the reason, when
   the temporary directory has less than twice that free.

``targets`` lists every performance goal with the measured value and ``met`` (None when the run
could not judge it); the raw-throughput goals are judged on the large run.

Each part runs as its own process (``sys.executable``, progress on stderr); a part that fails is
reported with its exit status, and the others still run. ``--quick`` shrinks every size
for a smoke run of the harness itself (its figures mean nothing).

    python bench/run_all.py [--quick] [--reps 5] [--large-bytes 4G]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from common import BENCH_DIR, log, machine_info
from raw_load import parse_size


def run_json(script: str, args: list[str]) -> dict[str, Any]:
    """Run ``bench/<script> args``; its stdout parsed as JSON, or an error entry."""
    log(f"{script} {' '.join(args)}")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(BENCH_DIR / script), *args], stdout=subprocess.PIPE, text=True)
    try:
        result: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        result = {"error": f"exit status {proc.returncode} without a JSON result (its stderr is above)"}
    result.pop("machine", None)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    return result


def targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    """compare.py's targets, with the raw-throughput ones judged on the large run when there is one."""
    found: list[dict[str, Any]] = list(out["compare"].get("targets", []))
    large = out.get("raw_load_large", {})
    if "produce" not in large:
        return found
    found = [t for t in found if not t["target"].startswith("raw ")]
    gb = large["produce"]["bytes"] / 1e9
    produce = large["produce"]["mb_per_s"]
    reference = large.get("disk_reference_mb_per_s")
    name = f"raw produce MB/s to disk over {gb:.1f} GB (plain sequential write here: {reference} MB/s)"
    found.append({"target": name, "value": produce, "goal": ">= 700", "met": produce >= 700 if gb >= 4 else None})
    if "fetch" in large:
        fetch = large["fetch"]["mb_per_s"]
        found.append(
            {"target": f"raw fetch MB/s over {gb:.1f} GB", "value": fetch, "goal": ">= 1200", "met": fetch >= 1200}
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that the harness works")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--large-bytes", type=parse_size, default=4 << 30, help="size of the large raw run (0: skip)")
    args = parser.parse_args(argv)

    if args.quick:
        storage = ["--scale", "0.05"]
        compare = ["--reps", "1", "--messages", "20000", "--rate-seconds", "2", "--raw-total-bytes", "64M"]
        compare += ["--partitions-held", "100", "--idle-s", "2"]
        large = min(args.large_bytes, 256 << 20)
    else:
        storage = ["--scale", "0.5"]
        compare = ["--reps", str(args.reps), "--messages", "500000", "--rate-seconds", "10"]
        compare += ["--raw-total-bytes", "1G"]
        large = args.large_bytes

    out: dict[str, Any] = {"machine": machine_info()}
    out["storage"] = run_json("storage_bench.py", storage)
    out["compare"] = run_json("compare.py", compare)
    if large:
        free = shutil.disk_usage(tempfile.gettempdir()).free
        if free < 2 * large:
            out["raw_load_large"] = {"skipped": f"{free / 1e9:.1f} GB free in {tempfile.gettempdir()}"}
        else:
            out["raw_load_large"] = run_json("raw_load.py", ["--total-bytes", str(large), "--disk-reference"])
    out["targets"] = targets(out)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
