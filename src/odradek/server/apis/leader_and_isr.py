"""LeaderAndIsr (key 4): the controller tells a replica broker who leads its partitions.

v0..v7 (Kafka 3.9). The wire message becomes :class:`odradek.controller.requests.LeaderAndIsrRequest`
(partition states keyed by topic-partition, ``partition_epoch`` as the state znode's version) and
goes to ``Broker.handle_leader_and_isr``, which answers an error code per partition. A
``controller_epoch`` older than the highest this broker has seen is refused as a whole:
STALE_CONTROLLER_EPOCH at the top and for every partition, nothing applied (Kafka's
``LeaderAndIsrRequest.getErrorResponse``). The response lists partitions with their topic names
(v0..v4) or grouped by topic id (v5+; the zero id for topics sent without one).
"""

from __future__ import annotations

import uuid
from typing import Any

from odradek.controller.requests import LeaderAndIsrRequest
from odradek.errors import ErrorCode, StaleControllerEpochError
from odradek.replication.partition import PartitionState
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

API_KEY = 4
MIN_VERSION = 0
MAX_VERSION = 7

_ZERO_UUID = uuid.UUID(int=0)


def wire_partition_states(req: Any, version: int) -> list[tuple[str, Any]]:
    """(topic name, wire partition state) of every partition, whatever the version's layout."""
    if version <= 1:
        return [(str(p.topic_name), p) for p in req.ungrouped_partition_states]
    return [(str(t.topic_name), p) for t in req.topic_states for p in t.partition_states]


def to_internal(req: Any, version: int) -> LeaderAndIsrRequest:
    states = {
        TopicPartition(topic, int(p.partition_index)): PartitionState(
            leader=int(p.leader),
            leader_epoch=int(p.leader_epoch),
            isr=[int(r) for r in p.isr],
            replicas=[int(r) for r in p.replicas],
            controller_epoch=int(p.controller_epoch),
            zk_version=int(p.partition_epoch),
        )
        for topic, p in wire_partition_states(req, version)
    }
    topic_ids = {str(t.topic_name): t.topic_id or _ZERO_UUID for t in req.topic_states} if version >= 5 else {}
    return LeaderAndIsrRequest(int(req.controller_id), int(req.controller_epoch), states, topic_ids)


def response(
    ctx: RequestContext, error: ErrorCode, errors: dict[TopicPartition, ErrorCode], topic_ids: dict[str, uuid.UUID]
) -> Any:
    ordered = sorted(errors.items(), key=lambda item: (item[0].topic, item[0].partition))
    if ctx.api_version <= 4:
        partition_errors = tuple(
            ctx.make("LeaderAndIsrPartitionError", topic_name=tp.topic, partition_index=tp.partition, error_code=code)
            for tp, code in ordered
        )
        return ctx.response(error_code=error, partition_errors=partition_errors)
    by_topic: dict[str, list[Any]] = {}
    for tp, code in ordered:
        by_topic.setdefault(tp.topic, []).append(
            ctx.make("LeaderAndIsrPartitionError", partition_index=tp.partition, error_code=code)
        )
    topics = tuple(
        ctx.make("LeaderAndIsrTopicError", topic_id=topic_ids.get(topic, _ZERO_UUID), partition_errors=tuple(items))
        for topic, items in by_topic.items()
    )
    return ctx.response(error_code=error, topics=topics)


async def handle(ctx: RequestContext) -> Any:
    request = to_internal(ctx.request, ctx.api_version)
    try:
        errors = await ctx.broker.handle_leader_and_isr(request)
    except StaleControllerEpochError:
        stale = dict.fromkeys(request.partition_states, ErrorCode.stale_controller_epoch)
        return response(ctx, ErrorCode.stale_controller_epoch, stale, request.topic_ids)
    return response(ctx, ErrorCode.none, errors, request.topic_ids)
