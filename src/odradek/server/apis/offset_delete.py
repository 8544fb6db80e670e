"""OffsetDelete (key 47): delete some committed offsets of a group (KIP-496).

v0. Allowed for any partition of an Empty group, and for partitions of topics an active consumer
group does not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Unknown topics or partitions
get UNKNOWN_TOPIC_OR_PARTITION; group errors (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP for a
non-consumer group with members, coordinator errors) are top-level with no partitions.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types_groups import OffsetDeleteRequest

API_KEY = ApiKey.OFFSET_DELETE
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext[OffsetDeleteRequest]) -> Any:
    req = ctx.request
    cache = ctx.services.metadata_cache
    errors: dict[TopicPartition, ErrorCode] = {}
    wanted: list[TopicPartition] = []
    throttle = datetime.timedelta(0)
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return ctx.response(error_code=ErrorCode.group_authorization_failed, throttle_time=throttle, topics=())
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, req.topics, lambda t: t.name)
    for topic in req.topics:
        meta = cache.topic(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif meta is None or tp.partition not in meta.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(tp)
    group_error, results = await ctx.services.group_coordinator.delete_offsets(req.group_id, wanted)
    if group_error is not ErrorCode.none:
        return ctx.response(error_code=group_error, throttle_time=throttle, topics=())
    errors.update(results)
    topics = []
    for topic in req.topics:
        partitions = tuple(
            ctx.make(
                "OffsetDeleteResponsePartition",
                partition_index=p.partition_index,
                error_code=errors.get(TopicPartition(topic.name, p.partition_index), ErrorCode.none),
            )
            for p in topic.partitions
        )
        topics.append(ctx.make("OffsetDeleteResponseTopic", name=topic.name, partitions=partitions))
    return ctx.response(error_code=ErrorCode.none, throttle_time=throttle, topics=tuple(topics))
