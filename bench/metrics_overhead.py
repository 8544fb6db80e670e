"""What the metrics cost: produce throughput with and without ``metrics.listener``, and the time
of one scrape of a broker hosting 3,000 partitions.

1. ``produce``: a broker process (embedded metadata store, one topic of ``--partitions``
   partitions) with ``metrics.listener`` unset (nothing counted, no request timing) and set
   (BrokerTopicMetrics, RequestMetrics stage reservoirs, the listener, the event loop probe),
   alternately, ``--reps`` times each. Each run produces ``--messages`` records of
   ``--record-size`` bytes through confluent-kafka (acks=1) in two shapes: ``batched``
   (``linger.ms`` 5: few large requests) and ``small_requests`` (``linger.ms`` 0, at most
   ``--small-batch`` records per request: many small requests, where per-request counting weighs
   most). Figures: records per second (client side, first send to last delivery report) and the
   broker's CPU microseconds per record, median of the runs; ``overhead_pct`` compares medians
   (positive = slower with metrics). The machine is shared: compare the spread of the runs too.
2. ``scrape``: a broker with ``metrics.listener`` and one topic of ``--scrape-partitions``
   partitions (a record in each), scraped ``--scrapes`` times: the wall time of one
   ``GET /metrics`` (the event loop produces the text in one go, so this is also how long the
   loop is held), the response's size and sample count. The target is < 200 ms.

    python bench/metrics_overhead.py [--messages 200000] [--reps 3] [--scrape-partitions 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from typing import Any

from confluent_kafka import Producer

from common import OdradekBroker, create_topic, free_port, log, machine_info, median, percentiles


def produce(bootstrap: str, topic: str, messages: int, record_size: int, linger_ms: int, batch: int) -> float:
    """Records per second acknowledged (acks=1)."""
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": linger_ms,
        "on_delivery": on_delivery,
        "enable.idempotence": False,
    }
    if batch:
        conf["batch.num.messages"] = batch
    producer = Producer(conf)
    payload = os.urandom(record_size)
    producer.produce(topic, payload)  # connect and learn the metadata first
    producer.flush(30)
    t0 = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.001)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - t0
    if left or errors:
        raise RuntimeError(f"{left} records unacknowledged, errors: {errors[:3]}")
    return messages / elapsed


def produce_run(metrics: bool, args: argparse.Namespace) -> dict[str, float]:
    overrides = {"num.partitions": str(args.partitions)}
    if metrics:
        overrides["metrics.listener"] = f"http://127.0.0.1:{free_port()}"
    out: dict[str, float] = {}
    with OdradekBroker(overrides=overrides) as broker:
        create_topic(broker.bootstrap_servers, "load", args.partitions)
        for shape, linger, batch in (("batched", 5, 0), ("small_requests", 0, args.small_batch)):
            cpu0 = broker.cpu_seconds()
            rate = produce(broker.bootstrap_servers, "load", args.messages, args.record_size, linger, batch)
            cpu = broker.cpu_seconds() - cpu0
            out[f"{shape}_records_per_s"] = rate
            out[f"{shape}_broker_cpu_us_per_record"] = cpu / (args.messages + 1) * 1e6
    return out


def scrape(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with OdradekBroker(overrides={"metrics.listener": f"http://127.0.0.1:{port}"}) as broker:
        t0 = time.perf_counter()
        create_topic(broker.bootstrap_servers, "many", args.scrape_partitions, timeout=300)
        created_s = time.perf_counter() - t0
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for p in range(args.scrape_partitions):
            producer.produce("many", b"x" * 100, partition=p)
        producer.flush(120)
        times: list[float] = []
        body = b""
        for _ in range(args.scrapes):
            t = time.perf_counter()
            body = urllib.request.urlopen(url, timeout=30).read()
            times.append((time.perf_counter() - t) * 1000)
        samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {
        "partitions": args.scrape_partitions,
        "topic_create_s": round(created_s, 1),
        "scrape_ms": {k: round(v, 1) for k, v in percentiles(times, (50, 99)).items()},
        "scrape_ms_max": round(max(times), 1),
        "response_bytes": len(body),
        "samples": samples,
        "target_ms": 200,
        "met": max(times) < 200,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--small-batch", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--scrape-partitions", type=int, default=3000)
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--skip-produce", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"machine": machine_info(), "args": vars(args)}
    if not args.skip_produce:
        runs: dict[str, list[dict[str, float]]] = {"without_metrics": [], "with_metrics": []}
        for rep in range(args.reps):
            for metrics in (False, True) if rep % 2 == 0 else (True, False):
                name = "with_metrics" if metrics else "without_metrics"
                log(f"produce run {rep + 1}/{args.reps} {name}")
                runs[name].append(produce_run(metrics, args))
        summary: dict[str, Any] = {}
        for key in runs["without_metrics"][0]:
            base = median([r[key] for r in runs["without_metrics"]])
            with_ = median([r[key] for r in runs["with_metrics"]])
            summary[key] = {
                "without_metrics": round(base, 2),
                "with_metrics": round(with_, 2),
                "spread_without": [round(r[key], 2) for r in runs["without_metrics"]],
                "spread_with": [round(r[key], 2) for r in runs["with_metrics"]],
            }
            if key.endswith("records_per_s"):
                summary[key]["overhead_pct"] = round((base - with_) / base * 100, 2)
            else:
                summary[key]["overhead_pct"] = round((with_ - base) / base * 100, 2)
        result["produce"] = summary
        result["produce_target_pct"] = 3
    log(f"scrape of {args.scrape_partitions} partitions")
    result["scrape"] = scrape(args)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
