"""Partitions at scale: creation, idle cost, restart and failover of a 3-broker cluster.

Broker processes on one Apache ZooKeeper (``odradek.cli.cluster.LocalCluster``, which starts
Debian's ZooKeeper). One topic of ``--partitions`` partitions at replication factor 3 (the
per-request and per-broker partition limits raised to fit). One JSON document on stdout,
progress on stderr. Phases, each timed from the action to the condition, read from ZooKeeper's
partition state znodes (``/brokers/topics/<t>/partitions/<p>/state``) with a kazoo client:

- ``create_s``: CreateTopics sent until every partition's ISR holds all 3 replicas;
- ``idle``: per broker, CPU (user + system, from ``/proc``) over ``--idle-s`` seconds as a
  percentage of one core, and RSS, once every ISR is whole and 5 s have passed;
- ``restart_clean_s``: a broker (not the controller) stopped with SIGTERM (controlled
  shutdown); once it is out of every ISR, started again, until it is back in every ISR;
- ``restart_kill9_s``: the same broker killed with SIGKILL; once the controller has handled its
  death (its session expired, it left every ISR), started again (log recovery included) until it
  is back in every ISR;
- ``failover_leader_s``: the broker that leads the most partitions (``failover_leader_partitions``)
  among those that are not the controller, killed with SIGKILL until every partition has a live
  leader; then it is restarted and back in every ISR;
- ``failover_controller_s``: the controller killed with SIGKILL until every partition has a live
  leader (the killed broker stays down during the measure). ``failover_bound_s`` is the target:
  the session timeout + ZooKeeper's tickTime + 1 s (ZooKeeper expires sessions in tick buckets).
  Both failovers end when the last partition the killed broker led has its new leader written:
  the largest ``mtime`` of those state znodes (ZooKeeper's clock, on this host) minus the kill's
  wall-clock time. ``*_polled_s`` is when the bench's own poll saw it, which lags by up to a
  read of every state znode (about half a second at 3,000 partitions).

``--partitions 300,1000,3000,10000`` runs each count on its own cluster (a JSON list) and
``--plot FILE.png`` draws idle CPU and both failover times against the count.

    PYTHONPATH=src python bench/scale_bench.py [--partitions 3000] [--idle-s 30] [--session-ms 6000] [--plot F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from odradek.cli.cluster import LocalCluster

TOPIC = "scale"
BROKERS = 3


def log(message: str) -> None:
    print(f"[scale-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class States:
    """The topic's partition states, read from ZooKeeper in one pipelined batch per call."""

    def __init__(self, connect: str, partitions: int) -> None:
        self.zk = KazooClient(hosts=connect, timeout=10)
        self.zk.start(20)
        self.partitions = partitions

    def read(self, partitions: list[int] | None = None) -> list[dict[str, Any] | None]:
        """Each partition's state (of ``partitions``, default all), with its znode's ``mtime`` (ms)."""
        path = f"/brokers/topics/{TOPIC}/partitions/%d/state"
        wanted = range(self.partitions) if partitions is None else partitions
        futures = [self.zk.get_async(path % p) for p in wanted]
        out: list[dict[str, Any] | None] = []
        for future in futures:
            try:
                data, stat = future.get(10)
                out.append(json.loads(data) | {"mtime": stat.mtime})
            except Exception:
                out.append(None)
        return out

    def controller(self) -> int:
        data, _ = self.zk.get("/controller")
        return int(json.loads(data)["brokerid"])

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def wait_for(what: str, check: Callable[[], bool], timeout_s: float, poll_s: float = 0.2) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():
            return time.monotonic() - started
        time.sleep(poll_s)
    raise TimeoutError(f"{what}: not within {timeout_s} s")


def all_isrs_whole(states: States) -> bool:
    return all(s is not None and len(s["isr"]) == BROKERS for s in states.read())


def in_every_isr(states: States, broker_id: int) -> bool:
    return all(s is not None and broker_id in s["isr"] for s in states.read())


def out_of_every_isr(states: States, broker_id: int) -> bool:
    return all(s is not None and broker_id not in s["isr"] for s in states.read())


def every_leader_live(states: States, live: set[int]) -> bool:
    return all(s is not None and s["leader"] in live for s in states.read())


def idle(cluster: LocalCluster, seconds: float) -> dict[str, Any]:
    procs = {b: cluster.broker(b).pid for b in cluster.alive_ids()}
    before = {b: cpu_seconds(pid) for b, pid in procs.items() if pid}
    time.sleep(seconds)
    out = {}
    for b, pid in procs.items():
        if pid:
            out[str(b)] = {
                "cpu_pct": round(100 * (cpu_seconds(pid) - before[b]) / seconds, 2),
                "rss_mb": round(rss_mb(pid), 1),
            }
    return out


def _leaders(states: States) -> dict[int, int]:
    """How many partitions each broker leads."""
    out: dict[int, int] = {}
    for s in states.read():
        if s is not None:
            out[s["leader"]] = out.get(s["leader"], 0) + 1
    return out


def leader_failover(cluster: LocalCluster, states: States, victim: int, timeout_s: float = 120) -> tuple[float, float]:
    """kill -9 of ``victim``: seconds until every partition has a live leader, as (the last new
    leader's state znode ``mtime`` - the kill's wall-clock time, the poll that saw it). The znode
    times are ZooKeeper's clock on this host: exact, where a poll of thousands of znodes lags."""
    live = set(cluster.alive_ids()) - {victim}
    led = [p for p, s in enumerate(states.read()) if s is not None and s["leader"] == victim]
    killed_at = time.time()
    cluster.kill9(victim)
    started = time.monotonic()
    wait_for("a live leader for every partition", lambda: every_leader_live(states, live), timeout_s, 0.05)
    polled = round(time.monotonic() - started, 2)
    moved = [s for s in states.read(led) if s is not None]
    written = max((s["mtime"] for s in moved), default=killed_at * 1000) / 1000
    return round(written - killed_at, 2), polled


def run(partitions: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every phase on a fresh cluster of ``partitions`` partitions; the figures."""
    skip = set(filter(None, args.skip.split(",")))
    overrides = {
        "zookeeper.session.timeout.ms": str(args.session_ms),
        "odradek.max.partitions.per.request": str(max(partitions, 1000)),
        "odradek.max.partitions.per.broker": str(max(partitions * BROKERS, 4000)),
        "odradek.request.max.entries": str(max(partitions * 2, 10000)),
        "replica.lag.time.max.ms": "10000",
    }
    result: dict[str, Any] = {"partitions": partitions, "replication_factor": BROKERS}
    with LocalCluster(BROKERS, overrides=overrides) as cluster:
        tick_ms = int(getattr(cluster.zookeeper, "tick_time_ms", 2000))
        bound = round((args.session_ms + tick_ms) / 1000 + 1, 2)
        result |= {"session_timeout_ms": args.session_ms, "zookeeper_tick_ms": tick_ms, "failover_bound_s": bound}
        states = States(cluster.zookeeper_connect, partitions)
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            started = time.monotonic()
            admin.create_topics([NewTopic(TOPIC, partitions, BROKERS)], request_timeout=120)[TOPIC].result(300)
            log(f"CreateTopics answered after {time.monotonic() - started:.1f} s")
            wait_for("every ISR whole", lambda: all_isrs_whole(states), 300)
            result["create_s"] = round(time.monotonic() - started, 2)
            log(f"every ISR whole after {result['create_s']} s")
            time.sleep(5)
            result["idle"] = idle(cluster, args.idle_s)
            log(f"idle: {result['idle']}")
            controller = states.controller()
            victim = next(b for b in cluster.alive_ids() if b != controller)
            if "restart" not in skip:
                for name, stop in (("restart_clean_s", cluster.stop), ("restart_kill9_s", cluster.kill9)):
                    stop(victim)
                    # the controller has handled the death (after kill -9: once the session expired)
                    wait_for("out of every ISR", lambda: out_of_every_isr(states, victim), 120)
                    started = time.monotonic()
                    cluster.restart(victim)
                    wait_for("back in every ISR", lambda: in_every_isr(states, victim), 300)
                    result[name] = round(time.monotonic() - started, 2)
                    log(f"{name}: back in every ISR after {result[name]} s")
                    wait_for("every ISR whole", lambda: all_isrs_whole(states), 120)
            if "failover" not in skip:
                leading = _leaders(states)  # after the restarts: the broker leading most
                victim = max((b for b in cluster.alive_ids() if b != controller), key=lambda b: leading.get(b, 0))
                led = leading.get(victim, 0)
                result["failover_leader_s"], result["failover_leader_polled_s"] = leader_failover(
                    cluster, states, victim
                )
                result["failover_leader_partitions"] = led
                log(f"kill -9 of broker {victim} (leader of {led}): all led after {result['failover_leader_s']} s")
                cluster.restart(victim)
                wait_for("every ISR whole", lambda: all_isrs_whole(states), 300)
                result["failover_controller_s"], result["failover_controller_polled_s"] = leader_failover(
                    cluster, states, states.controller()
                )
                log(f"controller kill -9: every partition led after {result['failover_controller_s']} s")
        finally:
            states.close()
    return result


def plot(results: list[dict[str, Any]], path: str) -> None:
    """Idle CPU (mean of the brokers) and the failover times against the partition count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [r["partitions"] for r in results]
    idle_cpu = [sum(b["cpu_pct"] for b in r["idle"].values()) / len(r["idle"]) for r in results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(counts, idle_cpu, marker="o")
    left.axhline(3, linestyle="--", color="grey", label="target 3 %")
    left.set(xscale="log", xlabel="partitions (RF=3, 3 brokers)", ylabel="idle CPU, % of a core per broker")
    left.legend()
    for key, label in (("failover_controller_s", "controller kill -9"), ("failover_leader_s", "leader kill -9")):
        right.plot(counts, [r.get(key) for r in results], marker="o", label=label)
    right.plot(
        counts, [r["failover_bound_s"] for r in results], linestyle="--", color="grey", label="session + tick + 1 s"
    )
    right.set(xscale="log", xlabel="partitions (RF=3, 3 brokers)", ylabel="seconds until every partition is led")
    right.legend()
    for ax in (left, right):
        ax.set_xticks(counts, [f"{c:,}" for c in counts])
        ax.minorticks_off()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="3000", help="a count, or several separated by commas (a sweep)")
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--skip", default="", help="comma-separated phases to leave out: restart,failover")
    parser.add_argument("--plot", help="write a PNG of idle CPU and failover time against partitions here")
    parser.add_argument("--replot", help="only draw --plot from this earlier JSON output of a sweep")
    args = parser.parse_args()
    if args.replot:
        plot(json.loads(Path(args.replot).read_text()), args.plot)
        return
    results = [run(int(n), args) for n in args.partitions.split(",")]
    if args.plot:
        plot(results, args.plot)
    print(json.dumps(results[0] if len(results) == 1 else results, indent=2))


if __name__ == "__main__":
    main()
