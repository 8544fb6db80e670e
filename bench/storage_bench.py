"""Storage micro-benchmark: append, sequential read and index lookup speed of one partition log.

Prints one JSON object. Uses only ``odradek.storage`` (and the batch encoder to build payloads
once). Runs in well under 20 s on a small machine; sizes can be scaled with ``--scale``.

    python bench/storage_bench.py [--scale 1.0] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from odradek.protocol.records import Record, build_batch, iter_batches
from odradek.storage import Log, LogConfig

MB = 1024 * 1024


def payload(records: int, record_size: int) -> bytes:
    value = bytes(random.Random(1).getrandbits(8) for _ in range(record_size))
    return build_batch([Record(None, value, timestamp_ms=1_700_000_000_000 + i) for i in range(records)])


def bench_append(directory: Path, batch: bytes, total_bytes: int) -> tuple[Log, float, int]:
    log = Log(directory, LogConfig.from_props({}))
    n = max(1, total_bytes // len(batch))
    start = time.perf_counter()
    for _ in range(n):
        log.append_as_leader(batch)
    elapsed = time.perf_counter() - start
    return log, (n * len(batch)) / MB / elapsed, n


def bench_read(log: Log, max_bytes: int) -> float:
    offset, total = 0, 0
    start = time.perf_counter()
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).records_bytes()
        total += len(data)
        offset = _next_offset(data, offset)
    return total / MB / (time.perf_counter() - start)


def _next_offset(data: bytes, offset: int) -> int:
    """The offset after the last batch of ``data``, from batch headers only."""
    last = offset
    for _, h in iter_batches(data):
        last = h.last_offset + 1
    return last


def bench_lookups(log: Log, count: int) -> tuple[float, float]:
    rng = random.Random(3)
    targets = [rng.randrange(log.log_end_offset) for _ in range(count)]
    index = log.active_segment.offset_index
    start = time.perf_counter()
    for t in targets:
        index.lookup(t)
    lookup_us = (time.perf_counter() - start) / count * 1e6
    start = time.perf_counter()
    for t in targets:
        log.read(t, 1).records_bytes()
    read_us = (time.perf_counter() - start) / count * 1e6
    return lookup_us, read_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    try:
        big = payload(1000, 1024)  # 1 KiB records in ~1 MB batches
        small = payload(16, 1024)  # 1 KiB records in ~16 KiB batches
        log_big, big_mbs, big_n = bench_append(root / "big-0", big, int(512 * MB * args.scale))
        log_small, small_mbs, small_n = bench_append(root / "small-0", small, int(128 * MB * args.scale))
        read_big = bench_read(log_big, MB)
        read_small = bench_read(log_small, MB)
        lookup_us, random_read_us = bench_lookups(log_small, 20_000)
        result = {
            "append_1MiB_batches_MBps": round(big_mbs, 1),
            "append_1MiB_batches_count": big_n,
            "append_16KiB_batches_MBps": round(small_mbs, 1),
            "append_16KiB_batches_count": small_n,
            "read_1MiB_fetches_of_1MiB_batches_MBps": round(read_big, 1),
            "read_1MiB_fetches_of_16KiB_batches_MBps": round(read_small, 1),
            "offset_index_entries": log_small.active_segment.offset_index.entries,
            "offset_index_lookup_us": round(lookup_us, 2),
            "random_read_one_batch_us": round(random_read_us, 2),
        }
        log_big.close()
        log_small.close()
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
