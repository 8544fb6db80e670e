"""Replication figures: acks=all throughput RF=3 vs RF=1, failover time, follower catch-up rate.

Broker processes on one Apache ZooKeeper (``odradek.cli.cluster.LocalCluster``, which starts
Debian's ZooKeeper), client confluent-kafka. One JSON document on stdout, progress on stderr.

- ``produce``: ``--messages`` messages of ``--size`` bytes (default 1 KiB), acks=all, linger.ms 5,
  batch.size 1 MB, no compression, one partition per broker, from one producer; ``rf3``: a topic
  with replication factor 3 and min.insync.replicas 2 on 3 brokers; ``rf1``: replication factor 1
  on a cluster of one broker, same client settings. ``msgs_per_s`` per repetition and the
  median, ``ratio`` = median RF=3 / median RF=1 (target >= 0.5), and ``broker_cpu_s`` (user +
  system seconds of all broker processes during the run, from ``/proc``).
- ``failover``: a producer sends acks=all to one partition every 5 ms; the partition's leader is
  killed with SIGKILL; ``seconds`` from the kill to the first acknowledgement (delivery callback)
  of a record sent after it (``zookeeper.session.timeout.ms`` = ``--session-ms``, default 6000; target <= session
  + 1 s). The killed broker is restarted and back in the ISR before the next repetition.
- ``catch_up``: one follower of a single-partition RF=3 topic is stopped (SIGSTOP) while
  ``--catchup-mb`` MB are produced (acks=1), then resumed; ``mb_per_s`` = bytes it copied /
  seconds until its partition directory holds as many bytes as the leader's.

    python bench/replication_bench.py [--messages 200000] [--reps 3] [--failovers 3] [--catchup-mb 256]
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
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

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


def produce_rate(cluster: LocalCluster, topic: str, messages: int, size: int) -> tuple[float, float]:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    producer.produce(topic, b"warm")
    producer.flush(30)
    value = os.urandom(size)
    cpu0 = cpu_seconds(pids(cluster))
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
    return messages / elapsed, cpu_seconds(pids(cluster)) - cpu0


def bench_produce(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, brokers, rf in (("rf3", 3, 3), ("rf1", 1, 1)):
        rates, cpus = [], []
        with LocalCluster(brokers, overrides=OVERRIDES) as cluster:
            for rep in range(args.reps):
                topic = f"{name}-{rep}"
                create(cluster, topic, brokers, rf, {"min.insync.replicas": "2" if rf == 3 else "1"})
                rate, cpu = produce_rate(cluster, topic, args.messages, args.size)
                log(f"{name} rep {rep}: {rate:,.0f} msgs/s, broker CPU {cpu:.1f} s")
                rates.append(round(rate))
                cpus.append(round(cpu, 2))
        out[name] = {"msgs_per_s": rates, "median": statistics.median(rates), "broker_cpu_s": cpus}
    out["ratio"] = round(out["rf3"]["median"] / out["rf1"]["median"], 3)
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
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--catchup-mb", type=int, default=256)
    args = parser.parse_args()
    result = {"bench": "replication", "args": vars(args)}
    log("produce: RF=3 on 3 brokers vs RF=1 on 1")
    result["produce"] = bench_produce(args)
    log("failover")
    result["failover"] = bench_failover(args)
    log("follower catch-up")
    result["catch_up"] = bench_catch_up(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
