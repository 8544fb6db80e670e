"""What authorization adds to a 1-partition Produce round trip.

Two odradek brokers in their own processes (``bench/common.py``), one PLAINTEXT listener each:
``plain`` without an authorizer, ``acl`` with ``authorizer.class.name=kafka.security.authorizer.
AclAuthorizer`` and ``--acls`` ACLs (default 1,000) seeded in its embedded store before it starts:
CLUSTER_ACTION and CREATE on the cluster and WRITE on the benchmark topic for ``User:ANONYMOUS``
(every PLAINTEXT client), the rest spread over other topics' literal and prefixed patterns, groups
and transactional ids, some of them DENY, so the topic's lookup walks a populated cache.

One connection per broker sends ``--requests`` Produce requests (acks=1, one batch of
``--records`` records of ``--value-bytes``), one at a time, alternating brokers request by
request so both see the same machine load. Reported per broker: ``p50_us``, ``mean_us``, ``p99_us`` of the
round trips, and ``overhead_pct`` = (acl p50 / plain p50 - 1) x 100 (target <= 5). One JSON
document to stdout.

    python bench/authorizer_bench.py [--requests 4000] [--acls 1000] [--records 10] [--value-bytes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import tempfile
import time
from typing import Any

from common import OdradekBroker, create_topic, log, machine_info
from odradek.client.connection import KafkaConnection
from odradek.metadata.authorizer import ACL_AUTHORIZER_CLASS, AclAuthorizer
from odradek.metadata.embedded import EmbeddedStore
from odradek.protocol.records import Record, build_batch
from odradek.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

TOPIC = "bench-authz"
ANONYMOUS = "User:ANONYMOUS"


def _binding(rtype: ResourceType, name: str, op: AclOperation, *, prefixed: bool = False, deny: bool = False) -> Any:
    pattern = ResourcePattern(rtype, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(pattern, AccessControlEntry(ANONYMOUS, "*", op, permission))


def acl_set(count: int) -> list[AclBinding]:
    """``count`` bindings: the three the benchmark needs, then filler over other resources."""
    bindings = [
        _binding(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION),
        _binding(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE),
        _binding(ResourceType.TOPIC, TOPIC, AclOperation.WRITE),
    ]
    kinds = [
        (ResourceType.TOPIC, "orders-{:04d}", AclOperation.READ, False),
        (ResourceType.TOPIC, "bench-{:04d}-", AclOperation.WRITE, True),  # prefixes sharing the topic's start
        (ResourceType.GROUP, "group-{:04d}", AclOperation.READ, False),
        (ResourceType.TRANSACTIONAL_ID, "txn-{:04d}", AclOperation.WRITE, False),
    ]
    i = 0
    while len(bindings) < count:
        rtype, name, op, prefixed = kinds[i % len(kinds)]
        bindings.append(_binding(rtype, name.format(i), op, prefixed=prefixed, deny=i % 10 == 0))
        i += 1
    return bindings[:count]


def seed(data_dir: str, bindings: list[AclBinding]) -> None:
    async def run() -> None:
        store = EmbeddedStore(os.path.join(data_dir, "metadata"))
        authorizer = AclAuthorizer(store.session())
        await authorizer.start()
        await authorizer.create_acls(bindings)
        await authorizer.close()
        await store.close()

    asyncio.run(run())


def produce_request(conn: KafkaConnection, batch: bytes) -> Any:
    rb = conn.builder(0, max_version=9)
    part = rb.make("PartitionProduceData", index=0, records=batch)
    return rb(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(rb.make("TopicProduceData", name=TOPIC, partition_data=(part,)),),
    )


async def measure(ports: dict[str, int], requests: int, batch: bytes) -> dict[str, list[float]]:
    conns = {name: await KafkaConnection("127.0.0.1", port).connect() for name, port in ports.items()}
    timings: dict[str, list[float]] = {name: [] for name in ports}
    try:
        for name, conn in conns.items():  # warm up
            for _ in range(200):
                response = await conn.send(produce_request(conn, batch))
                error = response.responses[0].partition_responses[0].error_code
                assert error == 0, f"{name}: produce answered {error}"
        for _ in range(requests):
            for name, conn in conns.items():
                request = produce_request(conn, batch)
                t0 = time.perf_counter()
                await conn.send(request)
                timings[name].append((time.perf_counter() - t0) * 1e6)
    finally:
        for conn in conns.values():
            await conn.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()

    acl_dir = tempfile.mkdtemp(prefix="odradek-bench-acl-")
    seed(acl_dir, acl_set(args.acls))
    brokers = {
        "plain": OdradekBroker(),
        "acl": OdradekBroker(acl_dir, {"authorizer.class.name": ACL_AUTHORIZER_CLASS}),
    }
    batch = build_batch([Record(None, b"x" * args.value_bytes) for _ in range(args.records)])
    try:
        for broker in brokers.values():
            broker.start()
            create_topic(broker.bootstrap_servers, TOPIC, 1)
        log(f"measuring {args.requests} produce round trips per broker")
        timings = asyncio.run(measure({n: b.port for n, b in brokers.items()}, args.requests, bytes(batch)))
    finally:
        for broker in brokers.values():
            broker.stop()
    result: dict[str, Any] = {"machine": machine_info(), "acls": args.acls, "requests": args.requests}
    for name, values in timings.items():
        ordered = sorted(values)
        result[name] = {
            "p50_us": round(statistics.median(ordered), 1),
            "mean_us": round(statistics.fmean(ordered), 1),
            "p99_us": round(ordered[int(len(ordered) * 0.99) - 1], 1),
        }
    result["overhead_pct"] = round((result["acl"]["p50_us"] / result["plain"]["p50_us"] - 1) * 100, 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
