"""What the five share-group state handlers (InitializeShareGroupState 83, ReadShareGroupState 84,
WriteShareGroupState 85, DeleteShareGroupState 86, ReadShareGroupStateSummary 87) share: one
loop over the request's topics and partitions, each partition answered by the broker's share
coordinator with its own error, as Kafka's ``ShareCoordinatorService`` answers them.

Per partition, in this order: CLUSTER_AUTHORIZATION_FAILED unless the sender may CLUSTER_ACTION
on the cluster (:func:`~odradek.server.auth_helper.authorize_cluster_action`, as Kafka's
``KafkaApis``); INVALID_GROUP_ID for an empty group id ("Group id must be specified and
non-empty."); INVALID_REQUEST for a null (or zero) topic id ("The topic id cannot be null.");
then the coordinator: NOT_COORDINATOR when this broker does not lead the key's
``__share_group_state`` partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it,
COORDINATOR_NOT_AVAILABLE before start-up or when the write cannot be made durable, or the
rule's error (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION)
with Kafka's message where it has one. Anything unexpected is UNKNOWN_SERVER_ERROR, logged with its
traceback. Results keep the request's order; an error result carries the entity's zero values
(``error_fields``). Event loop only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from odradek.errors import ErrorCode
from odradek.replication.pacing import Pacer
from odradek.server.auth_helper import CLUSTER_AUTHORIZATION_MESSAGE, authorize_cluster_action
from odradek.server.request import RequestContext
from odradek.share.state import SharePartitionKey, ShareStateError

if TYPE_CHECKING:
    from odradek.coordinator.share import ShareCoordinator
    from odradek.server.apis.request_types_share import ShareGroupStateRequest

__all__ = ["PartitionOp", "answer_partitions"]

log = logging.getLogger(__name__)

NULL_TOPIC_ID = "The topic id cannot be null."
EMPTY_GROUP_ID = "Group id must be specified and non-empty."
ZERO_UUID = uuid.UUID(int=0)

R = TypeVar("R", bound="ShareGroupStateRequest")

PartitionOp = Callable[["ShareCoordinator", SharePartitionKey, Any], Awaitable[dict[str, Any]]]
"""``op(coordinator, key, partition data)``: the result fields of a partition answered NONE;
raises ShareStateError (or ValueError: INVALID_REQUEST) otherwise."""


async def _answer(ctx: RequestContext, op: PartitionOp, key: SharePartitionKey, data: Any) -> dict[str, Any]:
    try:
        return {"error_code": ErrorCode.none, **await op(ctx.services.share_coordinator, key, data)}
    except ShareStateError as exc:
        return {"error_code": exc.error_code, "error_message": exc.message or exc.error_code.name}
    except ValueError as exc:  # e.g. an unknown delivery state
        return {"error_code": ErrorCode.invalid_request, "error_message": str(exc)}
    except Exception:
        log.exception("share-group state request %d for %s failed", ctx.header.api_key, key)
        return {"error_code": ErrorCode.unknown_server_error}


async def answer_partitions(
    ctx: RequestContext[R], result_entity: str, op: PartitionOp, error_fields: dict[str, Any]
) -> Any:
    """The response: for each topic a ``result_entity`` with a PartitionResult per partition."""
    req = ctx.request
    allowed = authorize_cluster_action(ctx)
    pacer = Pacer()
    results = []
    for topic in req.topics:
        partitions = []
        for data in topic.partitions:
            await pacer.step()
            fields: dict[str, Any]
            if not allowed:
                fields = {
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "error_message": CLUSTER_AUTHORIZATION_MESSAGE,
                }
            elif not req.group_id:
                fields = {"error_code": ErrorCode.invalid_group_id, "error_message": EMPTY_GROUP_ID}
            elif topic.topic_id is None or topic.topic_id == ZERO_UUID:
                fields = {"error_code": ErrorCode.invalid_request, "error_message": NULL_TOPIC_ID}
            else:
                key = SharePartitionKey(req.group_id, topic.topic_id, int(data.partition))
                fields = await _answer(ctx, op, key, data)
            if fields["error_code"] is not ErrorCode.none:
                fields = {**error_fields, **fields}
            partitions.append(ctx.make("PartitionResult", partition=data.partition, **fields))
        results.append(ctx.make(result_entity, topic_id=topic.topic_id, partitions=tuple(partitions)))
    return ctx.response(results=tuple(results))
