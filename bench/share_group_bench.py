"""Share-group throughput (KIP-932): 1, 4 and 8 share consumers of one group on ONE partition,
on one odradek broker process (``bench/common.py``).

For each consumer count, that many confluent-kafka ``ShareConsumer``s (librdkafka 2.16, implicit
acknowledgement), one thread each, subscribe to a fresh one-partition topic and are given time to
join (heartbeats every second, so all are assigned the partition within ``SETTLE_S``); then
``--records`` records of ``--size`` bytes are produced as fast as one producer can, and the
consumers poll until every record was received. A figure is records per second from the first
record received to the last (with the producer's own time beside it: where the two are close,
the producer was the limit), and how many records were delivered more than once (a record is
delivered again only if its lock ran out or its consumer gave it back: there should be none). One JSON
document on stdout, progress on stderr.

    PYTHONPATH=src python bench/share_group_bench.py [--records 50000] [--size 100] [--consumers 1,4,8]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections import Counter
from typing import Any

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from common import OdradekBroker, create_topic, log

OVERRIDES = {"group.share.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000"}
SETTLE_S = 4.0


def _produce(bootstrap: str, topic: str, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000})
    payload = b"x" * max(0, size - 8)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, b"%08d" % i + payload, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def _earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _cell(bootstrap: str, consumers: int, records: int, size: int) -> dict[str, Any]:
    topic = f"share-{consumers}-{uuid.uuid4().hex[:6]}"
    group = f"sg-{topic}"
    create_topic(bootstrap, topic, 1)
    _earliest(bootstrap, group)
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()
    done = threading.Event()
    first_record: list[float] = []
    last_record = [0.0]

    def run() -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        try:
            while not done.is_set():
                batch = consumer.poll(0.2) or []
                now = time.perf_counter()
                with lock:
                    for m in batch:
                        if m.error() is None:
                            seen[m.value()[:8]] += 1
                            last_record[0] = now
                    if batch and not first_record:
                        first_record.append(now)
                    if len(seen) >= records:
                        done.set()
            consumer.commit_sync(30)  # accepts what the last poll returned (close alone releases it)
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(consumers)]
    for t in threads:
        t.start()
    time.sleep(SETTLE_S)  # every member joined and was assigned the partition
    t0 = time.perf_counter()
    _produce(bootstrap, topic, records, size)
    produced_s = time.perf_counter() - t0
    done.wait(600)
    for t in threads:
        t.join(60)
    elapsed = last_record[0] - first_record[0] if first_record else float("nan")
    again = sum(n - 1 for n in seen.values() if n > 1)
    cell = {
        "consumers": consumers,
        "records": records,
        "received": len(seen),
        "delivered_again": again,
        "produce_s": round(produced_s, 3),
        "first_to_last_record_s": round(elapsed, 3),
        "records_per_s": round(len(seen) / elapsed, 1) if elapsed > 0 else None,
    }
    log(f"{consumers} consumers: {cell}")
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--consumers", default="1,4,8")
    args = parser.parse_args()
    broker = OdradekBroker(overrides=OVERRIDES).start()
    try:
        cells = [_cell(broker.bootstrap_servers, int(n), args.records, args.size) for n in args.consumers.split(",")]
    finally:
        broker.stop()
    print(json.dumps({"bench": "share_group", "records": args.records, "size": args.size, "cells": cells}, indent=2))


if __name__ == "__main__":
    main()
