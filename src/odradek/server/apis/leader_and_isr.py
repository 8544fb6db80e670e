"""LeaderAndIsr (key 4): the controller tells a replica broker who leads its partitions.

v0..v7 (Kafka 3.9; the layouts are :mod:`odradek.controller.messages.leader_and_isr`'s). The wire
message becomes :class:`odradek.controller.requests.LeaderAndIsrRequest` and goes to
``ReplicaManager.become_leader_or_follower``, which answers an error code per partition. A
``controller_epoch`` older than the highest this broker has seen is refused as a whole:
STALE_CONTROLLER_EPOCH at the top and for every partition, nothing applied (Kafka's
``LeaderAndIsrRequest.getErrorResponse``); so are CLUSTER_AUTHORIZATION_FAILED and
STALE_BROKER_EPOCH (:mod:`odradek.server.apis.controller_request`).
"""

from __future__ import annotations

from typing import Any

from odradek.controller.messages import leader_and_isr as message
from odradek.errors import ErrorCode, StaleControllerEpochError
from odradek.server.apis.controller_request import refusal
from odradek.server.request import RequestContext

API_KEY = message.API_KEY
MIN_VERSION = message.MIN_VERSION
MAX_VERSION = message.MAX_VERSION


async def handle(ctx: RequestContext) -> Any:
    request = message.decode(ctx.request, ctx.api_version)
    refused = refusal(ctx)
    if refused is not None:
        denied = dict.fromkeys(request.partition_states, refused)
        return message.encode_response(ctx.api_version, refused, denied, request.topic_ids)
    try:
        errors = await ctx.services.replica_manager.become_leader_or_follower(request)
    except StaleControllerEpochError:
        stale = dict.fromkeys(request.partition_states, ErrorCode.stale_controller_epoch)
        return message.encode_response(ctx.api_version, ErrorCode.stale_controller_epoch, stale, request.topic_ids)
    return message.encode_response(ctx.api_version, ErrorCode.none, errors, request.topic_ids)
