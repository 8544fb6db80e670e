"""Fakes of the coordinators' typed dependencies (:mod:`odradek.coordinator.runtime`): a manual
clock and timer wheel, an in-memory internal-topic log with leader epochs, a metadata view and
topic creation. No sockets, no threads."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from odradek.coordinator.runtime import RuntimeDeps
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import iter_batches, stamp_base_offset
from odradek.storage.topic_partition import TopicPartition


class FakeTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time only moves with :meth:`advance`; timers due by then run in order."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self.now = start_ms
        self._heap: list[tuple[int, int, FakeTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def time_ms(self) -> int:
        return self.now

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer()
        heapq.heappush(self._heap, (self.now + max(delay_ms, 0), next(self._seq), timer, fn))
        return timer

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while self._heap and self._heap[0][0] <= target:
            due, _, timer, fn = heapq.heappop(self._heap)
            self.now = max(self.now, due)
            if not timer.cancelled:
                fn()
        self.now = target


class MemoryOffsetsLog:
    """An internal topic's partitions in memory: batches per partition, offsets stamped as a
    leader would. ``epochs`` is the leader epoch per partition (absent: ``default_epoch``; None:
    not led here). ``fail_with`` makes appends fail; ``hold`` makes durability waits block until
    released; ``durable_error`` is what durability waits answer."""

    def __init__(self, default_epoch: int | None = 0) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.epochs: dict[int, int | None] = {}
        self.default_epoch = default_epoch
        self.fail_with: ErrorCode | None = None
        self.durable_error = ErrorCode.none
        self.hold: asyncio.Event | None = None

    def leader_epoch(self, partition: int) -> int | None:
        return self.epochs.get(partition, self.default_epoch)

    def append(self, partition: int, records: bytes) -> tuple[ErrorCode, int]:
        if self.fail_with is not None:
            return self.fail_with, -1
        base = self.next_offset.get(partition, 0)
        buf = bytearray(records)
        stamp_base_offset(buf, 0, base, 0)
        (_, header), *_ = list(iter_batches(buf))
        self.batches.setdefault(partition, []).append(bytes(buf))
        self.next_offset[partition] = header.next_offset
        return ErrorCode.none, header.last_offset

    async def wait_durable(self, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        if self.hold is not None:
            await self.hold.wait()
        return self.durable_error

    def bounds(self, partition: int) -> tuple[int, int]:
        if self.leader_epoch(partition) is None:
            raise KafkaError(f"partition {partition} is not here")
        return 0, self.next_offset.get(partition, 0)

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        out = b""
        for batch in self.batches.get(partition, []):
            (_, header), *_ = list(iter_batches(batch))
            if header.last_offset >= offset:
                out += batch
                if len(out) >= max_bytes:
                    break
        return out


class FakeMetadata:
    """A metadata view: topic partition counts, leaders and live brokers, set by the test."""

    def __init__(self, brokers: Mapping[int, tuple[str, int]] | None = None) -> None:
        self.partitions: dict[str, int] = {}
        self.leaders: dict[TopicPartition, int] = {}
        self.brokers: dict[int, tuple[str, int]] = dict(brokers or {0: ("127.0.0.1", 9092)})

    def partition_count(self, topic: str) -> int | None:
        return self.partitions.get(topic)

    def topic_id(self, name: str) -> uuid.UUID | None:
        return uuid.uuid5(uuid.NAMESPACE_DNS, name) if name in self.partitions else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n in self.partitions if uuid.uuid5(uuid.NAMESPACE_DNS, n) == topic_id), None)

    def leader_of(self, tp: TopicPartition) -> int:
        return self.leaders.get(tp, -1)

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        return self.brokers.get(broker_id)

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def add_topic(self, name: str, partitions: int, leader: int = 0) -> None:
        self.partitions[name] = partitions
        for p in range(partitions):
            self.leaders[TopicPartition(name, p)] = leader


class FakeTopicCreator:
    """Topic creation that records its calls and makes the topic known to ``metadata`` (led by
    ``leader``); ``fail_with`` makes it raise."""

    def __init__(self, metadata: FakeMetadata, leader: int = 0) -> None:
        self.metadata = metadata
        self.leader = leader
        self.calls: list[tuple[str, int, int, dict[str, str]]] = []
        self.fail_with: KafkaError | None = None

    async def __call__(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]) -> None:
        self.calls.append((name, partitions, replication_factor, dict(configs)))
        if self.fail_with is not None:
            raise self.fail_with
        self.metadata.add_topic(name, partitions, self.leader)


def runtime_deps(
    log: MemoryOffsetsLog, clock: ManualClock, metadata: FakeMetadata | None = None
) -> tuple[RuntimeDeps, FakeMetadata, FakeTopicCreator]:
    """The runtime's dependencies over fakes (and the metadata view and topic creator used)."""
    metadata = metadata or FakeMetadata()
    creator = FakeTopicCreator(metadata)
    return RuntimeDeps(log, metadata, creator, clock.time_ms, clock.call_later), metadata, creator


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def run(coro_fn: Callable[..., Any]) -> Callable[..., None]:
    """Run an ``async def`` test on a fresh event loop."""

    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(coro_fn(*args, **kwargs))

    wrapper.__name__ = coro_fn.__name__
    wrapper.__doc__ = coro_fn.__doc__
    return wrapper
