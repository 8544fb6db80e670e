"""Fetch sessions (KIP-227): what a follower of many idle partitions costs its leader, with and
without incremental fetch sessions.

Two broker processes on one Apache ZooKeeper (``odradek.cli.cluster.LocalCluster``); one topic of
``--partitions`` partitions, every one led by broker 1 and followed by broker 2 (replica assignment
[1, 2]), nothing produced. After ``--settle`` seconds (the follower in the ISR, its session open)
both processes' CPU (user + system, from ``/proc``) is sampled over ``--seconds``: the follower
long-polls (``replica.fetch.wait.max.ms`` 500), so each second costs the leader two fetches of
every partition. ``sessions``: the default cache (1000 slots): the follower's requests after the
first name no partition and the answers carry none. ``sessionless``:
``max.incremental.fetch.session.cache.slots=0``, so the leader creates no session and every
request and answer lists every partition (what the broker did before sessions). Repeated
``--reps`` times each, alternating; medians reported, with ``leader_cpu_ratio`` = sessions /
sessionless. ``wire_bytes_per_fetch``: the sizes of a Fetch v12 of every partition and its answer,
full (epoch 0) and then incremental (epoch 1), sent on a socket of its own to the leader. One JSON
document on stdout, progress on stderr.

    python bench/fetch_sessions_bench.py [--partitions 1000] [--seconds 10] [--reps 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12 import request as fetch_v12

from odradek.cli.cluster import LocalCluster
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, encode_request

TOPIC = "idle"


def log(message: str) -> None:
    print(f"[fetch-sessions-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _roundtrip(sock: socket.socket, request: bytes) -> bytes:
    """Send one request frame; the response frame without its size prefix."""
    sock.sendall(request)
    head = sock.recv(4, socket.MSG_WAITALL)
    size = struct.unpack(">i", head)[0]
    body = bytearray()
    while len(body) < size:
        body += sock.recv(size - len(body))
    return bytes(body)


def wire_sizes(port: int, partitions: int) -> dict[str, int]:
    """Bytes of a Fetch v12 request and its answer for every partition of the idle topic at its
    end: a full one (epoch 0) and the incremental one after it (epoch 1), on one connection."""
    schema = api_schema(ApiKey.FETCH, 12)

    def request(session_id: int, epoch: int, named: range) -> bytes:
        parts = tuple(
            fetch_v12.FetchPartition(
                partition=p,
                current_leader_epoch=-1,
                fetch_offset=0,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
            for p in named
        )
        body = fetch_v12.FetchRequest(
            replica_id=-1,
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            max_bytes=1 << 24,
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=(fetch_v12.FetchTopic(topic=TOPIC, partitions=parts),) if parts else (),
            forgotten_topics_data=(),
            rack_id="",
        )
        return encode_request(schema, 1, "fetch-sessions-bench", body)

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        full = request(0, 0, range(partitions))
        full_answer = _roundtrip(sock, full)
        # v12 answer: correlation id, header tags (1 byte), throttle time, error code, session id
        session_id = struct.unpack_from(">i", full_answer, 4 + 1 + 4 + 2)[0]
        incremental = request(session_id, 1, range(0))
        incremental_answer = _roundtrip(sock, incremental)
    return {
        "full_request_bytes": len(full),
        "full_answer_bytes": len(full_answer) + 4,
        "incremental_request_bytes": len(incremental),
        "incremental_answer_bytes": len(incremental_answer) + 4,
    }


def run_once(mode: str, partitions: int, seconds: float, settle: float) -> dict[str, Any]:
    slots = "1000" if mode == "sessions" else "0"
    overrides = {
        "max.incremental.fetch.session.cache.slots": slots,
        "replica.lag.time.max.ms": "30000",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "odradek.max.partitions.per.request": str(max(1000, partitions)),
    }
    with tempfile.TemporaryDirectory(prefix="odradek-fetch-sessions-") as base:
        cluster = LocalCluster(2, base, overrides=overrides).start()
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            topic = NewTopic(TOPIC, num_partitions=partitions, replica_assignment=[[1, 2]] * partitions)
            admin.create_topics([topic])[TOPIC].result(120)
            log(f"{mode}: {partitions} partitions created; settling {settle:.0f} s")
            time.sleep(settle)
            leader, follower = cluster.broker(1).pid, cluster.broker(2).pid
            assert leader is not None and follower is not None
            before = (cpu_seconds(leader), cpu_seconds(follower), time.monotonic())
            time.sleep(seconds)
            after = (cpu_seconds(leader), cpu_seconds(follower), time.monotonic())
            elapsed = after[2] - before[2]
            result = {
                "leader_cpu_pct": round(100 * (after[0] - before[0]) / elapsed, 2),
                "follower_cpu_pct": round(100 * (after[1] - before[1]) / elapsed, 2),
            }
            if mode == "sessions":
                result["wire"] = wire_sizes(cluster.broker(1).port, partitions)
            log(f"{mode}: {result}")
            return result
        finally:
            cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {"sessions": [], "sessionless": []}
    for _ in range(args.reps):
        for mode in runs:
            runs[mode].append(run_once(mode, args.partitions, args.seconds, args.settle))
    medians = {
        mode: {
            key: round(statistics.median(r[key] for r in results), 2) for key in ("leader_cpu_pct", "follower_cpu_pct")
        }
        for mode, results in runs.items()
    }
    sessionless = medians["sessionless"]["leader_cpu_pct"]
    report = {
        "partitions": args.partitions,
        "seconds": args.seconds,
        "reps": args.reps,
        "runs": runs,
        "median": medians,
        "wire_bytes_per_fetch": runs["sessions"][0]["wire"],
        "leader_cpu_ratio": round(medians["sessions"]["leader_cpu_pct"] / sessionless, 3) if sessionless else None,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
