"""ListPartitionReassignments (key 46): the partition reassignments in progress (KIP-455).

v0. Answered by the controller only (NOT_CONTROLLER elsewhere). ``topics`` null lists every move;
otherwise the named partitions that are moving. Each answer carries the replicas during the move
(target first, then the original replicas being removed), ``adding_replicas`` and
``removing_replicas``.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import CLUSTER_AUTHORIZATION_MESSAGE, AclOperation, authorize_cluster
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import ListPartitionReassignmentsRequest

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[ListPartitionReassignmentsRequest]) -> Any:
    controller = ctx.services.controller
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return ctx.response(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=CLUSTER_AUTHORIZATION_MESSAGE,
            topics=(),
        )
    topics = ctx.request.topics
    wanted = None if topics is None else {TopicPartition(t.name, int(p)) for t in topics for p in t.partition_indexes}
    moves = controller.list_partition_reassignments(wanted) if controller is not None else None
    if moves is None:
        return ctx.response(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.not_controller,
            error_message="this broker is not the controller",
            topics=(),
        )
    by_topic: dict[str, list[Any]] = {}
    for tp, move in sorted(moves.items()):
        by_topic.setdefault(tp.topic, []).append(
            ctx.make(
                "OngoingPartitionReassignment",
                partition_index=tp.partition,
                replicas=tuple(move.replicas),
                adding_replicas=tuple(move.adding),
                removing_replicas=tuple(move.removing),
            )
        )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(ctx.make("OngoingTopicReassignment", name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    )
