"""Helpers of the group config and consumer group tests: the coordinator of a group and
ConsumerGroupHeartbeat / ConsumerGroupDescribe sent to it with odradek's own connection."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.runner import BrokerRunner

_RETRIABLE = (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator)


async def coordinator_port(conn: KafkaConnection, group: str, brokers: Sequence[BrokerRunner]) -> int:
    """The port of ``group``'s coordinator among ``brokers`` (FindCoordinator, retried while
    ``__consumer_offsets`` is being created)."""
    for _ in range(100):
        found = await conn.send(conn.builder(ApiKey.FIND_COORDINATOR, 3, 3)(key=group, key_type=0))
        if found.error_code == 0:
            return next(b.port for b in brokers if b.broker is not None and b.broker.broker_id == found.node_id)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no coordinator for {group}")


async def heartbeat(
    conn: KafkaConnection,
    group: str,
    member: str,
    epoch: int,
    *,
    topics: Sequence[str] | None = None,
    regex: str | None = None,
    owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None = None,
) -> Any:
    """One ConsumerGroupHeartbeat v1 (a join with epoch 0 sends a rebalance timeout and empty owned
    partitions); retried while the coordinator loads its partition."""
    rb = conn.builder(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, 1)
    joining = epoch == 0
    request = rb(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(milliseconds=30000 if joining else -1),
        subscribed_topic_names=None if topics is None else tuple(topics),
        subscribed_topic_regex=regex,
        server_assignor=None,
        topic_partitions=(
            ()
            if joining
            else None
            if owned is None
            else tuple(rb.make("TopicPartitions", topic_id=t, partitions=tuple(ps)) for t, ps in owned)
        ),
    )
    for _ in range(100):
        response = await conn.send(request)
        if response.error_code not in _RETRIABLE:
            return response
        await asyncio.sleep(0.1)
    return response


async def describe_group(conn: KafkaConnection, group: str) -> Any:
    rb = conn.builder(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
    return (await conn.send(rb(group_ids=(group,), include_authorized_operations=False))).groups[0]
