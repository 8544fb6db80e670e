"""Log cleaner benchmark: throughput of one clean (one worker's worth of CPU) on keyed data.

Prints one JSON object. Two cases by default, written as producers would (batches of 100
records, uncompressed, CreateTime), every segment except the active one cleanable:

* ``1KiB``: 1 KiB records over 10,000 keys (target >= 50 MB/s of log read per cleaner);
* ``100B``: 100 B records over 10,000 keys (target >= 200,000 records/s).

Figures: MB/s and records/s over the bytes and records of the log the clean reads (its dirty
section), the clean's elapsed time (map + rewrite + swap), bytes kept. ``--codec`` cleans
compressed batches instead (1 gzip, 2 snappy, 3 lz4, 4 zstd).

    python bench/cleaner.py [--mb 64] [--codec 0] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
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
    start = time.perf_counter()
    stats = clean_log(log, now_ms=1_700_000_000_000 + records + 1, config=CleanerConfig())
    elapsed = time.perf_counter() - start
    result = {
        "record_bytes": record_size,
        "codec": codec,
        "log_mb": round(size / MB, 1),
        "records": records,
        "elapsed_s": round(elapsed, 3),
        "mb_per_s": round(size / MB / elapsed, 1),
        "records_per_s": round(records / elapsed),
        "bytes_written": stats.bytes_written,
        "records_retained": stats.records_retained,
        "segments_after": log.num_segments,
    }
    log.close()
    shutil.rmtree(directory, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="log size per case (MiB)")
    parser.add_argument("--codec", type=int, default=0)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="odradek-cleaner-bench-", dir=args.dir))
    try:
        out = {
            "1KiB": case(base, "1k", 1024, args.mb * MB, args.codec),
            "100B": case(base, "100b", 100, args.mb * MB, args.codec),
        }
        print(json.dumps(out, indent=2))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
