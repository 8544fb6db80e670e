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
from typing import TYPE_CHECKING, Any

from kio.schema.metadata import v0 as metadata_v0
from kio.schema.metadata import v1 as metadata_v1
from kio.schema.metadata import v2 as metadata_v2
from kio.schema.metadata import v3 as metadata_v3
from kio.schema.metadata import v4 as metadata_v4
from kio.schema.metadata import v5 as metadata_v5
from kio.schema.metadata import v6 as metadata_v6
from kio.schema.metadata import v7 as metadata_v7
from kio.schema.metadata import v8 as metadata_v8
from kio.schema.metadata import v9 as metadata_v9
from kio.schema.metadata import v10 as metadata_v10
from kio.schema.metadata import v11 as metadata_v11
from kio.schema.metadata import v12 as metadata_v12

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
    from odradek.server.apis.request_types import MetadataRequest

API_KEY = ApiKey.METADATA
MIN_VERSION = 0
MAX_VERSION = 12

_BEFORE_V4 = (
    metadata_v0.MetadataRequest,
    metadata_v1.MetadataRequest,
    metadata_v2.MetadataRequest,
    metadata_v3.MetadataRequest,
)
"""Versions without ``allow_auto_topic_creation`` (they always allow it)."""
_BEFORE_V8 = (
    *_BEFORE_V4,
    metadata_v4.MetadataRequest,
    metadata_v5.MetadataRequest,
    metadata_v6.MetadataRequest,
    metadata_v7.MetadataRequest,
)
"""Versions without the ``include_*_authorized_operations`` flags."""
_CLUSTER_OPERATIONS = (metadata_v8.MetadataRequest, metadata_v9.MetadataRequest, metadata_v10.MetadataRequest)
"""Versions with ``include_cluster_authorized_operations`` (v8..v10; v11 moved it to DescribeCluster)."""
_TOPICS_WITH_IDS = (
    metadata_v10.request.MetadataRequestTopic,
    metadata_v11.request.MetadataRequestTopic,
    metadata_v12.request.MetadataRequestTopic,
)
"""Topic entries that carry a ``topic_id`` (v10+)."""


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


def _include_topic_operations(req: MetadataRequest) -> bool:
    return False if isinstance(req, _BEFORE_V8) else req.include_topic_authorized_operations


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
            meta is not None and _include_topic_operations(ctx.request),
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
    for topic in requested:
        topic_id = topic.topic_id if isinstance(topic, _TOPICS_WITH_IDS) else None
        wanted[(topic_id, topic.name if topic.name is not None else _by_id(ctx, topic_id))] = None
    return list(wanted), True


async def handle(ctx: RequestContext[MetadataRequest]) -> Any:
    broker = ctx.services
    cache = broker.metadata_cache
    req = ctx.request
    wanted, explicit = _wanted(ctx)
    allow_auto = True if isinstance(req, _BEFORE_V4) else req.allow_auto_topic_creation
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
            isinstance(req, _CLUSTER_OPERATIONS) and req.include_cluster_authorized_operations,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
        ),
    )
