"""Decode cost of Produce and Fetch requests: kio's native reader alone vs the bounded walk + reader.

Prints one JSON object: per request shape, the microseconds per decode of the native reader
alone (the path before bounded reading) and of ``codec.decode_request`` (bounded walk, then the
native reader), the walk's own cost, and the overhead in percent. Each figure is the best of
``--repeats`` timings of ``--number`` decodes (best-of filters scheduler noise).

``request_path``: the same comparison on the broker's whole request path for a small Produce
(one 100 B record, acks=1) and a Fetch that returns at once: ``RequestHandler.handle`` on a
broker in this process (append, response encoding and all), with the walk switched off
("native") and on ("checked"), microseconds per request, best of ``--repeats`` runs.

    python bench/decode_bench.py [--repeats 7] [--number 20000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
import timeit
from typing import Any

from odradek.protocol.codec import api_schema, decode_request, encode_request, parse_request_header
from odradek.protocol.messages import build, nested
from odradek.protocol.records import Record, build_batch


def _batch(records: int, value_bytes: int) -> bytes:
    value = b"v" * value_bytes
    return build_batch([Record(b"k%d" % i, value, timestamp_ms=1_700_000_000_000 + i) for i in range(records)])


def produce_frame(version: int, partitions: int, records: int, value_bytes: int, acks: int = -1) -> bytes:
    schema = api_schema(0, version)
    batch = _batch(records, value_bytes)
    pcls = nested(schema.request_type, "PartitionProduceData")
    tcls = nested(schema.request_type, "TopicProduceData")
    parts = tuple(build(pcls, index=p, records=batch) for p in range(partitions))
    req = build(
        schema.request_type,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(build(tcls, name="page_visits", partition_data=parts),),
    )
    return encode_request(schema, 1, "rdkafka", req)[4:]


def fetch_frame(version: int, partitions: int) -> bytes:
    schema = api_schema(1, version)
    pcls = nested(schema.request_type, "FetchPartition")
    tcls = nested(schema.request_type, "FetchTopic")
    parts = tuple(
        build(
            pcls,
            partition=p,
            current_leader_epoch=0,
            fetch_offset=123456,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for p in range(partitions)
    )
    req = build(
        schema.request_type,
        cluster_id=None,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=0,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(build(tcls, topic="page_visits", partitions=parts),),
        forgotten_topics_data=(),
        rack_id="",
    )
    return encode_request(schema, 1, "rdkafka", req)[4:]


CASES: dict[str, Any] = {
    "produce v9 1x1 100B": lambda: produce_frame(9, 1, 1, 100),
    "produce v9 1x1 16KiB": lambda: produce_frame(9, 1, 160, 100),
    "produce v9 1x1 1MiB": lambda: produce_frame(9, 1, 1024, 1000),
    "produce v9 1x10 1KiB": lambda: produce_frame(9, 10, 10, 100),
    "produce v7 1x1 16KiB": lambda: produce_frame(7, 1, 160, 100),
    "fetch v12 1x1": lambda: fetch_frame(12, 1),
    "fetch v12 1x100": lambda: fetch_frame(12, 100),
    "fetch v11 1x10": lambda: fetch_frame(11, 10),
    "fetch v4 1x100": lambda: fetch_frame(4, 100),
}


def measure(frame: bytes, repeats: int, number: int) -> dict[str, float]:
    api_key, version = int.from_bytes(frame[0:2], "big"), int.from_bytes(frame[2:4], "big")
    schema = api_schema(api_key, version)
    header = parse_request_header(frame, schema.flexible)
    offset = header.size
    view = memoryview(frame).toreadonly()
    read, check = schema.read_request, schema.check_request
    end = len(view)

    def native() -> None:
        read(memoryview(frame).toreadonly(), offset)

    def checked() -> None:
        decode_request(schema, frame, offset)

    def walk() -> None:
        check(view, offset, end)

    scale = max(1, number // max(1, len(frame) // 4096))
    out = {}
    for name, fn in (("native_us", native), ("checked_us", checked), ("walk_us", walk)):
        best = min(timeit.repeat(fn, repeat=repeats, number=scale))
        out[name] = round(best / scale * 1e6, 3)
    out["overhead_pct"] = round((out["checked_us"] / out["native_us"] - 1) * 100, 1)
    out["frame_bytes"] = len(frame)
    return out


def request_path(repeats: int, number: int) -> dict[str, dict[str, float]]:
    """Microseconds per request through ``RequestHandler.handle`` with and without the walk."""
    import asyncio

    from odradek.server.runner import BrokerRunner

    class _Conn:
        peer = "127.0.0.1:1"
        connection_id = "bench"

    frames = {"produce v9 1x1 100B acks=1": produce_frame(9, 1, 1, 100, acks=1), "fetch v12 1x1": fetch_frame(12, 1)}
    out: dict[str, dict[str, float]] = {}
    with BrokerRunner(overrides={"num.partitions": "1"}) as runner:
        broker = runner.broker
        assert broker is not None and runner.loop is not None

        async def timed(frame: bytes) -> float:
            handle, conn = broker.handler.handle, _Conn()
            t0 = time.perf_counter()
            for _ in range(number):
                await handle(frame, conn)  # type: ignore[arg-type]
            return (time.perf_counter() - t0) / number * 1e6

        def run(frame: bytes) -> float:
            return asyncio.run_coroutine_threadsafe(timed(frame), runner.loop).result()  # type: ignore[arg-type]

        run(frames["produce v9 1x1 100B acks=1"])  # creates the topic
        for name, frame in frames.items():
            schema = api_schema(int.from_bytes(frame[0:2], "big"), int.from_bytes(frame[2:4], "big"))
            check = schema.check_request
            figures: dict[str, list[float]] = {"native_us": [], "checked_us": []}
            for _ in range(repeats):
                object.__setattr__(schema, "check_request", lambda buf, pos, end: pos)
                figures["native_us"].append(run(frame))
                object.__setattr__(schema, "check_request", check)
                figures["checked_us"].append(run(frame))
            best = {k: round(min(v), 2) for k, v in figures.items()}
            best["overhead_pct"] = round((best["checked_us"] / best["native_us"] - 1) * 100, 1)
            out[name] = best
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    results = {name: measure(make(), args.repeats, args.number) for name, make in CASES.items()}
    path = request_path(args.repeats, max(1000, args.number // 10))
    print(json.dumps({"bench": "decode", "cases": results, "request_path": path}, indent=2))


if __name__ == "__main__":
    main()
