"""Decode cost of Produce and Fetch requests: kio's native reader alone vs the bounded walk + reader.

Prints one JSON object: per request shape, the microseconds per decode of the native reader
alone (the path before bounded reading) and of ``codec.decode_request`` (bounded walk, then the
native reader), the walk's own cost, and the overhead in percent. Each figure is the best of
``--repeats`` timings of ``--number`` decodes (best-of filters scheduler noise).

    python bench/decode_bench.py [--repeats 7] [--number 20000]
"""

from __future__ import annotations

import argparse
import json
import timeit
from typing import Any

from odradek.protocol.codec import api_schema, decode_request, encode_request, parse_request_header
from odradek.protocol.messages import build, nested
from odradek.protocol.records import Record, build_batch


def _batch(records: int, value_bytes: int) -> bytes:
    value = b"v" * value_bytes
    return build_batch([Record(b"k%d" % i, value, timestamp_ms=1_700_000_000_000 + i) for i in range(records)])


def produce_frame(version: int, partitions: int, records: int, value_bytes: int) -> bytes:
    schema = api_schema(0, version)
    batch = _batch(records, value_bytes)
    pcls = nested(schema.request_type, "PartitionProduceData")
    tcls = nested(schema.request_type, "TopicProduceData")
    parts = tuple(build(pcls, index=p, records=batch) for p in range(partitions))
    req = build(
        schema.request_type,
        transactional_id=None,
        acks=-1,
        timeout=__import__("datetime").timedelta(seconds=30),
        topic_data=(build(tcls, name="page_visits", partition_data=parts),),
    )
    return encode_request(schema, 1, "rdkafka", req)[4:]


def fetch_frame(version: int, partitions: int) -> bytes:
    import datetime

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
        min_bytes=1,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    results = {name: measure(make(), args.repeats, args.number) for name, make in CASES.items()}
    print(json.dumps({"bench": "decode", "cases": results}, indent=2))


if __name__ == "__main__":
    main()
