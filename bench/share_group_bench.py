"""Share-group throughput (KIP-932): 1, 4 and 8 share consumers of one group on ONE partition,
on one odradek broker process (``bench/common.py``).

For each consumer count, ``--records`` records of ``--size`` bytes are produced to a fresh
one-partition topic; the group's ``share.auto.offset.reset`` is set to ``earliest`` (a GROUP
config), then that many confluent-kafka ``ShareConsumer``s (librdkafka 2.16, implicit
acknowledgement), one thread each, poll until every record was received. A figure is records per
second from the first poll to the last record received, and how many records were delivered more
than once (a record is delivered again only if its lock ran out: there should be none). One JSON
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
    _produce(bootstrap, topic, records, size)
    _earliest(bootstrap, group)
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()
    done = threading.Event()
    first_poll: list[float] = []
    last_record = [0.0]

    def run() -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        try:
            while not done.is_set():
                batch = consumer.poll(0.5) or []
                with lock:
                    if not first_poll:
                        first_poll.append(time.perf_counter())
                    for m in batch:
                        if m.error() is None:
                            seen[m.value()[:8]] += 1
                            last_record[0] = time.perf_counter()
                    if len(seen) >= records:
                        done.set()
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(consumers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    done.wait(600)
    for t in threads:
        t.join(60)
    elapsed = last_record[0] - (first_poll[0] if first_poll else t0)
    again = sum(n - 1 for n in seen.values() if n > 1)
    cell = {
        "consumers": consumers,
        "records": records,
        "received": len(seen),
        "delivered_again": again,
        "seconds": round(elapsed, 3),
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
    broker = OdradekBroker().start()
    try:
        cells = [_cell(broker.bootstrap_servers, int(n), args.records, args.size) for n in args.consumers.split(",")]
    finally:
        broker.stop()
    print(json.dumps({"bench": "share_group", "records": args.records, "size": args.size, "cells": cells}, indent=2))


if __name__ == "__main__":
    main()
