"""Consumer group settle time: a KIP-848 consumer group against a classic group with the
cooperative-sticky assignor, on one odradek broker process (``bench/common.py``).

For each protocol, ``--members`` librdkafka consumers (confluent-kafka) of one group subscribe to
one topic of ``--partitions`` partitions and the group settles (every partition owned by exactly
one member, and the members' partition counts within one of each other). Then, ``--reps`` times
each:

- ``join_s``: one more consumer subscribes; seconds until the group is settled again with it;
- ``leave_s``: that consumer closes (leaves the group); seconds until the remaining members are
  settled again.

Each consumer's assignment is read with ``assignment()`` after a ``poll``; the main thread polls
every consumer in turn, so a figure has the granularity of one round of polls (about 10 ms per
member). Consumer-protocol members heartbeat every ``group.consumer.heartbeat.interval.ms``
(``--heartbeat-ms``, the broker's setting); classic members use ``heartbeat.interval.ms`` 3000
and ``session.timeout.ms`` 10000 (librdkafka's defaults but a shorter session), and the broker's
``group.initial.rebalance.delay.ms`` is 0. One JSON document on stdout, progress on stderr.

    PYTHONPATH=src python bench/group_settle_bench.py [--members 10] [--partitions 30] [--reps 3] [--heartbeat-ms 500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Consumer

from common import OdradekBroker, create_topic, log

TOPIC = "settle"


def _consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config |= {
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 3000,
        }
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    return consumer


def _covered(consumers: list[Consumer], partitions: int) -> bool:
    """Every partition owned by exactly one member, and the members' counts within one of each
    other (the balance both the uniform and the cooperative-sticky assignor reach)."""
    owned: list[int] = []
    counts: list[int] = []
    for c in consumers:
        c.poll(0.01)
        mine = [tp.partition for tp in c.assignment()]
        owned += mine
        counts.append(len(mine))
    return sorted(owned) == list(range(partitions)) and max(counts) - min(counts) <= 1


def _wait(consumers: list[Consumer], partitions: int, timeout_s: float) -> float:
    started = time.monotonic()
    while not _covered(consumers, partitions):
        if time.monotonic() - started > timeout_s:
            raise TimeoutError("the group did not settle")
    return round(time.monotonic() - started, 3)


def run(protocol: str, bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    group = f"settle-{protocol}-{uuid.uuid4().hex[:6]}"
    members = [_consumer(bootstrap, group, protocol) for _ in range(args.members)]
    joins: list[float] = []
    leaves: list[float] = []
    try:
        first = _wait(members, args.partitions, 120)
        log(f"{protocol}: {args.members} members settled after {first} s")
        for rep in range(args.reps):
            extra = _consumer(bootstrap, group, protocol)
            joins.append(_wait([*members, extra], args.partitions, 120))
            extra.close()
            leaves.append(_wait(members, args.partitions, 120))
            log(f"{protocol} rep {rep}: join {joins[-1]} s, leave {leaves[-1]} s")
    finally:
        for c in members:
            c.close()
    return {
        "first_settle_s": first,
        "join_s": joins,
        "leave_s": leaves,
        "join_median_s": statistics.median(joins),
        "leave_median_s": statistics.median(leaves),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    args = parser.parse_args()
    overrides = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": str(args.heartbeat_ms),
        "group.consumer.min.heartbeat.interval.ms": str(min(args.heartbeat_ms, 5000)),
    }
    with OdradekBroker(overrides=overrides).start() as broker:
        create_topic(broker.bootstrap_servers, TOPIC, args.partitions)
        result: dict[str, Any] = {"bench": "group_settle", "args": vars(args)}
        for protocol in ("consumer", "classic"):
            result[protocol] = run(protocol, broker.bootstrap_servers, args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
