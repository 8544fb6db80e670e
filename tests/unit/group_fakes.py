"""A group coordinator over the fakes of :mod:`.coordinator_fakes` (manual clock, in-memory log)."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.coordinator.group.config import GroupCoordinatorConfig
from odradek.coordinator.group.consumer_membership import ConsumerGroupConfig
from odradek.coordinator.group.coordinator import GroupCoordinator, GroupCoordinatorDeps
from odradek.coordinator.group.member import JoinGroupResult, JoinRequest
from odradek.coordinator.group.schemas import encode_assignment, encode_subscription
from odradek.errors import ErrorCode

from .coordinator_fakes import ManualClock, MemoryOffsetsLog, run, runtime_deps, settle

__all__ = ["Harness", "ManualClock", "MemoryOffsetsLog", "assignment_for", "run", "settle"]


class Harness:
    """A coordinator over fakes that leads every ``__consumer_offsets`` partition."""

    def __init__(
        self,
        log: MemoryOffsetsLog | None = None,
        clock: ManualClock | None = None,
        consumer: ConsumerGroupConfig | None = None,
        **config: Any,
    ) -> None:
        self.clock = clock or ManualClock()
        self.log = log or MemoryOffsetsLog()
        self.epochs = self.log.epochs
        """Partition -> leader epoch (absent: 0; None: not led here)."""
        settings = {"initial_rebalance_delay_ms": 0, "offsets_partitions": 3, **config}
        deps, self.metadata, self.create_topic = runtime_deps(self.log, self.clock)
        self.coordinator = GroupCoordinator(
            GroupCoordinatorDeps(
                GroupCoordinatorConfig(**settings), deps, consumer or ConsumerGroupConfig(), topic_ids=self.metadata
            )
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
