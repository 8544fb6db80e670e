"""Replication figures: acks=all throughput RF=3 vs RF=1, failover time, follower catch-up rate.

Broker processes on one Apache ZooKeeper (``odradek.cli.cluster.LocalCluster``, which starts
Debian's ZooKeeper), client confluent-kafka. One JSON document on stdout, progress on stderr.

- ``produce``: for each of ``--sizes`` (default 1024 and 100 bytes), ``--reps`` alternating
  repetitions on one 3-broker cluster of a topic of one partition at replication factor 3
  (min.insync.replicas 2) and one at replication factor 1: ``--messages`` messages each, acks=all,
  linger.ms 5, batch.size 1 MB, no compression, from one producer. ``msgs_per_s`` per repetition
  and the median, ``ratio`` = median RF=3 / median RF=1 (target >= 0.6); for RF=3 the CPU
  (user + system, from ``/proc``) of the partition's leader and of each follower per MB of
  messages (``leader_cpu_s_per_mb``, ``follower_cpu_s_per_mb``: target follower <= leader), and
  the leader's minor page faults per MB (``leader_minor_faults_per_mb``: fresh request buffers),
  and how many of the machine's cores were busy during each run (``machine_busy_cores``: near
  the core count, the ratio measures CPU, not a wait).
- ``latency``: acks=all records of ``--latency-size`` bytes sent at ``--latency-rate`` per second
  for ``--latency-s`` seconds to each topic (RF=3 and RF=1 alternating, ``--latency-reps`` each);
  delivery latency (send to delivery callback) p50 / p99 / max in ms per repetition and
  ``p99_ratio`` = median RF=3 p99 / median RF=1 p99 (target <= 2).
- ``failover``: a producer sends acks=all to one partition every 5 ms; the partition's leader is
  killed with SIGKILL; ``seconds`` from the kill to the first acknowledgement (delivery callback)
  of a record sent after it (``zookeeper.session.timeout.ms`` = ``--session-ms``, default 6000; target <= session
  + 1 s). The killed broker is restarted and back in the ISR before the next repetition.
- ``catch_up``: one follower of a single-partition RF=3 topic is stopped (SIGSTOP) while
  ``--catchup-mb`` MB are produced (acks=1), then resumed; ``mb_per_s`` = bytes it copied /
  seconds until its partition directory holds as many bytes as the leader's.

``--broker-config KEY=VALUE`` (repeatable) sets a broker config for every cluster, e.g.
``odradek.produce.pipelined.requests=1`` to measure without the produce pipeline.

    python bench/replication_bench.py [--messages 200000] [--sizes 1024,100] [--reps 5] [--latency-rate 10000]
        [--failovers 3] [--catchup-mb 256] [--skip latency,failover,catch_up]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common import machine_busy_seconds, proc_minor_faults
from odradek.cli.cluster import LocalCluster

OVERRIDES = {"replica.lag.time.max.ms": "10000", "num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}


def log(message: str) -> None:
    print(f"[replication-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def pids(cluster: LocalCluster) -> list[int]:
    return [p for p in (cluster.broker(b).pid for b in cluster.alive_ids()) if p is not None]


def create(cluster: LocalCluster, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(60)
    time.sleep(2)  # leaders elected, followers fetching


def delete(cluster: LocalCluster, topic: str) -> None:
    """Delete ``topic`` and wait until no broker holds its directory (its page-cache pages are
    free for the next repetition to reuse)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.delete_topics([topic])[topic].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(
        (Path(cluster.broker(b).data_dir) / f"{topic}-0").exists() for b in cluster.alive_ids()
    ):
        time.sleep(0.1)


def broker_cpu(cluster: LocalCluster) -> dict[int, float]:
    """CPU seconds so far of each live broker, by id."""
    return {b: cpu_seconds([cluster.broker(b).pid or 0]) for b in cluster.alive_ids()}


def producer_for(cluster: LocalCluster, linger_ms: int = 5) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )


@dataclass
class ProduceRun:
    """One run of :func:`produce_rate`: messages per second, and during the run the CPU seconds and
    minor page faults of each broker (by id) and the machine's busy cores."""

    msgs_per_s: float
    broker_cpu_s: dict[int, float]
    broker_minor_faults: dict[int, int]
    busy_cores: float


def produce_rate(cluster: LocalCluster, topic: str, messages: int, size: int) -> ProduceRun:
    producer = producer_for(cluster)
    producer.produce(topic, b"warm")
    producer.flush(30)
    value = os.urandom(size)
    pids = {b: cluster.broker(b).pid or 0 for b in cluster.alive_ids()}
    cpu0 = broker_cpu(cluster)
    faults0 = {b: proc_minor_faults(pid) for b, pid in pids.items()}
    machine0 = machine_busy_seconds()
    t0 = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.001)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - t0
    cpu1 = broker_cpu(cluster)
    return ProduceRun(
        messages / elapsed,
        {b: round(cpu1[b] - cpu0[b], 3) for b in cpu0},
        {b: proc_minor_faults(pid) - faults0[b] for b, pid in pids.items()},
        round((machine_busy_seconds() - machine0) / elapsed, 2),
    )


def bench_produce(args: argparse.Namespace) -> dict[str, Any]:
    """RF=3 and RF=1 topics of one partition on the same 3 brokers, alternating, per message size."""
    out: dict[str, Any] = {}
    with LocalCluster(3, overrides=OVERRIDES) as cluster:
        for size in args.sizes:
            rates: dict[str, list[int]] = {"rf3": [], "rf1": []}
            leader_per_mb: list[float] = []
            follower_per_mb: list[float] = []
            faults_per_mb: dict[str, list[float]] = {"rf3": [], "rf1": []}
            busy_cores: dict[str, list[float]] = {"rf3": [], "rf1": []}
            for rep in range(args.reps):
                for name, rf in (("rf3", 3), ("rf1", 1)):
                    topic = f"{name}-{size}-{rep}"
                    create(cluster, topic, 1, rf, {"min.insync.replicas": "2" if rf == 3 else "1"})
                    os.sync()  # the previous repetition's writeback does not run into this one
                    run = produce_rate(cluster, topic, args.messages, size)
                    rate, cpu = run.msgs_per_s, run.broker_cpu_s
                    rates[name].append(round(rate))
                    mb = args.messages * size / 1e6
                    faults_per_mb[name].append(round(run.broker_minor_faults.get(leader_of(cluster, topic), 0) / mb, 1))
                    busy_cores[name].append(run.busy_cores)
                    if rf == 3:
                        leader = leader_of(cluster, topic)
                        leader_per_mb.append(round(cpu[leader] / mb, 4))
                        follower_per_mb.extend(round(c / mb, 4) for b, c in cpu.items() if b != leader)
                    log(f"{size} B {name} rep {rep}: {rate:,.0f} msgs/s, broker CPU {cpu}")
                    delete(cluster, topic)
            out[f"{size}B"] = {
                "rf3": {"msgs_per_s": rates["rf3"], "median": statistics.median(rates["rf3"])},
                "rf1": {"msgs_per_s": rates["rf1"], "median": statistics.median(rates["rf1"])},
                "ratio": round(statistics.median(rates["rf3"]) / statistics.median(rates["rf1"]), 3),
                "leader_cpu_s_per_mb": leader_per_mb,
                "follower_cpu_s_per_mb": follower_per_mb,
                "leader_cpu_s_per_mb_median": statistics.median(leader_per_mb),
                "follower_cpu_s_per_mb_median": statistics.median(follower_per_mb),
                "leader_minor_faults_per_mb": faults_per_mb,
                "machine_busy_cores": busy_cores,
            }
    return out


def paced_latencies(cluster: LocalCluster, topic: str, rate: int, seconds: float, size: int) -> list[float]:
    """Send ``rate`` acks=all records a second for ``seconds``; each one's delivery latency (ms)."""
    producer = producer_for(cluster)
    producer.produce(topic, b"warm")
    producer.flush(30)
    value = os.urandom(size)
    latencies: list[float] = []
    failed: list[Any] = []

    def delivered(sent: float) -> Any:
        def on_delivery(err: Any, _msg: Any) -> None:
            if err is None:
                latencies.append((time.perf_counter() - sent) * 1000)
            else:
                failed.append(err)

        return on_delivery

    total = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(total):
        due = t0 + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(max(0.0, min(0.001, due - now)))
        producer.produce(topic, value, on_delivery=delivered(now))
    assert producer.flush(60) == 0 and not failed, failed[:3]
    return latencies


def bench_latency(args: argparse.Namespace) -> dict[str, Any]:
    """acks=all delivery latency at a fixed rate, RF=3 and RF=1 topics on the same 3 brokers."""
    out: dict[str, Any] = {"rate": args.latency_rate, "size": args.latency_size, "seconds": args.latency_s}
    with LocalCluster(3, overrides=OVERRIDES) as cluster:
        runs: dict[str, list[dict[str, float]]] = {"rf3": [], "rf1": []}
        for rep in range(args.latency_reps):
            for name, rf in (("rf3", 3), ("rf1", 1)):
                topic = f"latency-{name}-{rep}"
                create(cluster, topic, 1, rf, {"min.insync.replicas": "2" if rf == 3 else "1"})
                lat = sorted(paced_latencies(cluster, topic, args.latency_rate, args.latency_s, args.latency_size))
                run = {
                    "p50_ms": round(lat[len(lat) // 2], 2),
                    "p99_ms": round(lat[int(len(lat) * 0.99)], 2),
                    "max_ms": round(lat[-1], 2),
                }
                runs[name].append(run)
                log(f"latency {name} rep {rep}: {run}")
        for name, rs in runs.items():
            out[name] = {"runs": rs, "p99_median_ms": statistics.median(r["p99_ms"] for r in rs)}
    out["p99_ratio"] = round(out["rf3"]["p99_median_ms"] / out["rf1"]["p99_median_ms"], 2)
    return out


def leader_of(cluster: LocalCluster, topic: str) -> int:
    data = cluster.read_znode(f"/brokers/topics/{topic}/partitions/0/state")
    return int(json.loads(data or b"{}").get("leader", -1))


def isr_of(cluster: LocalCluster, topic: str) -> list[int]:
    data = cluster.read_znode(f"/brokers/topics/{topic}/partitions/0/state")
    return sorted(json.loads(data or b"{}").get("isr", []))


def bench_failover(args: argparse.Namespace) -> dict[str, Any]:
    overrides = {**OVERRIDES, "zookeeper.session.timeout.ms": str(args.session_ms)}
    seconds: list[float] = []
    with LocalCluster(3, overrides=overrides) as cluster:
        create(cluster, "failover", 1, 3, {"min.insync.replicas": "2"})
        for rep in range(args.failovers):
            acked: list[tuple[float, float]] = []  # (sent, acknowledged) monotonic times
            stop = threading.Event()
            producer = Producer(
                {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0, "retry.backoff.ms": 20}
            )

            def on_delivery(err: Any, msg: Any, acked: list[tuple[float, float]] = acked) -> None:
                if err is None:
                    acked.append((float(msg.value()), time.monotonic()))

            def run(producer: Producer = producer, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    producer.produce("failover", str(time.monotonic()).encode(), on_delivery=on_delivery)
                    producer.poll(0.005)
                producer.flush(30)

            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            time.sleep(1)
            victim = leader_of(cluster, "failover")
            killed_at = time.monotonic()
            os.kill(cluster.broker(victim).pid or 0, signal.SIGKILL)
            deadline = killed_at + args.session_ms / 1000 + 20
            while time.monotonic() < deadline and not any(sent > killed_at for sent, _ in acked):
                time.sleep(0.01)
            first = min((done for sent, done in acked if sent > killed_at), default=float("nan"))
            stop.set()
            thread.join(60)
            seconds.append(round(first - killed_at, 3))
            log(f"failover {rep}: first acknowledgement of a record sent after the kill: +{seconds[-1]:.2f} s")
            cluster.restart(victim)
            cluster.wait_until(lambda: len(isr_of(cluster, "failover")) == 3, timeout_s=60)
    return {"session_timeout_ms": args.session_ms, "seconds": seconds, "median": statistics.median(seconds)}


def dir_bytes(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    directory = Path(cluster.broker(broker_id).data_dir) / f"{topic}-0"
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def bench_catch_up(args: argparse.Namespace) -> dict[str, Any]:
    with LocalCluster(3, overrides=OVERRIDES) as cluster:
        create(cluster, "catchup", 1, 3, {"min.insync.replicas": "1", "segment.bytes": str(256 << 20)})
        leader = leader_of(cluster, "catchup")
        follower = next(b for b in (1, 2, 3) if b != leader)
        cluster.sigstop(follower)
        try:
            producer = Producer(
                {"bootstrap.servers": cluster.bootstrap_servers, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000}
            )
            value = os.urandom(1024)
            for _ in range(args.catchup_mb * 1024):
                while True:
                    try:
                        producer.produce("catchup", value)
                        break
                    except BufferError:
                        producer.poll(0.001)
            assert producer.flush(300) == 0
        finally:
            cluster.sigcont(follower)
        target = dir_bytes(cluster, leader, "catchup")
        start_bytes = dir_bytes(cluster, follower, "catchup")
        t0 = time.perf_counter()
        while dir_bytes(cluster, follower, "catchup") < target and time.perf_counter() - t0 < 600:
            time.sleep(0.05)
        elapsed = time.perf_counter() - t0
        copied = dir_bytes(cluster, follower, "catchup") - start_bytes
    return {"bytes": copied, "seconds": round(elapsed, 2), "mb_per_s": round(copied / 1e6 / elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[1024, 100])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--latency-rate", type=int, default=10_000)
    parser.add_argument("--latency-size", type=int, default=1024)
    parser.add_argument("--latency-s", type=float, default=10.0)
    parser.add_argument("--latency-reps", type=int, default=3)
    parser.add_argument("--skip", default="", help="phases to leave out, comma-separated: produce,latency,...")
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--catchup-mb", type=int, default=256)
    parser.add_argument(
        "--broker-config", action="append", default=[], metavar="KEY=VALUE", help="a broker config (repeatable)"
    )
    args = parser.parse_args()
    OVERRIDES.update(item.split("=", 1) for item in args.broker_config)
    result: dict[str, Any] = {"bench": "replication", "args": vars(args)}
    skip = set(filter(None, args.skip.split(",")))
    phases = (
        ("produce", bench_produce),
        ("latency", bench_latency),
        ("failover", bench_failover),
        ("catch_up", bench_catch_up),
    )
    for name, phase in phases:
        if name not in skip:
            log(name)
            result[name] = phase(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
