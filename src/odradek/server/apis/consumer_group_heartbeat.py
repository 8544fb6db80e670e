"""ConsumerGroupHeartbeat (key 68): a member of a next-generation consumer group (KIP-848) joins,
stays, reconciles its assignment or leaves (:mod:`odradek.coordinator.group.consumer_membership`).

v0..v1 (Kafka 4.x's range; from v1 the client generates its member id, KIP-1082). Authorized as
Kafka: READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic
(TOPIC_AUTHORIZATION_FAILED); a subscribed regex takes only the topics the member's principal may
DESCRIBE (the coordinator resolves it with that principal's filter). Partitions go by topic id on
the wire: owned partitions of a topic id this broker does not know are ignored, and the assignment
names topics by their ids.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.group.consumer_membership import ConsumerHeartbeat
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.join_group import client_host
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, filter_authorized, has_authorizer
from odradek.server.metadata_cache import MetadataCache
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat_v1

    from odradek.server.apis.request_types_groups import ConsumerGroupHeartbeatRequest

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 1


class _PartitionCounts(Mapping[str, int]):
    """Each topic's partition count, read from the metadata cache as the coordinator asks."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache

    def __getitem__(self, topic: str) -> int:
        count = self.cache.partition_count(topic)
        if count is None:
            raise KeyError(topic)
        return count

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and self.cache.partition_count(topic) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.cache.topics)

    def __len__(self) -> int:
        return len(self.cache.topics)


def _answer(ctx: RequestContext[ConsumerGroupHeartbeatRequest], error: ErrorCode, message: str | None) -> Any:
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        member_id=None,
        member_epoch=-1,
        heartbeat_interval=datetime.timedelta(0),
        assignment=None,
    )


async def handle(ctx: RequestContext[ConsumerGroupHeartbeatRequest]) -> Any:
    req = ctx.request
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed, None)
    names = tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None
    if names:
        allowed = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, sorted(set(names)))
        denied = sorted(set(names) - set(allowed))
        if denied:
            return _answer(ctx, ErrorCode.topic_authorization_failed, f"Topics not authorized: {', '.join(denied)}")
    cache = ctx.services.metadata_cache
    owned = None
    if req.topic_partitions is not None:
        owned = {}
        for t in req.topic_partitions:
            name = cache.topic_names.get(t.topic_id) if t.topic_id is not None else None
            if name is not None and t.partitions:
                owned[name] = frozenset(int(p) for p in t.partitions)
    rebalance_ms = int(req.rebalance_timeout.total_seconds() * 1000)

    def describable(topics: Iterable[str]) -> set[str]:
        return filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics, log_if_denied=False)

    result = await ctx.services.group_coordinator.consumer_group_heartbeat(
        ConsumerHeartbeat(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=int(req.member_epoch),
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=names,
            subscribed_topic_regex=_regex(req, ctx.api_version),
            server_assignor=req.server_assignor,
            owned=owned,
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            version=ctx.api_version,
            authorized_topics=describable if has_authorizer(ctx) else None,
        ),
        _PartitionCounts(cache),
    )
    if result.error != ErrorCode.none:
        return _answer(ctx, result.error, result.message)
    assignment = None
    if result.assignment is not None:
        ids = {name: _topic_id(cache, name) for name in result.assignment}
        assignment = ctx.make(
            "Assignment",
            topic_partitions=tuple(
                ctx.make("TopicPartitions", topic_id=ids[name], partitions=tuple(sorted(ps)))
                for name, ps in sorted(result.assignment.items())
                if ids[name] is not None
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


def _regex(req: ConsumerGroupHeartbeatRequest, version: int) -> str | None:
    """The subscribed regex (v1+, read by version number so that only the version a client uses is
    imported); an empty one, as librdkafka sends without one, is none."""
    if version < 1:
        return None
    return cast("heartbeat_v1.ConsumerGroupHeartbeatRequest", req).subscribed_topic_regex or None


def _topic_id(cache: MetadataCache, name: str) -> uuid.UUID | None:
    meta = cache.topic(name)
    return meta.topic_id if meta is not None and meta.topic_id.int != 0 else None
