"""Resource figures of one broker process: start-up time, memory with many partitions, idle CPU.

Steps, each on a broker in its own process (``bench/common.py``):

1. ``ready_s``: start the broker on an empty data directory ``--starts`` times; median seconds
   from process start to its first ApiVersions answer (Python start-up and imports included).
2. ``rss_mb_empty`` and ``idle_cpu_pct_empty``: memory of a fresh broker, and its CPU use over
   ``--idle-s`` seconds with no client, in percent of one core (``/proc`` counts CPU in 10 ms
   ticks, so over 10 s the resolution is 0.1 %).
3. Create ``--topics`` topics of ``--partitions`` partitions in total (replication 1) with
   confluent-kafka's AdminClient (``create_topics_s``: until every partition has a leader) and
   produce ``--messages-per-partition`` messages of 100 bytes to every partition (acks=all,
   ``produce_to_all_s``). Then, with the clients closed:
   ``rss_mb`` (``VmRSS``) after 2 s, ``peak_rss_mb`` (``VmHWM``, the high-water mark of the
   whole run) and ``idle_cpu_pct`` over ``--idle-s`` seconds.
4. Restart on the same data (after a clean shutdown, odradek only): ``restart_ready_s`` (loading
   every partition's log included) and ``restart_rss_mb`` 2 s after it is ready.

MB = 10^6 bytes. One JSON document to stdout.

    python bench/resources.py [--broker odradek|tansu] [--partitions 1000] [--topics 10] [--idle-s 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from confluent_kafka import Producer

from common import BrokerProcess, OdradekBroker, create_topic, log, machine_info, make_broker, median


def idle_cpu_pct(broker: BrokerProcess, seconds: float) -> float:
    """CPU the broker used while nothing talked to it, in percent of one core."""
    cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
    time.sleep(seconds)
    return round((broker.cpu_seconds() - cpu0) / (time.perf_counter() - t0) * 100, 2)


def fill_partitions(bootstrap: str, topics: int, partitions: int, messages: int) -> tuple[float, float]:
    """Create ``partitions`` partitions over ``topics`` topics, write ``messages`` to each.

    Returns the seconds taken to create the topics (until every partition has a leader) and to
    produce the messages.
    """
    t0 = time.perf_counter()
    per_topic = [partitions // topics + (1 if i < partitions % topics else 0) for i in range(topics)]
    names = [f"res-{i}" for i in range(topics)]
    for name, count in zip(names, per_topic):
        create_topic(bootstrap, name, count)
    created = time.perf_counter()
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "on_delivery": on_delivery})
    payload = os.urandom(100)
    for name, count in zip(names, per_topic):
        for p in range(count):
            for _ in range(messages):
                producer.produce(name, payload, partition=p)
        producer.poll(0)
    left = producer.flush(120)
    if left or errors:
        raise RuntimeError(f"filling partitions: {left} unacknowledged, errors: {errors[:3]}")
    return created - t0, time.perf_counter() - created


def run(kind: str, partitions: int, topics: int, messages: int, idle_s: float, starts: int) -> dict[str, Any]:
    out: dict[str, Any] = {"broker": kind}
    ready = []
    for _ in range(starts):
        with make_broker(kind) as b:
            ready.append(b.ready_s)
    out["ready_s"] = round(median(ready), 3)
    out["ready_s_runs"] = [round(r, 3) for r in ready]
    data_dir = tempfile.mkdtemp(prefix="odradek-bench-res-") if kind == "odradek" else None
    broker = make_broker(kind, data_dir=data_dir) if data_dir else make_broker(kind)
    try:
        broker.start()
        out["rss_mb_empty"] = round(broker.rss_bytes() / 1e6, 1)
        log(f"  {kind}: idle CPU, empty, {idle_s} s")
        out["idle_cpu_pct_empty"] = idle_cpu_pct(broker, idle_s)
        log(f"  {kind}: {partitions} partitions in {topics} topics, {messages} messages each")
        create_s, produce_s = fill_partitions(broker.bootstrap_servers, topics, partitions, messages)
        out["create_topics_s"] = round(create_s, 2)
        out["produce_to_all_s"] = round(produce_s, 2)
        time.sleep(2)
        out["partitions"] = partitions
        out["rss_mb"] = round(broker.rss_bytes() / 1e6, 1)
        log(f"  {kind}: idle CPU with {partitions} partitions, {idle_s} s")
        out["idle_cpu_pct"] = idle_cpu_pct(broker, idle_s)
        out["peak_rss_mb"] = round(broker.peak_rss_bytes() / 1e6, 1)
        if isinstance(broker, OdradekBroker):
            status = broker.stop_keep_data()
            if status not in (0, -15):
                out["stop_status"] = status
            restarted = OdradekBroker(data_dir=data_dir)
            try:
                restarted.start()
                out["restart_ready_s"] = round(restarted.ready_s, 3)
                time.sleep(2)
                out["restart_rss_mb"] = round(restarted.rss_bytes() / 1e6, 1)
            finally:
                restarted.stop()
    finally:
        broker.stop()
        if data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partitions", type=int, default=1000, help="partitions in total")
    parser.add_argument("--topics", type=int, default=10, help="topics the partitions are spread over")
    parser.add_argument("--messages-per-partition", type=int, default=10)
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds over which idle CPU is measured")
    parser.add_argument("--starts", type=int, default=3, help="empty starts for the ready time")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", default="odradek", help="odradek or tansu")
    add_arguments(parser)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"machine": machine_info()}
    try:
        out["resources"] = run(
            args.broker, args.partitions, args.topics, args.messages_per_partition, args.idle_s, args.starts
        )
    except (RuntimeError, TimeoutError) as exc:
        out["error"] = str(exc)
        print(json.dumps(out, indent=2))
        return 1
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
