"""The controller's ZooKeeper batches: reading and conditionally writing many partition states.

A new controller reads every partition's state znode before it elects anything, and a broker's
death rewrites the state of every partition it led or followed; both go through
:class:`~odradek.metadata.kafka_zk_client.KafkaZkClient` on a real Apache ZooKeeper (started
here, Debian's package, tickTime 500 ms, on a free 127.0.0.1 port). Two ways each, on the same
session, alternating over ``--reps`` repetitions:

- ``read``: ``get_partition_states_of`` of ``--partitions`` states, in ``multiRead`` requests
  of 500 (``multi_read``), and one pipelined getData per znode (``single``, what a server
  without ``multiRead`` gets).
- ``write``: ``update_leader_and_isrs`` of a third of them (the partitions a dead broker led),
  each conditional on its version and on ``/controller_epoch``: 100 to a multi (``chunked``), and
  one multi per partition (``each``, Kafka's ``updateLeaderAndIsr``).

Figures: seconds of wall time and of this process's CPU (kazoo's threads included), medians and
every repetition. One JSON document to stdout.

    PYTHONPATH=src python bench/zk_batch_bench.py [--partitions 3000] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from common import machine_info
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.znodes import LeaderAndIsr, TopicPartition
from odradek.metadata.zookeeper import ZooKeeperStore
from odradek.testing_zk import ZooKeeperServer

TOPIC = "states"


async def timed(action: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    wall, cpu = time.monotonic(), time.process_time()
    await action()
    return time.monotonic() - wall, time.process_time() - cpu


def summary(runs: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "wall_s": round(statistics.median(r[0] for r in runs), 4),
        "cpu_s": round(statistics.median(r[1] for r in runs), 4),
        "runs_wall_s": [round(r[0], 4) for r in runs],
    }


async def measure(connect: str, partitions: int, reps: int) -> dict[str, Any]:
    store = ZooKeeperStore(connect, session_timeout_ms=6000)
    await store.start()
    try:
        zk = KafkaZkClient(store)
        await store.create("/controller_epoch", b"1")
        await store.create(f"/brokers/topics/{TOPIC}", b"{}", makepath=True)
        for start in range(0, partitions, 1000):
            chunk = range(start, min(partitions, start + 1000))
            await zk.create_partition_states(TOPIC, {p: LeaderAndIsr(1, 0, [1, 2, 3], 1) for p in chunk})
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        moved = tps[: partitions // 3]
        runs: dict[str, list[tuple[float, float]]] = {"multi_read": [], "single": [], "chunked": [], "each": []}

        async def read(multi: bool) -> None:
            store._multi_read = multi  # the per-znode path is the fallback for servers before 3.6
            states = await zk.get_partition_states_of(tps)
            assert all(s is not None for s in states)
            store._multi_read = True

        async def updates() -> list[tuple[TopicPartition, LeaderAndIsr, int]]:
            current = await zk.get_partition_states_of(moved)
            return [
                (tp, LeaderAndIsr(2, s.leader_epoch + 1, [2, 3], 1), s.zk_version)
                for tp, s in zip(moved, current, strict=True)
                if s is not None
            ]

        async def write(chunked: bool, batch: list[tuple[TopicPartition, LeaderAndIsr, int]]) -> None:
            if chunked:
                results = await zk.update_leader_and_isrs(batch, controller_epoch_zk_version=0)
            else:
                results = await zk._update_each(batch, [], None)
            assert all(isinstance(r, int) for r in results), results[:3]

        for rep in range(reps):
            order = (True, False) if rep % 2 == 0 else (False, True)
            for multi in order:
                runs["multi_read" if multi else "single"].append(await timed(lambda m=multi: read(m)))
            for chunked in order:
                batch = await updates()  # the current versions, read before the clock starts
                runs["chunked" if chunked else "each"].append(await timed(lambda c=chunked, b=batch: write(c, b)))
        return {
            "partitions": partitions,
            "written": len(moved),
            "reps": reps,
            "read": {"multi_read": summary(runs["multi_read"]), "single": summary(runs["single"])},
            "write": {"chunked": summary(runs["chunked"]), "each": summary(runs["each"])},
        }
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with ZooKeeperServer() as server:
        result = asyncio.run(measure(server.connect_string, args.partitions, args.reps))
    json.dump({"machine": machine_info(), "zk_batches": result}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
