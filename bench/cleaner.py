"""Log cleaner benchmark: throughput of one clean (one worker's worth of CPU) on keyed data.

Prints one JSON object. Two cases by default, written as producers would (batches of 100
records, uncompressed, CreateTime), every segment except the active one cleanable:

* ``1KiB``: 1 KiB records over 10,000 keys (target >= 50 MB/s of log read per cleaner);
* ``100B``: 100 B records over 10,000 keys (target >= 200,000 records/s).

Figures: MB/s and records/s over the bytes and records of the log the clean reads (its dirty
section), the clean's elapsed time (map + rewrite + swap), bytes kept; the same per CPU second
of the cleaning process (``*_per_cpu_s``: what one cleaner thread does when it has a core, the
figure to read on a shared machine). ``--codec`` cleans
compressed batches instead (1 gzip, 2 snappy, 3 lz4, 4 zstd).

``--latency`` adds the produce latency on another partition while the broker cleans: a real
broker process (``bench/common.py``), a compacted topic ``table`` filled with ``--latency-mb``
MiB of 100 B records over 10,000 keys (16 MiB segments, ``min.cleanable.dirty.ratio=1.0`` so
nothing is cleaned yet), then one producer sending single records (acks=1, one at a time) to a
topic ``probe``: first without cleaning, then after the ratio of ``table`` is set to 0.01 until
the broker's ``cleaner-offset-checkpoint`` names ``table`` (the clean is done). p50/p99 of both
phases and their ratio (target: p99 within 2x).

    python bench/cleaner.py [--mb 64] [--codec 0] [--dir /tmp] [--latency] [--latency-mb 128]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from odradek.protocol.records import Record, build_batch
from odradek.storage import Log, LogConfig
from odradek.storage.cleaner import CleanerConfig, clean_log

MB = 1024 * 1024
KEYS = 10_000
BATCH = 100


def fill(directory: Path, record_size: int, total_bytes: int, codec: int) -> tuple[Log, int]:
    config = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": str(32 * MB)})
    log = Log(directory, config)
    rng = random.Random(7)
    value = os.urandom(record_size - 16) if codec == 0 else b"v" * (record_size - 16)
    offset = 0
    now = 1_700_000_000_000
    while log.size_in_bytes < total_bytes:
        records = [
            Record(b"key-%08d" % rng.randrange(KEYS), value, timestamp_ms=now + offset + i) for i in range(BATCH)
        ]
        log.append_as_leader(build_batch(records, compression=codec, timestamp_ms=now))
        offset += BATCH
    log.roll()
    log.high_watermark = log.log_end_offset
    return log, offset


def case(base: Path, name: str, record_size: int, total_bytes: int, codec: int) -> dict[str, object]:
    directory = base / f"bench-{name}-0"
    log, records = fill(directory, record_size, total_bytes, codec)
    size = log.size_in_bytes
    start, cpu_start = time.perf_counter(), time.process_time()
    stats = clean_log(log, now_ms=1_700_000_000_000 + records + 1, config=CleanerConfig())
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    result = {
        "record_bytes": record_size,
        "codec": codec,
        "log_mb": round(size / MB, 1),
        "records": records,
        "elapsed_s": round(elapsed, 3),
        "mb_per_s": round(size / MB / elapsed, 1),
        "records_per_s": round(records / elapsed),
        "cpu_s": round(cpu, 3),
        "mb_per_cpu_s": round(size / MB / cpu, 1),
        "records_per_cpu_s": round(records / cpu),
        "bytes_written": stats.bytes_written,
        "records_retained": stats.records_retained,
        "segments_after": log.num_segments,
    }
    log.close()
    shutil.rmtree(directory, ignore_errors=True)
    return result


def _probe(producer: object, topic: str, seconds: float, until: object = None) -> list[float]:
    """Send one record at a time to ``topic`` for ``seconds`` (or until ``until()``); latencies in ms."""
    out: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.perf_counter()
        producer.produce(topic, value=b"p" * 100, partition=0)  # type: ignore[attr-defined]
        producer.flush(10)  # type: ignore[attr-defined]
        out.append((time.perf_counter() - start) * 1000)
        if until is not None and until():  # type: ignore[operator]
            break
    return out


def latency_case(total_mb: int) -> dict[str, object]:
    """Produce latency on ``probe`` without and during a clean of ``table`` (module docstring)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    from common import OdradekBroker, create_topic, percentiles

    broker = OdradekBroker(overrides={"log.cleaner.backoff.ms": "200"}).start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        table_config = {
            "cleanup.policy": "compact",
            "segment.bytes": str(16 * MB),
            "min.cleanable.dirty.ratio": "1.0",  # a log is cleaned when its ratio exceeds this: never
        }
        admin.create_topics([NewTopic("table", 1, 1, config=table_config)])["table"].result(30)
        create_topic(bootstrap, "probe", 1)
        bulk = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": 1})
        rng = random.Random(5)
        value = b"v" * 84
        written = 0
        fill_start = time.monotonic()
        while written < total_mb * MB:
            for _ in range(10_000):
                while True:
                    try:
                        bulk.produce("table", key=b"key-%08d" % rng.randrange(KEYS), value=value, partition=0)
                        break
                    except BufferError:
                        bulk.poll(0.05)
            written += 10_000 * 100
            bulk.poll(0)
        bulk.flush(120)
        fill_s = time.monotonic() - fill_start
        probe = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
        _probe(probe, "probe", 2.0)  # warm-up
        baseline = _probe(probe, "probe", 10.0)
        checkpoint = broker.data_dir / "cleaner-offset-checkpoint"

        def cleaned() -> bool:
            return checkpoint.exists() and "table 0 " in checkpoint.read_text()

        resource = ConfigResource("topic", "table", set_config={**table_config, "min.cleanable.dirty.ratio": "0.01"})
        clean_start = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            admin.alter_configs([resource])[resource].result(30)
        during = _probe(probe, "probe", 300.0, cleaned)
        clean_s = time.monotonic() - clean_start
        base_p, during_p = percentiles(baseline), percentiles(during)
        return {
            "table_mb": total_mb,
            "fill_s": round(fill_s, 1),
            "clean_s_incl_backoff": round(clean_s, 2),
            "cleaned": cleaned(),
            "baseline_ms": {k: round(v, 2) for k, v in base_p.items()},
            "during_clean_ms": {k: round(v, 2) for k, v in during_p.items()},
            "samples": [len(baseline), len(during)],
            "p99_ratio": round(during_p["p99"] / base_p["p99"], 2) if base_p and during_p else None,
        }
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="log size per case (MiB)")
    parser.add_argument("--codec", type=int, default=0)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--latency", action="store_true", help="also measure produce latency during a clean")
    parser.add_argument("--latency-mb", type=int, default=128)
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="odradek-cleaner-bench-", dir=args.dir))
    try:
        out: dict[str, object] = {}
        if not args.skip_throughput:
            out["1KiB"] = case(base, "1k", 1024, args.mb * MB, args.codec)
            out["100B"] = case(base, "100b", 100, args.mb * MB, args.codec)
        if args.latency:
            out["produce_latency_during_clean"] = latency_case(args.latency_mb)
        print(json.dumps(out, indent=2))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
