"""AlterPartitionReassignments (key 45): start or cancel partition reassignments (KIP-455).

v0. Answered by the controller only: other brokers answer NOT_CONTROLLER at the top level (the
client looks the controller up again). Per partition: ``replicas`` starts moving the partition to
them (first = preferred leader), null cancels the move in progress (the partition goes back to its
original replicas). Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty,
duplicate or not live brokers), NO_REASSIGNMENT_IN_PROGRESS (cancel without a move). The answer
comes when each move has started, not when it completes; ListPartitionReassignments shows it
until then. See :mod:`odradek.controller.reassignment`.
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
    from odradek.server.apis.request_types_admin import AlterPartitionReassignmentsRequest

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[AlterPartitionReassignmentsRequest]) -> Any:
    controller = ctx.services.controller
    targets: dict[TopicPartition, list[int] | None] = {
        TopicPartition(t.name, int(p.partition_index)): None if p.replicas is None else [int(r) for r in p.replicas]
        for t in ctx.request.topics
        for p in t.partitions
    }
    results = None
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return ctx.response(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=CLUSTER_AUTHORIZATION_MESSAGE,
            responses=(),
        )
    if controller is not None and controller.active:
        results = await controller.alter_partition_reassignments(targets)
    if results is None:
        return ctx.response(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.not_controller,
            error_message="this broker is not the controller",
            responses=(),
        )
    by_topic: dict[str, list[Any]] = {}
    for tp, (error, message) in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append(
            ctx.make(
                "ReassignablePartitionResponse", partition_index=tp.partition, error_code=error, error_message=message
            )
        )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(
            ctx.make("ReassignableTopicResponse", name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )
