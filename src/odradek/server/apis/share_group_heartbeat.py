"""ShareGroupHeartbeat (key 76): a member of a share group (KIP-932) joins, stays or leaves
(:mod:`odradek.coordinator.group.share_membership`, through the group coordinator's
``share_groups``).

v1 only (Kafka 4.2: v0 was early access, removed in 4.1). Authorized as Kafka: READ on the group
(GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic when a subscription is sent
(TOPIC_AUTHORIZATION_FAILED, without a message). The assignment names topics by id; a topic
deleted meanwhile is left out of it. An error answer carries no member id, epoch 0 and no
heartbeat interval (Kafka's error response).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from odradek.coordinator.group.share_group import ShareTopic
from odradek.coordinator.group.share_membership import ShareHeartbeat
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.join_group import client_host
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, filter_authorized
from odradek.server.metadata_cache import MetadataCache
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_groups import ShareGroupHeartbeatRequest

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
MIN_VERSION = 1
MAX_VERSION = 1


class MetadataTopics(Mapping[str, ShareTopic]):
    """Each topic's id and partition count, read from the metadata cache as the coordinator asks
    (a topic without an id is left out)."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache

    def __getitem__(self, name: str) -> ShareTopic:
        meta = self.cache.topic(name)
        count = self.cache.partition_count(name)
        if meta is None or count is None or meta.topic_id.int == 0:
            raise KeyError(name)
        return ShareTopic(meta.topic_id, count)

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache.topics)

    def __len__(self) -> int:
        return len(self.cache.topics)


def _answer(ctx: RequestContext[ShareGroupHeartbeatRequest], error: ErrorCode, message: str | None) -> Any:
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        member_id=None,
        member_epoch=0,
        heartbeat_interval=datetime.timedelta(0),
        assignment=None,
    )


async def handle(ctx: RequestContext[ShareGroupHeartbeatRequest]) -> Any:
    req = ctx.request
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed, None)
    names = tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None
    if names:
        wanted = set(names)
        if filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, sorted(wanted)) != wanted:
            return _answer(ctx, ErrorCode.topic_authorization_failed, None)
    result = await ctx.services.group_coordinator.share_groups.heartbeat(
        ShareHeartbeat(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=int(req.member_epoch),
            rack_id=req.rack_id,
            subscribed_topic_names=names,
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
        ),
        MetadataTopics(ctx.services.metadata_cache),
    )
    if result.error != ErrorCode.none:
        return _answer(ctx, result.error, result.message)
    assignment = None
    if result.assignment is not None:
        known = ctx.services.metadata_cache.topic_names
        assignment = ctx.make(
            "Assignment",
            topic_partitions=tuple(
                ctx.make("TopicPartitions", topic_id=topic_id, partitions=tuple(sorted(ps)))
                for topic_id, ps in sorted(result.assignment.items())
                if topic_id in known
            ),
        )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )
