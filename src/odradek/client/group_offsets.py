"""Committed offsets of a consumer group, from and to its coordinator (FindCoordinator, OffsetFetch,
OffsetCommit as an admin: generation -1, no member id, which the coordinator allows while the
group has no members, and for groups whose members coordinate through ZooKeeper).

Answers that say the coordinator moved or is loading (COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) are retried for a few seconds. Used by
``odradek consumer-groups`` and the ZooKeeper consumer's ``offsets.storage=kafka``. Belongs to the
cluster's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from odradek.client.cluster import Cluster
from odradek.client.connection import KafkaConnection
from odradek.client.errors import error_for
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.storage.topic_partition import TopicPartition

__all__ = ["GroupOffsetsClient"]

_RETRY = frozenset(
    {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator}
)
_ATTEMPTS = 50


class GroupOffsetsClient:
    """Requests routed to each group's coordinator over ``cluster``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def _coordinator(self, group_id: str) -> tuple[KafkaConnection, int]:
        for _ in range(_ATTEMPTS):
            conn = await self.cluster.any_connection()
            rb = conn.builder(ApiKey.FIND_COORDINATOR, 0, 3)
            resp = await conn.send(rb(key=group_id, key_type=0))
            code = ErrorCode(resp.error_code)
            if code is ErrorCode.none:
                return await self.cluster.connection(int(resp.node_id)), int(resp.node_id)
            if code not in _RETRY:
                raise error_for(code, getattr(resp, "error_message", None), f"group {group_id}")
            await asyncio.sleep(0.1)
        raise error_for(ErrorCode.coordinator_not_available, None, f"group {group_id}")

    async def _call(
        self, group_id: str, make: Callable[[KafkaConnection], Any], error_of: Callable[[Any], int]
    ) -> tuple[Any, int]:
        """Send ``make(conn)`` to the group's coordinator, again while it answers a coordinator error."""
        for _ in range(_ATTEMPTS):
            conn, node = await self._coordinator(group_id)
            resp = await conn.send(make(conn))
            if ErrorCode(error_of(resp)) not in _RETRY:
                return resp, node
            await asyncio.sleep(0.1)
        raise error_for(ErrorCode.coordinator_load_in_progress, None, f"group {group_id}")

    async def committed(self, group_id: str) -> dict[TopicPartition, int]:
        def make(conn: KafkaConnection) -> Any:
            return conn.builder(ApiKey.OFFSET_FETCH, 2, 7)(group_id=group_id, topics=None, require_stable=False)

        resp, _ = await self._call(group_id, make, lambda r: r.error_code)
        if resp.error_code:
            raise error_for(resp.error_code, None, f"group {group_id}")
        return {
            TopicPartition(t.name, p.partition_index): int(p.committed_offset)
            for t in resp.topics
            for p in t.partitions
            if p.committed_offset >= 0 and not p.error_code
        }

    async def commit(self, group_id: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, ErrorCode]:
        """Commit as an admin (generation -1, no member id): allowed while the group is empty."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))

        def make(conn: KafkaConnection) -> Any:
            rb = conn.builder(ApiKey.OFFSET_COMMIT, 2, 7)
            topics = tuple(
                rb.make(
                    "OffsetCommitRequestTopic",
                    name=t,
                    partitions=tuple(
                        rb.make(
                            "OffsetCommitRequestPartition",
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in parts
                    ),
                )
                for t, parts in by_topic.items()
            )
            return rb(
                group_id=group_id, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=topics
            )

        resp, _ = await self._call(group_id, make, lambda r: r.topics[0].partitions[0].error_code if r.topics else 0)
        return {
            TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
            for t in resp.topics
            for p in t.partitions
        }
