"""Produce and consume throughput through confluent-kafka against an in-process odradek broker.

Prints one JSON object: for each message size, msgs/s and MB/s for produce (acks=1, linger 5 ms,
batch 1 MB) and for consuming everything back. The broker runs in this process on its own
thread (odradek.testing.BrokerRunner), so the figures include sharing the machine with the client.

    .venv/bin/python bench/client_bench.py [--messages 200000] [--sizes 100,1024]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing import BrokerRunner


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> dict[str, float]:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    payload = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, payload, partition=i % 4)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - t0
    assert remaining == 0
    return {
        "msgs_per_s": round(n / elapsed),
        "mb_per_s": round(n * size / elapsed / 1e6, 1),
        "seconds": round(elapsed, 2),
    }


def consume(bootstrap: str, topic: str, n: int, size: int) -> dict[str, float]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            "queued.min.messages": 1000000,
            "fetch.queue.backoff.ms": 0,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        msgs = consumer.consume(10000, 1.0)
        got += len(msgs)
        if time.perf_counter() - t0 > 300:
            break
    elapsed = time.perf_counter() - t0
    consumer.close()
    return {
        "msgs_per_s": round(got / elapsed),
        "mb_per_s": round(got * size / elapsed / 1e6, 1),
        "seconds": round(elapsed, 2),
        "consumed": got,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--acks", default="1")
    args = parser.parse_args()
    results: dict[str, object] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "messages": args.messages,
        "acks": args.acks,
    }
    with tempfile.TemporaryDirectory() as d, BrokerRunner(d, {"num.partitions": "4"}) as broker:
        for size in (int(s) for s in args.sizes.split(",")):
            topic = f"bench-{size}"
            n = args.messages if size <= 1024 else max(1000, args.messages * 1024 // size)
            results[f"produce_{size}B"] = produce(broker.bootstrap_servers, topic, n, size, args.acks)
            results[f"consume_{size}B"] = consume(broker.bootstrap_servers, topic, n, size)
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
