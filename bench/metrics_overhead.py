"""What the metrics cost: produce throughput with and without ``metrics.listener``, and the time
of one scrape of a broker hosting 3,000 partitions.

1. ``produce``: two broker processes at once (embedded metadata store, one topic of
   ``--partitions`` partitions), one with ``metrics.listener`` unset (nothing counted, no request
   timing), one with it set (BrokerTopicMetrics, RequestMetrics, the listener, the event loop
   probe). A kept-open confluent-kafka producer per broker (acks=1) sends bursts of records of
   ``--record-size`` bytes (``--messages``, ten times that for ``batched``), alternating between
   the brokers for ``--rounds`` pairs (the order flips each round), in two shapes: ``batched`` (``linger.ms`` 5:
   few large requests) and ``small_requests`` (``linger.ms`` 0, at most ``--small-batch`` records
   per request: many small requests, where per-request counting weighs most). Figures per shape:
   medians of records per second (client side, first send to last delivery report) and of broker
   CPU microseconds per record; ``throughput_overhead_pct`` and ``cpu_overhead_pct`` are the
   medians of the pairs' ratios (positive = costlier with metrics), which cancels most of a shared
   machine's drift; the ratios are listed too.
2. ``scrape``: a broker with ``metrics.listener`` and one topic of ``--scrape-partitions``
   partitions (a record in each), scraped ``--scrapes`` times: the wall time of one
   ``GET /metrics`` (the event loop produces the text in one go, so this is also how long the
   loop is held), the response's size and sample count. The target is < 200 ms.

    python bench/metrics_overhead.py [--messages 50000] [--rounds 9] [--scrape-partitions 3000]
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


class Load:
    """A producer (acks=1) kept connected to one broker; :meth:`burst` sends ``messages`` records."""

    def __init__(
        self,
        broker: OdradekBroker,
        topic: str,
        record_size: int,
        linger_ms: int,
        batch: int,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.errors: list[str] = []
        conf: dict[str, Any] = {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": 1,
            "linger.ms": linger_ms,
            "enable.idempotence": False,
            "on_delivery": self._on_delivery,
            **(extra or {}),
        }
        if batch:
            conf["batch.num.messages"] = batch
        self.producer = Producer(conf)
        self.payload = os.urandom(record_size)
        self.producer.produce(topic, self.payload)  # connect and learn the metadata first
        self.producer.flush(30)

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def burst(self, messages: int) -> tuple[float, float]:
        """(records per second, broker CPU microseconds per record)."""
        producer = self.producer
        cpu0 = self.broker.cpu_seconds()
        t0 = time.perf_counter()
        for i in range(messages):
            while True:
                try:
                    producer.produce(self.topic, self.payload)
                    break
                except BufferError:
                    producer.poll(0.001)
            if i % 1000 == 0:
                producer.poll(0)
        left = producer.flush(120)
        elapsed = time.perf_counter() - t0
        if left or self.errors:
            raise RuntimeError(f"{left} records unacknowledged, errors: {self.errors[:3]}")
        return messages / elapsed, (self.broker.cpu_seconds() - cpu0) / messages * 1e6


def produce_paired(args: argparse.Namespace) -> dict[str, Any]:
    """Both brokers run at once; bursts alternate between them (the order flips every round), so
    each pair of bursts sees about the same machine; the overhead is the median of the pairs'
    ratios."""
    port = free_port()
    plain = OdradekBroker(overrides={"num.partitions": str(args.partitions)})
    metered = OdradekBroker(
        overrides={"num.partitions": str(args.partitions), "metrics.listener": f"http://127.0.0.1:{port}"}
    )
    out: dict[str, Any] = {}
    with plain, metered:
        for broker in (plain, metered):
            create_topic(broker.bootstrap_servers, "load", args.partitions)
        for shape, linger, batch, messages in (
            ("batched", 5, 0, args.messages * 10),
            ("small_requests", 0, args.small_batch, args.messages),
        ):
            loads = {
                "without_metrics": Load(plain, "load", args.record_size, linger, batch),
                "with_metrics": Load(metered, "load", args.record_size, linger, batch),
            }
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in loads}
            for rnd in range(args.rounds):
                order = list(loads) if rnd % 2 == 0 else list(reversed(loads))
                for name in order:
                    runs[name].append(loads[name].burst(messages))
            log(f"{shape}: {args.rounds} rounds done")
            rate_ratio = [w[0] / p[0] for w, p in zip(runs["with_metrics"], runs["without_metrics"])]
            pairs = zip(runs["with_metrics"], runs["without_metrics"])
            cpu_ratio = [w[1] / p[1] for w, p in pairs if p[1] > 0 and w[1] > 0] or [float("nan")]  # CPU in 10 ms ticks
            out[shape] = {
                "records_per_s": {name: round(median([r[0] for r in rs])) for name, rs in runs.items()},
                "broker_cpu_us_per_record": {name: round(median([r[1] for r in rs]), 2) for name, rs in runs.items()},
                "throughput_overhead_pct": round((1 - median(rate_ratio)) * 100, 2),
                "cpu_overhead_pct": round((median(cpu_ratio) - 1) * 100, 2),
                "pair_ratios_throughput": [round(r, 3) for r in rate_ratio],
                "pair_ratios_cpu": [round(r, 3) for r in cpu_ratio],
            }
    return out


def scrape(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    # one topic of them all: above the default odradek.max.partitions.per.request and per.broker
    limits = {
        "odradek.max.partitions.per.request": str(max(args.scrape_partitions, 1)),
        "odradek.max.partitions.per.broker": str(max(args.scrape_partitions + 200, 4000)),
    }
    with OdradekBroker(overrides={"metrics.listener": f"http://127.0.0.1:{port}", **limits}) as broker:
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
    parser.add_argument("--messages", type=int, default=50_000, help="records per burst")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--small-batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=9, help="pairs of bursts per shape")
    parser.add_argument("--scrape-partitions", type=int, default=3000, help="0 skips the scrape part")
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--skip-produce", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"machine": machine_info(), "args": vars(args), "load_average": os.getloadavg()}
    if not args.skip_produce:
        result["produce"] = produce_paired(args)
        result["produce_target_pct"] = 3
    if args.scrape_partitions > 0:
        log(f"scrape of {args.scrape_partitions} partitions")
        result["scrape"] = scrape(args)
    result["load_average_after"] = os.getloadavg()
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
