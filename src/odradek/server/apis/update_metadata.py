"""UpdateMetadata (key 6): the controller's view of brokers and partitions for the metadata cache.

v0..v8 (Kafka 3.9). Live brokers become registrations (all endpoints; before v3 each endpoint is
named after its security protocol, v0 has one PLAINTEXT host/port), partition states fill the
cache; partitions sent with leader -2 (Kafka's ``LeaderDuringDelete``) belong to deleted topics,
which the cache drops. Answers NONE, or STALE_CONTROLLER_EPOCH (nothing applied) when the
``controller_epoch`` is older than the highest this broker has seen, as Kafka's
``ReplicaManager.maybeUpdateMetadataCache``.
"""

from __future__ import annotations

import uuid
from typing import Any

from odradek.controller.requests import UpdateMetadataRequest
from odradek.controller.wire import LEADER_DURING_DELETE, brokers_from_wire
from odradek.errors import ErrorCode, StaleControllerEpochError
from odradek.replication.partition import PartitionState
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

API_KEY = 6
MIN_VERSION = 0
MAX_VERSION = 8

_ZERO_UUID = uuid.UUID(int=0)


def to_internal(req: Any, version: int) -> UpdateMetadataRequest:
    if version <= 4:
        wire_states = [(str(p.topic_name), p) for p in req.ungrouped_partition_states]
    else:
        wire_states = [(str(t.topic_name), p) for t in req.topic_states for p in t.partition_states]
    states: dict[TopicPartition, PartitionState] = {}
    deleted: set[str] = set()
    offline: dict[TopicPartition, set[int]] = {}
    for topic, p in wire_states:
        if int(p.leader) == LEADER_DURING_DELETE:
            deleted.add(topic)
            continue
        tp = TopicPartition(topic, int(p.partition_index))
        if getattr(p, "offline_replicas", ()):  # v4+
            offline[tp] = {int(r) for r in p.offline_replicas}
        states[tp] = PartitionState(
            leader=int(p.leader),
            leader_epoch=int(p.leader_epoch),
            isr=[int(r) for r in p.isr],
            replicas=[int(r) for r in p.replicas],
            controller_epoch=int(p.controller_epoch),
            zk_version=int(p.zk_version),
        )
    topic_ids = {str(t.topic_name): t.topic_id or _ZERO_UUID for t in getattr(req, "topic_states", ()) if version >= 7}
    return UpdateMetadataRequest(
        int(req.controller_id),
        int(req.controller_epoch),
        brokers_from_wire(req.live_brokers, version),
        states,
        topic_ids,
        deleted,
        offline,
    )


async def handle(ctx: RequestContext) -> Any:
    try:
        await ctx.broker.handle_update_metadata(to_internal(ctx.request, ctx.api_version))
    except StaleControllerEpochError:
        return ctx.response(error_code=ErrorCode.stale_controller_epoch)
    return ctx.response(error_code=ErrorCode.none)
