"""Reassignment figures: how fast a move copies, and what a producer sees meanwhile.

Three broker processes on one Apache ZooKeeper (``odradek.cli.cluster.LocalCluster``), client
confluent-kafka. One JSON document on stdout, progress on stderr.

- ``move``: a topic of ``--partitions`` partitions, all on broker 1 (replication factor 1), is
  filled with ``--mb`` MB (1 KiB values, acks=1), then reassigned to replicas [1, 2, 3] with
  ``odradek reassign-partitions --execute``. ``seconds`` from the command to every partition's
  move completed (``/brokers/topics/<t>`` without ``adding_replicas``), ``copied_mb`` = bytes the
  two new replicas hold at the end, ``mb_per_s`` = copied / seconds, and ``seconds_per_gb``
  (seconds scaled to 1 GB of topic data, i.e. 2 GB copied).
- ``producer_during_move``: p50/p99 delivery latency (ms) of an acks=all producer sending 1 KiB
  every 2 ms to a second, already replicated topic, sampled before the move and during it.

``--throttle R`` passes ``--throttle R`` to the move (Kafka's replication throttles: the leader and
each new follower copy at most R bytes/s, the in-sync replicas are not throttled).

    python bench/reassignment_bench.py [--mb 512] [--partitions 4] [--throttle 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster

OVERRIDES = {"replica.lag.time.max.ms": "10000", "group.initial.rebalance.delay.ms": "0"}


def log(message: str) -> None:
    print(f"[reassignment-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def fill(cluster: LocalCluster, topic: str, partitions: int, mb: int) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20}
    )
    value = os.urandom(1024)
    for i in range(mb * 1024):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.001)
    assert producer.flush(300) == 0


def dir_bytes(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    base = Path(cluster.broker(broker_id).data_dir)
    return sum(f.stat().st_size for d in base.glob(f"{topic}-*") for f in d.glob("*.log"))


class LatencyProbe(threading.Thread):
    """acks=all sends every 2 ms; ``take()`` returns the latencies (ms) since the last call."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.topic = topic
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        value = os.urandom(1024)
        while not self.stop.is_set():
            sent = time.perf_counter()
            self.producer.produce(
                self.topic,
                value,
                on_delivery=lambda e, m, t=sent: (
                    self.samples.append((time.perf_counter() - t) * 1000) if e is None else None
                ),
            )
            self.producer.poll(0.002)
        self.producer.flush(30)

    def take(self) -> list[float]:
        out, self.samples = self.samples, []
        return out


def percentiles(samples: list[float]) -> dict[str, float]:
    if len(samples) < 2:
        return {"n": len(samples)}
    q = statistics.quantiles(samples, n=100)
    return {"n": len(samples), "p50_ms": round(q[49], 2), "p99_ms": round(q[98], 2)}


def bench(args: argparse.Namespace) -> dict[str, Any]:
    with LocalCluster(3, overrides=OVERRIDES, base_dir=args.dir) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic("moving", num_partitions=args.partitions, replica_assignment=[[1]] * args.partitions)
        admin.create_topics([topic])["moving"].result(60)
        admin.create_topics([NewTopic("probe", 1, 3)])["probe"].result(60)
        time.sleep(2)
        log(f"filling {args.mb} MB")
        fill(cluster, "moving", args.partitions, args.mb)
        size = dir_bytes(cluster, 1, "moving")
        probe = LatencyProbe(cluster.bootstrap_servers, "probe")
        probe.start()
        time.sleep(5)
        before = probe.take()
        plan = {
            "version": 1,
            "partitions": [{"topic": "moving", "partition": p, "replicas": [1, 2, 3]} for p in range(args.partitions)],
        }
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(plan, f)
        log("moving")
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "odradek.cli.main", "reassign-partitions", "--bootstrap-server"]
        throttle = ["--throttle", str(args.throttle)] if args.throttle > 0 else []
        execute = [*cmd, cluster.bootstrap_servers, "--execute", "--reassignment-json-file", f.name, *throttle]
        subprocess.run(execute, check=True, capture_output=True)
        while time.perf_counter() - t0 < 1800:
            value = json.loads(cluster.read_znode("/brokers/topics/moving") or b"{}")
            if not value.get("adding_replicas"):
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
        during = probe.take()
        probe.stop.set()
        probe.join(60)
        copied = dir_bytes(cluster, 2, "moving") + dir_bytes(cluster, 3, "moving")
        os.unlink(f.name)
    return {
        "move": {
            "topic_mb": round(size / 1e6, 1),
            "copied_mb": round(copied / 1e6, 1),
            "seconds": round(seconds, 2),
            "mb_per_s": round(copied / 1e6 / seconds, 1),
            "seconds_per_gb": round(seconds * 1e9 / size, 1),
        },
        "producer_during_move": {"before": percentiles(before), "during": percentiles(during)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--throttle", type=int, default=0, help="bytes/s for --throttle (0: none)")
    parser.add_argument("--dir", default=None, help="keep the cluster's files (logs) here")
    args = parser.parse_args()
    print(json.dumps({"bench": "reassignment", "args": vars(args), **bench(args)}, indent=2))


if __name__ == "__main__":
    main()
