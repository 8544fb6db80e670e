"""The semantic fuzzer (:mod:`.semantic_fuzz`) against a broker process with no authorizer.

The broker has a client listener and a separate inter-broker one (the controller's APIs sent by
a client are refused, as Kafka does without an authorizer), and its metrics listener. Records are
written before the run to a topic the corpus never names. ``ODRADEK_SEMANTIC_REQUESTS`` (default
1000, a seeded sample; 0: every mutation, as ``make fuzz`` runs), ``ODRADEK_SEMANTIC_ARRAY`` (the
long arrays' length, see :mod:`.semantic_fuzz`) and ``ODRADEK_FUZZ_SEED`` size the run.
Afterwards: every request was answered or its connection closed (only Fetch, JoinGroup and
SyncGroup may wait), every served API was sent, the broker is alive with no traceback in its log,
its RSS never exceeded its base + 200 MB, the event loop watchdog saw no stall over 250 ms, and
the earlier records read back byte for byte.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.server.apis import API_HANDLERS

from .fuzz_support import consume_all
from .process_support import BrokerProcess, free_port
from .semantic_fuzz import run_semantic_fuzz

REQUESTS = int(os.environ.get("ODRADEK_SEMANTIC_REQUESTS", "1000"))
SEED = int(os.environ.get("ODRADEK_FUZZ_SEED", "20261128"))
RSS_GROWTH_BOUND = 200 * 1024 * 1024
STALL_BOUND_S = (
    float(os.environ.get("ODRADEK_FUZZ_STALL_BOUND_MS", "1000" if os.environ.get("PYTEST_XDIST_WORKER") else "250"))
    / 1000
)
"""The longest loop stall allowed: 250 ms run alone (``make fuzz``, a serial run); 1 s on a worker of
the parallel suite, where other workers' brokers and JVMs share the two cores and the watchdog, which
measures how late the loop runs by the wall clock, also counts the time the broker waited for a core
(a 277 ms stall was seen there). Still far below the multi-second stalls the limits removed."""
TOPIC = "semantic-integrity"

pytestmark = pytest.mark.timeout(600 if REQUESTS == 0 else 240)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("semantic") / "data"
    proc = BrokerProcess(data)
    proc.metrics_port = free_port()  # type: ignore[attr-defined]
    proc.overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{proc.port},INTERNAL://127.0.0.1:{free_port()}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "metrics.listener": f"http://127.0.0.1:{proc.metrics_port}",  # type: ignore[attr-defined]
        "group.initial.rebalance.delay.ms": "0",
    }
    proc.start()
    yield proc
    proc.stop()


def _stall_max(broker: BrokerProcess) -> float:
    port = broker.metrics_port  # type: ignore[attr-defined]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    match = re.search(r"^odradek_eventloop_stall_max_seconds (\S+)$", text, re.M)
    assert match
    return float(match.group(1))


def _produce(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    sent = [(i % 2, f"k{i}".encode(), os.urandom(48)) for i in range(200)]
    for partition, key, value in sent:
        producer.produce(TOPIC, value, key, partition=partition)
    assert producer.flush(30) == 0
    return sent


def test_semantically_mutated_requests(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    before = _produce(broker.bootstrap_servers)
    time.sleep(0.5)
    base = broker.rss_bytes()
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set() and broker.alive():
            peak[0] = max(peak[0], broker.rss_bytes())
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stats, total = asyncio.run(run_semantic_fuzz(broker.port, SEED, REQUESTS))
    finally:
        stop.set()
        sampler.join()
    stall = _stall_max(broker)
    slowest = sorted(stats.slowest.items(), key=lambda kv: -kv[1])[:3]
    print(
        f"semantic fuzz: seed {SEED}, {stats.sent} of {total} mutations in {stats.seconds:.1f} s "
        f"({stats.sent / stats.seconds:.0f}/s) over {stats.connections} connections: {stats.answered} answered, "
        f"{stats.closed} closed, {stats.slow} slow; {len(stats.apis)} APIs x {len(stats.fields)} fields; "
        f"peak RSS {peak[0] / 1e6:.1f} MB (base {base / 1e6:.1f}); longest loop stall {stall * 1000:.0f} ms; "
        f"slowest {[(f, round(s, 2)) for f, s in slowest]}"
    )
    assert broker.alive(), broker.log_text()[-3000:]
    assert stats.failures == [], stats.failures[:20]
    assert stats.answered > stats.sent // 2
    if REQUESTS == 0 or total <= REQUESTS:
        assert stats.apis == set(API_HANDLERS)
    else:
        assert len(stats.apis) >= len(API_HANDLERS) * 3 // 4
    assert peak[0] - base < RSS_GROWTH_BOUND, f"peak RSS {peak[0] / 1e6:.1f} MB over a base of {base / 1e6:.1f} MB"
    log = broker.log_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 300 : log.index("Traceback") + 3000]
    assert stall < STALL_BOUND_S, [line for line in log.splitlines() if "event loop stalled" in line][-5:]
    got = consume_all(broker.bootstrap_servers, TOPIC, 2, len(before))
    assert sorted(got) == sorted(before)
