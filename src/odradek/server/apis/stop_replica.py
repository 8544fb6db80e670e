"""StopReplica (key 5): the controller tells a broker to stop (and maybe delete) replicas.

v0..v4 (Kafka 3.9; the layouts are :mod:`odradek.controller.messages.stop_replica`'s). A request
mixing deletions and plain stops (v3+) is applied as two requests, each by
``ReplicaManager.stop_replicas``. Answers an error code per
partition (FENCED_LEADER_EPOCH for an older leader epoch), or STALE_CONTROLLER_EPOCH at the top
and for every partition, nothing applied, when the ``controller_epoch`` is older than the highest
seen; CLUSTER_AUTHORIZATION_FAILED or STALE_BROKER_EPOCH likewise
(:mod:`odradek.server.apis.controller_request`).
"""

from __future__ import annotations

from typing import Any

from odradek.controller.messages import stop_replica as message
from odradek.errors import ErrorCode, StaleControllerEpochError
from odradek.server.apis.controller_request import refusal
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

API_KEY = message.API_KEY
MIN_VERSION = message.MIN_VERSION
MAX_VERSION = message.MAX_VERSION


async def handle(ctx: RequestContext) -> Any:
    requests = message.decode(ctx.request, ctx.api_version)
    errors: dict[TopicPartition, ErrorCode] = {}
    refused = refusal(ctx)
    if refused is not None:
        return message.encode_response(ctx.api_version, refused, {tp: refused for r in requests for tp in r.partitions})
    try:
        for request in requests:
            errors.update(await ctx.services.replica_manager.stop_replicas(request))
        top = ErrorCode.none
    except StaleControllerEpochError:
        top = ErrorCode.stale_controller_epoch
        errors = {tp: top for request in requests for tp in request.partitions}
    return message.encode_response(ctx.api_version, top, errors)
