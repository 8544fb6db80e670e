"""Metadata (key 3): brokers, controller, cluster id, and topics with partition leaders.

v0..v12. ``topics`` null (v1+) means every topic; an empty list in v0 also means every topic.
An unknown topic is created when ``auto.create.topics.enable`` is true and the request allows
it (v4+ ``allow_auto_topic_creation``; always in v0..v3) — the answer waits briefly for the new
topic's leaders and falls back to LEADER_NOT_AVAILABLE (retriable) if they are not ready yet.
Invalid names get INVALID_TOPIC_EXCEPTION; unknown topics UNKNOWN_TOPIC_OR_PARTITION.
A topic named by id only (name null, v10+): v12 looks the id up (UNKNOWN_TOPIC_ID when no topic
has it); v10-11, whose response cannot carry a null name, answer INVALID_REQUEST under the name
"" (Kafka refuses ids before v12).

A topic named twice is answered once (Kafka reads the names into a set). The answer is built in
slices (:class:`odradek.replication.pacing.Pacer`): a request naming thousands of topics, or
"every topic" on a broker holding thousands, never holds the event loop for long.

Answers from this broker's metadata cache only (filled by the controller's UpdateMetadata), never
from the metadata store, so every broker answers at once; before its first UpdateMetadata a
broker lists itself alone, no controller (-1) and no topics. Brokers are listed with their
addresses on the listener the request arrived on (KIP-103); a broker without that listener is
left out, and a partition led by one is answered LISTENER_NOT_FOUND with no leader, as Kafka does.
"""

from __future__ import annotations

import datetime
import uuid
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol.api_keys import ApiKey
from odradek.replication.pacing import Pacer
from odradek.server.auth_helper import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    filter_authorized,
    may_auto_create,
    operations_field,
)
from odradek.server.metadata_cache import TopicMetadata
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.metadata.v4 import request as metadata_v4
    from kio.schema.metadata.v8 import request as metadata_v8
    from kio.schema.metadata.v10 import request as metadata_v10

    from odradek.server.apis.request_types import MetadataRequest

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 12

# Fields by the first version that has them. The request is read by version number (the codec
# decoded it with that version's class), so only the version a client uses is ever imported; the
# casts name, for the type checker, the oldest version with the field read.
_AUTO_CREATE_FLAG = 4
"""v4+ carry ``allow_auto_topic_creation`` (older versions always allow it)."""
_OPERATIONS_FLAGS = 8
"""v8+ carry the ``include_*_authorized_operations`` flags."""
_CLUSTER_OPERATIONS = range(8, 11)
"""Versions with ``include_cluster_authorized_operations`` (v8..v10; v11 moved it to DescribeCluster)."""
_TOPIC_IDS = 10
"""v10+ topic entries carry a ``topic_id``."""


def _partitions(ctx: RequestContext[MetadataRequest], meta: TopicMetadata) -> tuple[Any, ...]:
    live = set(ctx.services.metadata_cache.brokers)
    reachable = set(ctx.services.metadata_cache.brokers_on(ctx.session.listener_name))
    out = []
    for index, state in sorted(meta.partitions.items()):
        if state.leader in reachable:
            error = ErrorCode.none
        else:  # a live leader without the request's listener: LISTENER_NOT_FOUND, as Kafka
            error = ErrorCode.listener_not_found if state.leader in live else ErrorCode.leader_not_available
        out.append(
            ctx.make(
                "MetadataResponsePartition",
                error_code=error,
                partition_index=index,
                leader_id=state.leader if state.leader in reachable else -1,
                leader_epoch=state.leader_epoch,
                replica_nodes=tuple(state.replicas),
                isr_nodes=tuple(state.isr),
                offline_replicas=meta.offline(index, live),
            )
        )
    return tuple(out)


def _include_topic_operations(req: MetadataRequest, version: int) -> bool:
    if version < _OPERATIONS_FLAGS:
        return False
    return cast("metadata_v8.MetadataRequest", req).include_topic_authorized_operations


def _topic(ctx: RequestContext[MetadataRequest], name: str | None, error: ErrorCode, meta: TopicMetadata | None) -> Any:
    return ctx.make(
        "MetadataResponseTopic",
        error_code=error,
        name=name,
        topic_id=meta.topic_id if meta else uuid.UUID(int=0),
        is_internal=meta.is_internal if meta else False,
        partitions=_partitions(ctx, meta) if meta else (),
        topic_authorized_operations=operations_field(
            ctx,
            meta is not None and _include_topic_operations(ctx.request, ctx.api_version),
            ResourceType.TOPIC,
            name or "",
        ),
    )


def _by_id(ctx: RequestContext[MetadataRequest], topic_id: uuid.UUID | None) -> str | None:
    """The name of the topic with ``topic_id`` (v12 only), or None."""
    if ctx.api_version < 12 or topic_id is None:
        return None
    return ctx.services.metadata_cache.topic_names.get(topic_id)


def _wanted(ctx: RequestContext[MetadataRequest]) -> tuple[list[tuple[uuid.UUID | None, str | None]], bool]:
    """(the (topic id, name) pairs to answer, each once and in the request's order; whether the
    request named them rather than asking for every topic)."""
    requested = ctx.request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        return [(None, n) for n in sorted(ctx.services.metadata_cache.topics)], False
    wanted: dict[tuple[uuid.UUID | None, str | None], None] = {}
    by_id = ctx.api_version >= _TOPIC_IDS
    for topic in requested:
        topic_id = cast("metadata_v10.MetadataRequestTopic", topic).topic_id if by_id else None
        wanted[(topic_id, topic.name if topic.name is not None else _by_id(ctx, topic_id))] = None
    return list(wanted), True


async def handle(ctx: RequestContext[MetadataRequest]) -> Any:
    broker = ctx.services
    cache = broker.metadata_cache
    req = ctx.request
    wanted, explicit = _wanted(ctx)
    version = ctx.api_version
    allow_auto = version < _AUTO_CREATE_FLAG or cast("metadata_v4.MetadataRequest", req).allow_auto_topic_creation
    topics = []
    pacer = Pacer()
    described = filter_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (n for _, n in wanted if n is not None), log_if_denied=explicit
    )
    for topic_id, name in wanted:
        await pacer.step()
        if name is None:
            unknown_id = ctx.api_version >= 12 and topic_id not in (None, uuid.UUID(int=0))
            error = ErrorCode.unknown_topic_id if unknown_id else ErrorCode.invalid_request
            topics.append(_topic(ctx, None if ctx.api_version >= 12 else "", error, None))
            continue
        meta = cache.topic(name)
        if name not in described or (meta is None and explicit and allow_auto and not may_auto_create(ctx, name)):
            if explicit:  # "every topic" leaves out what the principal may not describe
                topics.append(_topic(ctx, name, ErrorCode.topic_authorization_failed, None))
            continue
        if meta is None and explicit:
            error = await broker.admin.maybe_auto_create(name, allow_auto)
            meta = cache.topic(name)
            if meta is None:
                topics.append(_topic(ctx, name, error, None))
                continue
        if meta is not None:
            topics.append(_topic(ctx, name, ErrorCode.none, meta))
    listener = ctx.session.listener_name
    known = dict(cache.brokers_on(listener))
    own = [e for e in broker.endpoints if e.listener == listener]
    if broker.broker_id not in cache.brokers and own:  # no UpdateMetadata yet: at least this broker
        known[broker.broker_id] = BrokerInfo(
            broker.broker_id, own[0].host, own[0].port, rack=broker.config["broker.rack"]
        )
    brokers = tuple(
        ctx.make("MetadataResponseBroker", node_id=b.id, host=b.host, port=b.port, rack=b.rack)
        for b in sorted(known.values(), key=lambda b: b.id)
    )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=operations_field(
            ctx,
            version in _CLUSTER_OPERATIONS
            and cast("metadata_v8.MetadataRequest", req).include_cluster_authorized_operations,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
        ),
    )
