"""UpdateMetadata (key 6): the controller's view of brokers and partitions for the metadata cache.

v0..v8 (Kafka 3.9; the layouts are :mod:`odradek.controller.messages.update_metadata`'s). Live
brokers become registrations, partition states fill the cache; partitions sent with leader -2
(Kafka's ``LeaderDuringDelete``) belong to deleted topics, which the cache drops. Answers NONE,
or STALE_CONTROLLER_EPOCH (nothing applied) when the ``controller_epoch`` is older than the
highest this broker has seen (``ReplicaManager.maybe_update_metadata_cache``, as Kafka's);
CLUSTER_AUTHORIZATION_FAILED or STALE_BROKER_EPOCH likewise (:mod:`odradek.server.apis.controller_request`).
"""

from __future__ import annotations

from typing import Any

from odradek.controller.messages import update_metadata as message
from odradek.errors import ErrorCode, StaleControllerEpochError
from odradek.server.apis.controller_request import refusal
from odradek.server.request import RequestContext

API_KEY = message.API_KEY
MIN_VERSION = message.MIN_VERSION
MAX_VERSION = message.MAX_VERSION


async def handle(ctx: RequestContext) -> Any:
    refused = refusal(ctx)
    if refused is not None:
        return message.encode_response(ctx.api_version, refused)
    request = message.decode(ctx.request, ctx.api_version)
    cache = ctx.services.metadata_cache
    try:
        ctx.services.replica_manager.maybe_update_metadata_cache(
            request.controller_epoch,
            lambda: cache.update(
                request.controller_id,
                request.controller_epoch,
                request.live_brokers,
                request.partition_states,
                request.topic_ids,
                request.deleted_topics,
                request.offline_replicas,
            ),
        )
    except StaleControllerEpochError:
        return message.encode_response(ctx.api_version, ErrorCode.stale_controller_epoch)
    return message.encode_response(ctx.api_version, ErrorCode.none)
