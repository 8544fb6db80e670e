"""StopReplica (key 5): the controller tells a broker to stop (and maybe delete) replicas.

v0..v4 (Kafka 3.9). v0..v2 carry one ``delete_partitions`` flag for the whole request; v3+ a
``delete_partition`` flag and a ``leader_epoch`` per partition (-1: any, -2: deletion). A request
mixing deletions and plain stops is applied as two requests. Answers an error code per partition
(FENCED_LEADER_EPOCH for an older leader epoch), or STALE_CONTROLLER_EPOCH at the top and for every
partition, nothing applied, when the ``controller_epoch`` is older than the highest seen.
"""

from __future__ import annotations

from typing import Any

from odradek.controller.requests import StopReplicaRequest
from odradek.errors import ErrorCode, StaleControllerEpochError
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

API_KEY = 5
MIN_VERSION = 0
MAX_VERSION = 4


def to_internal(req: Any, version: int) -> list[StopReplicaRequest]:
    """One request per value of the delete flag (v3+ may mix them)."""
    controller = (int(req.controller_id), int(req.controller_epoch))
    if version == 0:
        tps = [TopicPartition(str(p.topic_name), int(p.partition_index)) for p in req.ungrouped_partitions]
        return [StopReplicaRequest(*controller, tps, bool(req.delete_partitions))]
    if version <= 2:
        tps = [TopicPartition(str(t.name), int(i)) for t in req.topics for i in t.partition_indexes]
        return [StopReplicaRequest(*controller, tps, bool(req.delete_partitions))]
    split: dict[bool, StopReplicaRequest] = {}
    for t in req.topic_states:
        for p in t.partition_states:
            delete = bool(p.delete_partition)
            request = split.setdefault(delete, StopReplicaRequest(*controller, [], delete))
            tp = TopicPartition(str(t.topic_name), int(p.partition_index))
            request.partitions.append(tp)
            request.leader_epochs[tp] = int(p.leader_epoch)
    return list(split.values()) or [StopReplicaRequest(*controller, [], False)]


async def handle(ctx: RequestContext) -> Any:
    requests = to_internal(ctx.request, ctx.api_version)
    errors: dict[TopicPartition, ErrorCode] = {}
    try:
        for request in requests:
            errors.update(await ctx.broker.handle_stop_replica(request))
        top = ErrorCode.none
    except StaleControllerEpochError:
        top = ErrorCode.stale_controller_epoch
        errors = {tp: top for request in requests for tp in request.partitions}
    partition_errors = tuple(
        ctx.make("StopReplicaPartitionError", topic_name=tp.topic, partition_index=tp.partition, error_code=code)
        for tp, code in sorted(errors.items(), key=lambda item: (item[0].topic, item[0].partition))
    )
    return ctx.response(error_code=top, partition_errors=partition_errors)
