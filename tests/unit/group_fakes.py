"""Fakes for group coordinator unit tests: a manual clock/timer wheel and an in-memory offsets log."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Any

from odradek.coordinator.group.config import GroupCoordinatorConfig
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.member import JoinGroupResult, JoinRequest
from odradek.coordinator.group.schemas import encode_assignment, encode_subscription
from odradek.errors import ErrorCode
from odradek.protocol.records import iter_batches, stamp_base_offset


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
    """Batches per partition, offsets stamped as a leader would. ``fail_with`` makes appends fail;
    ``hold`` makes durability waits block until released."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.fail_with: ErrorCode | None = None
        self.hold: asyncio.Event | None = None

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
        return ErrorCode.none

    def bounds(self, partition: int) -> tuple[int, int]:
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


class Harness:
    """A coordinator over fakes that leads every ``__consumer_offsets`` partition."""

    def __init__(self, log: MemoryOffsetsLog | None = None, clock: ManualClock | None = None, **config: Any) -> None:
        self.clock = clock or ManualClock()
        self.log = log or MemoryOffsetsLog()
        self.epochs: dict[int, int | None] = {}
        settings = {"initial_rebalance_delay_ms": 0, "offsets_partitions": 3, **config}
        self.coordinator = GroupCoordinator(
            config=GroupCoordinatorConfig(**settings),
            offsets_log=self.log,
            leader_epoch=lambda p: self.epochs.get(p, 0),
            time_ms=self.clock.time_ms,
            call_later=self.clock.call_later,
        )

    async def start(self) -> Harness:
        await self.coordinator.startup()
        await settle()
        return self

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        instance: str | None = None,
        topics: tuple[str, ...] = ("t",),
        protocols: tuple[str, ...] = ("range",),
        session_ms: int = 10000,
        rebalance_ms: int = 30000,
        client_id: str = "client",
        require_known: bool = True,
    ) -> asyncio.Task[JoinGroupResult]:
        sub = encode_subscription(list(topics))
        req = JoinRequest(
            group,
            member_id,
            instance,
            client_id,
            "/127.0.0.1",
            rebalance_ms,
            session_ms,
            "consumer",
            tuple((p, sub) for p in protocols),
            require_known_member_id=require_known,
        )
        return asyncio.get_running_loop().create_task(self.coordinator.join_group(req))

    async def join_fully(self, group: str, **kwargs: Any) -> JoinGroupResult:
        """Join as a new dynamic member (MEMBER_ID_REQUIRED round included); wait for the answer."""
        first = await self.join(group, **kwargs)
        assert first.error == ErrorCode.member_id_required, first
        return await self.join(group, first.member_id, **kwargs)

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(
            self.coordinator.sync_group(group, generation, member_id, None, None, instance, assignments or {})
        )


def assignment_for(members: list[str], topic: str = "t", partitions: int = 6) -> dict[str, bytes]:
    out: dict[str, list[int]] = {m: [] for m in members}
    for p in range(partitions):
        out[members[p % len(members)]].append(p)
    return {m: encode_assignment({topic: ps}) for m, ps in out.items()}


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
