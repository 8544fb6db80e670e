"""Coordinator failover: how long the group coordinator takes to load a ``__consumer_offsets``
partition, with and without the log cleaner.

Prints one JSON object. For each ``segment.bytes`` (default: 1 MiB and Kafka's 100 MiB default of
``offsets.topic.segment.bytes``) the benchmark

1. writes ``--commits`` offset commits of ``--keys`` live keys (``--keys / --per-commit`` groups,
   each committing ``--per-commit`` partitions of one topic per OffsetCommit, one batch per
   commit, round robin) straight into a compacted partition log through the storage API, with
   the records the group coordinator itself writes (OffsetCommit key v1, value v3);
2. times the group coordinator's load path (its runtime replays the partition and installs the
   groups: what a coordinator moving after a failure does) over the log as written: the time
   *without the cleaner*;
3. cleans the log with :func:`odradek.storage.cleaner.clean_log` (what the broker's cleaner does
   in its worker processes) and times the same load again over the cleaned log.

The active segment is never cleaned, so at 100 MiB (more than the whole history here) nothing is
cleaned and both loads read every commit. Each load checks it found exactly ``--keys`` offsets.
Load times are given as wall-clock and CPU seconds (the load runs on one thread; CPU time is the
steadier figure on a shared machine). ``active_segment_bytes``: what a cleaned load still reads
beyond the live keys; it is at most ``segment.bytes``, so the worst case is a full one:
``load_full_active_*`` times the load once more commits filled the active segment to just under
``segment.bytes`` (not done when the whole history fits in one segment). The target of the
issue: under 1 s at 1 MiB for 1,000,000 commits of 1,000 keys.

    python bench/coordinator_load.py [--commits 1000000] [--keys 1000] [--per-commit 10]
        [--segment-bytes 1048576,104857600] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from odradek.coordinator.group.config import GroupCoordinatorConfig
from odradek.coordinator.group.coordinator import GroupCoordinator, GroupCoordinatorDeps
from odradek.coordinator.group.schemas import (
    OffsetAndMetadata,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from odradek.coordinator.runtime import LocalInternalLog, RuntimeDeps
from odradek.protocol.records import Record, build_batch
from odradek.storage import Log, LogConfig
from odradek.storage.cleaner import CleanerConfig, clean_log
from odradek.storage.topic_partition import TopicPartition

MIB = 1024 * 1024
TOPIC = "orders"
START_MS = 1_700_000_000_000


class _Metadata:
    """The metadata view of a one-partition ``__consumer_offsets`` led here."""

    def partition_count(self, topic: str) -> int | None:
        return 1

    def leader_of(self, tp: TopicPartition) -> int:
        return 0

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        return ("127.0.0.1", 9092)

    def alive_broker_ids(self) -> list[int]:
        return [0]


async def _no_create(name: str, partitions: int, replication_factor: int, configs: Any) -> None:
    return None


class CommitWriter:
    """Appends the commits of ``keys`` keys, round robin over the groups, to a partition log."""

    def __init__(self, log: Log, keys: int, per_commit: int) -> None:
        self.log = log
        self.groups = max(1, keys // per_commit)
        self.keys = [
            [encode_offset_commit_key(f"group-{g}", TOPIC, p) for p in range(per_commit)] for g in range(self.groups)
        ]
        self.written = 0

    def next_batch(self) -> bytes:
        i = self.written
        ts = START_MS + i
        base = (i // self.groups) * 100
        records = [
            Record(key, encode_offset_commit_value(OffsetAndMetadata(base + p, "", ts)), timestamp_ms=ts)
            for p, key in enumerate(self.keys[i % self.groups])
        ]
        return build_batch(records, timestamp_ms=ts)

    def append(self, batch: bytes) -> None:
        self.log.append_as_leader(batch, 0, origin="coordinator")
        self.log.high_watermark = self.log.log_end_offset
        self.written += 1


def write_commits(directory: Path, segment_bytes: int, commits: int, keys: int, per_commit: int) -> CommitWriter:
    """The partition log with ``commits`` offset commits of ``keys`` keys (see the docstring)."""
    config = LogConfig.from_props(
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(segment_bytes),
            "min.cleanable.dirty.ratio": "0.01",
        }
    )
    log = Log(directory / "__consumer_offsets-0", config, time_ms=lambda: START_MS)
    writer = CommitWriter(log, keys, per_commit)
    for _ in range(commits // per_commit):
        writer.append(writer.next_batch())
    return writer


def fill_active_segment(writer: CommitWriter) -> None:
    """More commits, until the active segment is one batch short of ``segment.bytes``."""
    limit = writer.log.config.segment_bytes
    while True:
        batch = writer.next_batch()
        if writer.log.active_segment.size + len(batch) > limit:
            return
        writer.append(batch)


async def time_load(log: Log, keys: int) -> tuple[float, float]:
    """Seconds (wall clock, and CPU of this process: steadier on a shared machine) the group
    coordinator takes from start-up to owning the partition."""
    deps = RuntimeDeps(LocalInternalLog({0: log}), _Metadata(), _no_create, lambda: START_MS)
    config = GroupCoordinatorConfig(offsets_partitions=1, offsets_replication=1, retention_check_ms=3_600_000)
    coordinator = GroupCoordinator(GroupCoordinatorDeps(config, deps))
    start, cpu = time.perf_counter(), time.process_time()
    await coordinator.startup()
    while coordinator.runtime.epoch(0) is None:
        if not coordinator.runtime.is_loading(0):
            raise RuntimeError("the load failed")
        await asyncio.sleep(0)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    found = sum(len(g.offsets) for g in coordinator.manager.groups.values())
    await coordinator.shutdown()
    if found != keys:
        raise RuntimeError(f"the load found {found} offsets, expected {keys}")
    return elapsed, cpu


def run_one(base: Path, segment_bytes: int, args: argparse.Namespace) -> dict[str, Any]:
    keys = max(1, args.keys // args.per_commit) * args.per_commit
    directory = Path(tempfile.mkdtemp(dir=base))
    try:
        start = time.perf_counter()
        writer = write_commits(directory, segment_bytes, args.commits, args.keys, args.per_commit)
        log = writer.log
        write_s = time.perf_counter() - start
        before = {"bytes": log.size_in_bytes, "segments": log.num_segments}
        uncleaned_s, uncleaned_cpu = asyncio.run(time_load(log, keys))
        stats = clean_log(log, now_ms=START_MS + args.commits + 1, config=CleanerConfig())
        after = {
            "bytes": log.size_in_bytes,
            "segments": log.num_segments,
            "active_segment_bytes": log.active_segment.size,
        }
        cleaned_s, cleaned_cpu = asyncio.run(time_load(log, keys))
        full: dict[str, Any] = {}
        if log.num_segments > 1:
            fill_active_segment(writer)
            full_s, full_cpu = asyncio.run(time_load(log, keys))
            full = {
                "load_full_active_s": round(full_s, 3),
                "load_full_active_cpu_s": round(full_cpu, 3),
                "full_active_segment_bytes": log.active_segment.size,
            }
        log.close()
        return {
            "segment_bytes": segment_bytes,
            "write_s": round(write_s, 2),
            "log_before_clean": before,
            "log_after_clean": after,
            "clean": {
                "elapsed_s": round(stats.elapsed_s, 3),
                "bytes_read": stats.bytes_read,
                "bytes_written": stats.bytes_written,
                "records_read": stats.records_read,
                "records_retained": stats.records_retained,
            },
            "load_without_cleaner_s": round(uncleaned_s, 3),
            "load_without_cleaner_cpu_s": round(uncleaned_cpu, 3),
            "load_after_clean_s": round(cleaned_s, 3),
            "load_after_clean_cpu_s": round(cleaned_cpu, 3),
            **full,
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1_000_000, help="offset commit records written")
    parser.add_argument("--keys", type=int, default=1000, help="live keys (group, partition)")
    parser.add_argument("--per-commit", type=int, default=10, help="partitions per OffsetCommit (records per batch)")
    parser.add_argument("--segment-bytes", default=f"{MIB},{100 * MIB}", help="comma-separated segment.bytes")
    parser.add_argument("--dir", default=None, help="where to write the logs (a temporary directory by default)")
    args = parser.parse_args()
    base = Path(args.dir or tempfile.gettempdir())
    runs = [run_one(base, int(size), args) for size in args.segment_bytes.split(",")]
    result = {
        "benchmark": "coordinator_load",
        "python": platform.python_version(),
        "commits": args.commits,
        "keys": args.keys,
        "per_commit": args.per_commit,
        "runs": runs,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
