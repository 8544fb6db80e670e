"""What the web console costs: page render times on a big cluster, and the broker CPU of an open page.

One odradek broker process (embedded metadata store, ``metrics.listener`` on) holding
``--topics`` x ``--partitions`` partitions (default 60 x 50 = 3,000; a record in each) and
``--groups`` consumer groups (default 500; each has committed an offset, as an empty classic group
does after its consumers left). The console runs in this process (uvicorn on a thread), exactly as
``odradek ui`` serves it.

1. ``render``: each main page fetched ``--requests`` times in turn over HTTP (a kept-alive
   connection, like a browser): overview, topics (first page of 200), one topic (50 partitions),
   its messages (50 records), groups (first page of 200), one group with its lag, brokers and log
   dirs. Figures: p50/p95 wall ms per page and the p95 over every request. Target: p95 < 1 s.
2. ``auto_refresh``: the broker's CPU (from /proc, user + system) over ``--window`` seconds while
   one open overview page refreshes as the browser would (the page every 15 s with
   ``?refresh=15``, as its auto-refresh link sets, and the throughput chart's ``/api/throughput`` every
   5 s), minus the same window
   idle. Figure: percent of one core. Target: < 1 %.

    python bench/console_bench.py [--topics 60] [--partitions 50] [--groups 500] [--requests 20] [--window 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from typing import Any

import httpx
import uvicorn
from confluent_kafka import Producer

from common import OdradekBroker, free_port, log, machine_info, percentiles
from odradek.cli.consumer_groups import GroupsClient
from odradek.client.admin import AdminClient, NewTopic
from odradek.console.app import ConsoleConfig, create_app
from odradek.storage.topic_partition import TopicPartition


def populate(bootstrap: str, topics: int, partitions: int, groups: int) -> None:
    async def run() -> None:
        async with AdminClient(bootstrap) as admin:
            for start in range(0, topics, 20):
                batch = [NewTopic(f"t-{i}", partitions, 1) for i in range(start, min(topics, start + 20))]
                for name, result in (await admin.create_topics(batch)).items():
                    if result.error is not None:
                        raise RuntimeError(f"{name}: {result.error}")
            client = GroupsClient(admin)
            for g in range(groups):
                tp = TopicPartition(f"t-{g % topics}", g % partitions)
                await client.commit(f"group-{g}", {tp: 0})

    asyncio.run(run())
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for t in range(topics):
        for p in range(partitions):
            producer.produce(f"t-{t}", b'{"n": %d}' % p, partition=p)
    producer.flush(60)


class Console:
    def __init__(self, bootstrap: str, metrics_url: str) -> None:
        self.port = free_port()
        app = create_app(ConsoleConfig(bootstrap, metrics_urls=[metrics_url]))
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


PAGES = {
    "overview": "/",
    "topics": "/topics",
    "topic": "/topics/t-0",
    "messages": "/topics/t-0/messages?limit=50",
    "groups": "/groups",
    "group": "/groups/view?id=group-0",
    "brokers": "/brokers",
}


def render(url: str, requests: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {name: [] for name in PAGES}
    with httpx.Client(base_url=url, timeout=30) as client:
        for path in PAGES.values():  # warm up: connections, first metadata
            assert client.get(path).status_code == 200, path
        for _ in range(requests):
            for name, path in PAGES.items():
                t0 = time.perf_counter()
                response = client.get(path)
                times[name].append((time.perf_counter() - t0) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{path} answered {response.status_code}: {response.text[:300]}")
    every = [t for ts in times.values() for t in ts]
    return {
        "pages_ms": {
            name: {k: round(v, 1) for k, v in percentiles(ts, (50, 95)).items()} for name, ts in times.items()
        },
        "p95_ms": round(percentiles(every, (95,))["p95"], 1),
        "requests": len(every),
    }


def auto_refresh(url: str, broker: OdradekBroker, window_s: float) -> dict[str, Any]:
    idle_start = broker.cpu_seconds()
    time.sleep(window_s)
    idle = broker.cpu_seconds() - idle_start
    busy_start = broker.cpu_seconds()
    started = time.monotonic()
    pages = polls = 0
    next_page = next_poll = started
    with httpx.Client(base_url=url, timeout=30) as client:
        while (now := time.monotonic()) - started < window_s:
            if now >= next_page:
                client.get("/?refresh=15").raise_for_status()
                pages += 1
                next_page += 15
            if now >= next_poll:
                client.get("/api/throughput").raise_for_status()
                polls += 1
                next_poll += 5
            time.sleep(max(0.0, min(next_page, next_poll) - time.monotonic()))
    busy = broker.cpu_seconds() - busy_start
    return {
        "window_s": window_s,
        "page_loads": pages,
        "chart_polls": polls,
        "broker_cpu_idle_s": round(idle, 4),
        "broker_cpu_refreshing_s": round(busy, 4),
        "cpu_pct_of_core": round(max(0.0, busy - idle) / window_s * 100, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=60)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args()
    metrics_port = free_port()
    overrides = {
        "metrics.listener": f"http://127.0.0.1:{metrics_port}",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    with OdradekBroker(overrides=overrides) as broker:
        t0 = time.perf_counter()
        populate(broker.bootstrap_servers, args.topics, args.partitions, args.groups)
        log(f"populated in {time.perf_counter() - t0:.1f} s")
        with Console(broker.bootstrap_servers, f"http://127.0.0.1:{metrics_port}/metrics") as url:
            rendered = render(url, args.requests)
            log(f"render p95 {rendered['p95_ms']:.1f} ms")
            refresh = auto_refresh(url, broker, args.window)
    result = {
        "bench": "console",
        "cluster": {
            "brokers": 1,
            "partitions": args.topics * args.partitions,
            "groups": args.groups,
        },
        "render": rendered,
        "render_target_p95_ms": 1000,
        "auto_refresh": refresh,
        "auto_refresh_target_pct": 1.0,
        "machine": machine_info(),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
