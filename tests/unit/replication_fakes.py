"""Fakes and builders shared by the ReplicaManager and fetcher unit tests (no sockets, no processes)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from odradek.client.connection import RequestBuilder
from odradek.protocol.records import Record, build_batch
from odradek.replication.partition import Partition, PartitionState
from odradek.storage import Log, TopicPartition

from .storage_support import log_config

TP = TopicPartition("t", 0)


def batch(n: int = 1) -> bytes:
    return build_batch([Record(None, b"v%d" % i) for i in range(n)])


class IsrWrites:
    """The partition state znode: conditional writes on its version."""

    def __init__(self, version: int = 0) -> None:
        self.version = version
        self.written: list[list[int]] = []

    async def __call__(self, tp: TopicPartition, state: PartitionState) -> int | None:
        if state.zk_version != self.version:
            return None
        self.version += 1
        self.written.append(list(state.isr))
        return self.version


class RecordingFetchers:
    """The fetcher manager as the replica manager uses it, recording each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, TopicPartition, int | None]] = []
        self.assigned: dict[TopicPartition, tuple[int, int]] = {}

    def add_partition(self, tp: TopicPartition, leader_id: int) -> None:
        self.calls.append(("add", tp, leader_id))
        self.assigned[tp] = (leader_id, 0)

    def remove_partition(self, tp: TopicPartition) -> None:
        self.calls.append(("remove", tp, None))
        self.assigned.pop(tp, None)

    async def shutdown(self) -> None:
        self.assigned.clear()


class FakeConnection:
    """A leader as a fetcher sees it: ``send`` answers with the queued responses in order and
    records the requests; ``builder`` builds real request messages."""

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.requests: list[Any] = []
        self.closed = False

    def builder(self, api_key: int, min_version: int = 0, max_version: int | None = None) -> RequestBuilder:
        return RequestBuilder(api_key, max_version if max_version is not None else min_version)

    async def send(self, request: Any, api_version: int | None = None, *, timeout_ms: int | None = None) -> Any:
        self.requests.append(request)
        return self.responses.pop(0)

    async def close(self) -> None:
        self.closed = True


def follower_with_epochs(tmp_path: Path, epochs: list[tuple[int, int]], broker_id: int = 2) -> Partition:
    """A follower of broker 1 whose log holds ``count`` one-record batches per (epoch, count),
    written while it led those epochs, so its epoch cache starts each epoch where Kafka's would."""
    log = Log(tmp_path / f"{TP.topic}-{TP.partition}", log_config())
    partition = Partition(TP, broker_id, log, PartitionState(-1, -1, [], []), replica_lag_time_max_ms=1000)
    for epoch, count in epochs:
        partition.make_leader(PartitionState(broker_id, epoch, [broker_id], [1, broker_id]), now_ms=0)
        for _ in range(count):
            partition.log.append_as_leader(batch(), epoch)
    last = epochs[-1][0] if epochs else 0
    partition.make_follower(PartitionState(1, last + 1, [1, broker_id], [1, broker_id]))
    return partition


def epoch_answer(error: int, leader_epoch: int, end_offset: int, tp: TopicPartition = TP) -> Any:
    """An OffsetForLeaderEpoch response naming one partition."""
    partition = SimpleNamespace(
        partition=tp.partition, error_code=error, leader_epoch=leader_epoch, end_offset=end_offset
    )
    return SimpleNamespace(topics=[SimpleNamespace(topic=tp.topic, partitions=[partition])])


def fetched(
    error: int = 0,
    *,
    records: bytes | None = b"",
    high_watermark: int = 0,
    log_start_offset: int = 0,
    diverging: tuple[int, int] | None = None,
) -> Any:
    """One partition of a Fetch response."""
    return SimpleNamespace(
        partition_index=TP.partition,
        error_code=error,
        records=records,
        high_watermark=high_watermark,
        log_start_offset=log_start_offset,
        diverging_epoch=SimpleNamespace(epoch=diverging[0], end_offset=diverging[1]) if diverging else None,
    )


async def settle(rounds: int = 5) -> None:
    """Let tasks scheduled on the loop run."""
    for _ in range(rounds):
        await asyncio.sleep(0)
