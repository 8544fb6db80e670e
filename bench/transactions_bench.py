"""Transactions: produce throughput plain vs idempotent vs transactional, and read_committed vs
read_uncommitted consumption.

One broker process on Apache ZooKeeper (``odradek.cli.cluster.LocalCluster``), client
confluent-kafka, same settings for every mode (acks=all, linger.ms 5, no compression). One JSON
document on stdout, progress on stderr.

- ``produce``: ``--messages`` messages of ``--size`` bytes (1 KiB) to a topic of ``--partitions``
  partitions (default 1; messages spread round robin) per mode;
  ``plain`` (``enable.idempotence=false``), ``idempotent``, ``transactional`` (one transaction per
  ``--txn-size`` messages, committed before the next begins). ``msgs_per_s`` per repetition and the
  median; ``ratio_transactional_to_plain`` (target >= 0.8).
- ``commit``: ``--commits`` back-to-back transactions of one 100-byte message per partition
  (linger.ms 0): transactions per second and the begin-to-committed latency (p50, p99, max). This
  is the transaction's own cost (AddPartitionsToTxn, EndTxn, markers), free of the disk.
- ``consume``: the transactional topic read from offset 0 to its end by a fresh consumer with
  ``isolation.level`` ``read_uncommitted`` and then ``read_committed`` (one control batch per
  transaction is skipped by both); ``msgs_per_s`` each.

With one partition, idempotent and transactional figures are bound by the client, not the broker:
librdkafka caps a partition's in-flight *messages* of an idempotent producer at 5 (its
``RD_KAFKA_IDEMP_MAX_INFLIGHT``, compared with ``rktp_msgs_inflight``), so a partition has one
ProduceRequest in flight at a time and throughput is one batch per round trip, against a broker of
any kind. ``--partitions 6`` shows the pipelined case. Each measurement starts after ``sync``:
with gigabytes of dirty pages the kernel throttles writers (``vm.dirty_ratio``), which otherwise
penalises whichever mode runs later; the order of the modes rotates with each repetition (use a
multiple of 3), so no mode always runs first. ``--base-dir /dev/shm/x`` keeps the broker's data in memory,
so the figures compare the modes' CPU and round trips without the disk's variance.

    python bench/transactions_bench.py [--messages 200000] [--size 1024] [--txn-size 1000] [--reps 3]
                                       [--partitions 1] [--commits 500] [--base-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import LocalCluster

BASE = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none"}


def log(message: str) -> None:
    print(f"[transactions-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def produce(
    bootstrap: str, topic: str, mode: str, messages: int, size: int, txn_size: int, rep: int, partitions: int
) -> float:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, **BASE, "enable.idempotence": mode != "plain"}
    if mode == "transactional":
        conf["transactional.id"] = f"bench-{topic}-{rep}"
    producer = Producer(conf)
    payload = b"x" * size
    failed: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    if mode == "transactional":
        producer.init_transactions(30)
    started = time.perf_counter()
    for first in range(0, messages, txn_size):
        if mode == "transactional":
            producer.begin_transaction()
        for i in range(first, min(first + txn_size, messages)):
            while True:
                try:
                    producer.produce(topic, payload, partition=i % partitions, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
        if mode == "transactional":
            producer.commit_transaction(60)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{mode}: {len(failed)} delivery errors, first {failed[0]}")
    return messages / elapsed


def commit_latency(bootstrap: str, topic: str, commits: int, partitions: int) -> dict[str, float]:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "transactional.id": "bench-lat"}
    producer = Producer(conf)
    producer.init_transactions(30)
    latencies: list[float] = []
    started = time.perf_counter()
    for _ in range(commits):
        begun = time.perf_counter()
        producer.begin_transaction()
        for p in range(partitions):
            producer.produce(topic, b"x" * 100, partition=p)
        producer.commit_transaction(30)
        latencies.append((time.perf_counter() - begun) * 1000)
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "txn_per_s": round(commits / elapsed, 1),
        "p50_ms": round(latencies[len(latencies) // 2], 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)], 2),
        "max_ms": round(latencies[-1], 2),
    }


def consume(bootstrap: str, topic: str, isolation: str, expected: int, partitions: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    started = time.perf_counter()
    at_end: set[int] = set()
    while len(at_end) < partitions:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:  # type: ignore[union-attr]
                at_end.add(int(m.partition() or 0))
    elapsed = time.perf_counter() - started
    consumer.close()
    if got != expected:
        raise RuntimeError(f"{isolation}: read {got} records, expected {expected}")
    return got / elapsed


def bench(args: argparse.Namespace) -> dict[str, Any]:
    overrides = {"num.partitions": "1", "transaction.state.log.replication.factor": "1"}
    base = tempfile.mkdtemp(prefix="transactions-bench-", dir=args.base_dir) if args.base_dir else None
    try:
        return run(args, LocalCluster(1, base_dir=base, overrides=overrides))
    finally:
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)


def run(args: argparse.Namespace, local: LocalCluster) -> dict[str, Any]:
    with local as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        modes = ("plain", "idempotent", "transactional")
        results: dict[str, list[float]] = {m: [] for m in modes}
        for rep in range(args.reps):
            for mode in modes[rep % 3 :] + modes[: rep % 3]:  # each mode runs first, second and third in turn
                topic = f"{mode}-{rep}"
                admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
                time.sleep(0.5)  # leaders elected
                os.sync()  # every mode starts with no dirty pages: writeback throttling skews whoever runs later
                rate = produce(bootstrap, topic, mode, args.messages, args.size, args.txn_size, rep, args.partitions)
                log(f"{mode} rep {rep}: {rate:,.0f} msgs/s")
                results[mode].append(rate)
        medians = {m: statistics.median(v) for m, v in results.items()}
        admin.create_topics([NewTopic("commits", args.partitions, 1)])["commits"].result(30)
        time.sleep(0.5)
        commit = commit_latency(bootstrap, "commits", args.commits, args.partitions)
        log(f"commit: {commit}")
        consumed = {
            isolation: consume(bootstrap, "transactional-0", isolation, args.messages, args.partitions)
            for isolation in ("read_uncommitted", "read_committed")
        }
        log(f"consume: {consumed}")
    return {
        "produce": {m: {"msgs_per_s": [round(r) for r in results[m]], "median": round(medians[m])} for m in modes},
        "ratio_transactional_to_plain": round(medians["transactional"] / medians["plain"], 3),
        "ratio_idempotent_to_plain": round(medians["idempotent"] / medians["plain"], 3),
        "commit": commit,
        "consume": {k: {"msgs_per_s": round(v)} for k, v in consumed.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--txn-size", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--base-dir", help="the broker's data under this dir (e.g. a tmpfs: no disk in the figures)")
    args = parser.parse_args()
    print(json.dumps({"bench": "transactions", "args": vars(args), **bench(args)}, indent=2))


if __name__ == "__main__":
    main()
