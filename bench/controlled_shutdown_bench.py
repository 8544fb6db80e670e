"""Unavailability per partition during a controlled shutdown and during a rolling restart.

Three broker processes on one Apache ZooKeeper (``odradek.cli.cluster.LocalCluster``), client
confluent-kafka. One JSON document on stdout, progress on stderr.

A topic of ``--partitions`` partitions, replication factor 3, min.insync.replicas 2; an idempotent
acks=all producer sends to every partition in turn, one record every 2 ms. A partition's
unavailability is the longest gap between two consecutive acknowledgements of records sent to it
(send time of the first record acknowledged after the gap minus acknowledgement time of the last
one before it is the part the broker caused; the gap reported is between acknowledgement times,
an upper bound).

- ``controlled_shutdown``: one broker leading partitions gets SIGTERM; per partition it led, the
  gap in the 10 s around it (target: < 1 s). The broker is started again afterwards.
- ``rolling_restart``: every broker in turn gets SIGTERM and is started again, each waited for
  until every ISR is whole; the longest gap of each partition over the whole restart.

    python bench/controlled_shutdown_bench.py [--partitions 6]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import threading
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster

TOPIC = "availability"


def log(message: str) -> None:
    print(f"[controlled-shutdown-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Probe(threading.Thread):
    """Sends to every partition in turn; keeps each partition's acknowledgement times."""

    def __init__(self, bootstrap: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0}
        )
        self.partitions = partitions
        self.acks: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.errors = 0
        self.stop = threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acks[msg.partition()].append(time.monotonic())
        else:
            self.errors += 1

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(TOPIC, b"x" * 100, partition=i % self.partitions, on_delivery=self._done)
            self.producer.poll(0.002)
            i += 1
        self.producer.flush(60)

    def longest_gap(self, partition: int, start: float, end: float) -> float:
        times = [t for t in self.acks[partition] if start <= t <= end]
        return max((b - a for a, b in itertools.pairwise(times)), default=end - start)


def leaders(cluster: LocalCluster, partitions: int) -> dict[int, int]:
    out = {}
    for p in range(partitions):
        state = json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}/partitions/{p}/state") or b"{}")
        out[p] = int(state.get("leader", -1))
    return out


def isr_whole(cluster: LocalCluster, partitions: int) -> bool:
    for p in range(partitions):
        state = json.loads(cluster.read_znode(f"/brokers/topics/{TOPIC}/partitions/{p}/state") or b"{}")
        if len(state.get("isr", [])) != 3:
            return False
    return True


def summary(gaps: list[float]) -> dict[str, float]:
    return {"max_s": round(max(gaps), 3), "median_s": round(statistics.median(gaps), 3), "partitions": len(gaps)}


def bench(args: argparse.Namespace) -> dict[str, Any]:
    overrides = {"leader.imbalance.check.interval.seconds": "5", "replica.lag.time.max.ms": "10000"}
    with LocalCluster(3, overrides=overrides) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic(TOPIC, args.partitions, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(30)
        cluster.wait_until(lambda: isr_whole(cluster, args.partitions), timeout_s=30)
        probe = Probe(cluster.bootstrap_servers, args.partitions)
        probe.start()
        time.sleep(3)
        led = leaders(cluster, args.partitions)
        victim = max(set(led.values()), key=lambda b: list(led.values()).count(b))
        log(f"SIGTERM to broker {victim}, leader of {sorted(p for p, b in led.items() if b == victim)}")
        t0 = time.monotonic()
        cluster.stop(victim)
        stopped = time.monotonic()
        time.sleep(5)
        shutdown_gaps = [probe.longest_gap(p, t0 - 2, t0 + 8) for p, b in led.items() if b == victim]
        cluster.restart(victim)
        cluster.wait_until(lambda: isr_whole(cluster, args.partitions), timeout_s=60)
        time.sleep(6)  # the automatic rebalance gives leadership back
        log("rolling restart")
        r0 = time.monotonic()
        for broker_id in (1, 2, 3):
            cluster.restart(broker_id)
            cluster.wait_until(lambda: isr_whole(cluster, args.partitions), timeout_s=60)
        r1 = time.monotonic()
        time.sleep(1)
        probe.stop.set()
        probe.join(60)
        rolling_gaps = [probe.longest_gap(p, r0, r1) for p in range(args.partitions)]
    return {
        "controlled_shutdown": {**summary(shutdown_gaps), "sigterm_to_exit_s": round(stopped - t0, 3)},
        "rolling_restart": {**summary(rolling_gaps), "seconds": round(r1 - r0, 1)},
        "producer_errors": probe.errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    print(json.dumps({"bench": "controlled_shutdown", "args": vars(args), **bench(args)}, indent=2))


if __name__ == "__main__":
    main()
