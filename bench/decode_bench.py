"""Decode cost of Produce and Fetch requests: before bounded reading against now.

Prints one JSON object. ``cases``: per request shape, microseconds to decode a frame into its
header and request (``peek_api``, ``api_schema``, ``parse_request_header``, ``decode_request``)
with the code before bounded reading (``bench/decode_baseline.py``: kio's native reader on an
unchecked body) and with today's codec (bounded walk, then the native reader), the walk's own
cost, and the difference in percent. Each figure is the best of ``--repeats`` timings of
``--number`` decodes, before and after interleaved (best-of filters scheduler noise).

``request_path``: the same comparison on the broker's whole request path: ``RequestHandler.handle``
on a broker in this process (appends, or fetches of empty partitions at their end answered at
once; response encoding and all) with the handler's
decode functions swapped for the baseline ones ("before") and today's ("after"), microseconds
per request, best of ``--repeats`` runs.

    python bench/decode_bench.py [--repeats 9] [--number 20000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
import timeit
from typing import Any

import decode_baseline  # type: ignore[import-not-found]
from odradek.protocol import codec
from odradek.protocol.codec import api_schema, encode_request
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


def fetch_frame(version: int, partitions: int, offset: int = 123456, first: int = 0) -> bytes:
    schema = api_schema(1, version)
    pcls = nested(schema.request_type, "FetchPartition")
    tcls = nested(schema.request_type, "FetchTopic")
    parts = tuple(
        build(
            pcls,
            partition=first + p,
            current_leader_epoch=0,
            fetch_offset=offset,
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
    "fetch v12 1x10": lambda: fetch_frame(12, 10),
}


def _decode_with(codec: Any, frame: bytes) -> Any:
    api_key, version, _ = codec.peek_api(frame)
    schema = api_schema(api_key, version)
    header = codec.parse_request_header(frame, schema.flexible)
    return codec.decode_request(schema, frame, header.size)


def measure(frame: bytes, repeats: int, number: int) -> dict[str, float]:
    schema = api_schema(*codec.peek_api(frame)[:2])
    offset = codec.parse_request_header(frame, schema.flexible).size
    assert _decode_with(decode_baseline, frame) == _decode_with(codec, frame)
    check, end = schema.check_request, len(frame)
    timers = {
        "before_us": lambda: _decode_with(decode_baseline, frame),
        "after_us": lambda: _decode_with(codec, frame),
        "walk_us": lambda: check(frame, offset, end),
    }
    scale = max(1, number // max(1, len(frame) // 4096))
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(repeats):
        for name, fn in timers.items():
            best[name] = min(best[name], timeit.timeit(fn, number=scale))
    out = {name: round(t / scale * 1e6, 3) for name, t in best.items()}
    out["overhead_pct"] = round((out["after_us"] / out["before_us"] - 1) * 100, 1)
    out["frame_bytes"] = len(frame)
    return out


def request_path(repeats: int, number: int) -> dict[str, dict[str, float]]:
    """Microseconds per request through ``RequestHandler.handle``, baseline decode vs today's."""
    import asyncio

    from odradek.server import request_handler
    from odradek.server.runner import BrokerRunner
    from odradek.server.session import PLAINTEXT_SESSION

    class _Conn:
        peer = "127.0.0.1:1"
        connection_id = "bench"
        session = PLAINTEXT_SESSION

    frames = {
        "produce v9 1x1 100B acks=1": produce_frame(9, 1, 1, 100, acks=1),
        "produce v9 1x10 1KiB acks=1": produce_frame(9, 10, 10, 100, acks=1),
        "fetch v12 1x1": fetch_frame(12, 1, offset=0, first=10),
        "fetch v12 1x100": fetch_frame(12, 100, offset=0, first=10),
    }
    names = ("peek_api", "parse_request_header", "decode_request")
    out: dict[str, dict[str, float]] = {}
    with BrokerRunner(overrides={"num.partitions": "110"}) as runner:
        broker = runner.broker
        assert broker is not None and runner.loop is not None

        async def timed(frame: bytes) -> float:
            handle, conn = broker.handler.handle, _Conn()
            t0 = time.perf_counter()
            for _ in range(number):
                await handle(frame, conn)  # type: ignore[arg-type]
            return (time.perf_counter() - t0) / number * 1e6

        def run(frame: bytes, impl: Any) -> float:
            for name in names:
                setattr(request_handler, name, getattr(impl, name))
            return asyncio.run_coroutine_threadsafe(timed(frame), runner.loop).result()  # type: ignore[arg-type]

        run(frames["produce v9 1x1 100B acks=1"], codec)  # creates the topic
        for label, frame in frames.items():
            figures: dict[str, list[float]] = {"before_us": [], "after_us": []}
            for _ in range(repeats):
                figures["before_us"].append(run(frame, decode_baseline))
                figures["after_us"].append(run(frame, codec))
            best = {k: round(min(v), 2) for k, v in figures.items()}
            best["overhead_pct"] = round((best["after_us"] / best["before_us"] - 1) * 100, 1)
            out[label] = best
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    results = {name: measure(make(), args.repeats, args.number) for name, make in CASES.items()}
    path = request_path(args.repeats, max(1000, args.number // 10))
    print(json.dumps({"bench": "decode", "cases": results, "request_path": path}, indent=2))


if __name__ == "__main__":
    main()
