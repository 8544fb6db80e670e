"""OffsetFetch (key 9): a group's committed offsets.

v0..v9. **v0** reads ZooKeeper (``/consumers/<group>/offsets/<topic>/<partition>``, Kafka
0.8.2's store; metadata is always empty); **v1+** read the group coordinator's cache of
``__consumer_offsets``. v2+ accept null topics (every partition with an offset) and answer a
top-level error; v5+ answer the leader epoch; v7+ may ``require_stable`` (partitions with a commit
still being written get UNSTABLE_OFFSET_COMMIT); v8+ fetch several groups at once.

A partition without an offset answers offset -1, empty metadata, NONE. A group-level error
(COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, INVALID_GROUP_ID) is
given per partition for v0/v1, top-level (with no partitions) for v2+, per group for v8+. On v0
an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from kio.static.primitive import i64

from odradek.coordinator.group.manager import OffsetFetchEntry
from odradek.errors import ErrorCode
from odradek.protocol import legacy_messages as legacy
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kio.schema.offset_fetch.v7 import request as offset_fetch_v7
    from kio.schema.offset_fetch.v8 import request as offset_fetch_v8
    from kio.schema.offset_fetch.v9 import request as offset_fetch_v9

    from odradek.server.apis.request_types import OffsetFetchRequest

API_KEY = ApiKey.OFFSET_FETCH
MIN_VERSION = 0
MAX_VERSION = 9

log = logging.getLogger(__name__)

Entries = dict[TopicPartition, OffsetFetchEntry]


class _RequestedTopic(Protocol):
    """A requested topic of any version (``OffsetFetchRequestTopic(s)``)."""

    @property
    def name(self) -> str: ...

    @property
    def partition_indexes(self) -> Sequence[int]: ...


def _requested(topics: Iterable[_RequestedTopic] | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


async def _from_zookeeper(ctx: RequestContext, group_id: str, partitions: list[TopicPartition]) -> Entries:
    out: Entries = {}
    for tp in partitions:
        meta = ctx.services.metadata_cache.topic(tp.topic)
        if meta is None or tp.partition not in meta.partitions:
            out[tp] = OffsetFetchEntry(error=ErrorCode.unknown_topic_or_partition)
            continue
        try:
            offset = await ctx.services.zk.get_consumer_offset(group_id, tp)
        except Exception:
            log.exception("reading the ZooKeeper offset of %s for group %s failed", tp, group_id)
            out[tp] = OffsetFetchEntry(error=ErrorCode.unknown_server_error)
            continue
        out[tp] = OffsetFetchEntry() if offset is None else OffsetFetchEntry(offset)
    return out


def _fetch(
    ctx: RequestContext,
    group_id: str,
    partitions: list[TopicPartition] | None,
    require_stable: bool,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, Entries]:
    """Kafka's checks: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED); requested
    partitions of a topic not authorized for DESCRIBE answer TOPIC_AUTHORIZATION_FAILED, and
    "every partition" (null topics) leaves such topics out. ``member``: v9's member id and epoch
    (a consumer group's member must be current)."""
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, {}
    coordinator = ctx.services.group_coordinator
    if member[1] >= 0:
        error, _ = coordinator.fetch_offsets(group_id, require_stable, [], *member)
        if error is not ErrorCode.none:
            return error, {}
    if partitions is None:
        error, entries = coordinator.fetch_offsets(group_id, require_stable, None)
        visible = filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, entries, lambda tp: tp.topic, log_if_denied=False
        )
        return error, {tp: e for tp, e in entries.items() if tp.topic in visible}
    allowed = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, partitions, lambda tp: tp.topic)
    if len(allowed) == len({tp.topic for tp in partitions}):
        return coordinator.fetch_offsets(group_id, require_stable, partitions)
    error, entries = ErrorCode.none, {}
    if allowed:
        error, entries = coordinator.fetch_offsets(
            group_id, require_stable, [tp for tp in partitions if tp.topic in allowed]
        )
    denied = OffsetFetchEntry(error=ErrorCode.topic_authorization_failed)
    return error, {tp: entries.get(tp, denied) if tp.topic in allowed else denied for tp in partitions}


def _topics(ctx: RequestContext, entries: Entries, topic_name: str, partition_name: str) -> tuple[Any, ...]:
    by_topic: dict[str, list[tuple[int, OffsetFetchEntry]]] = {}
    for tp, entry in entries.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, entry))
    return tuple(
        ctx.make(
            topic_name,
            name=topic,
            partitions=tuple(
                ctx.make(
                    partition_name,
                    partition_index=p,
                    committed_offset=e.offset,
                    committed_leader_epoch=e.leader_epoch,
                    metadata=e.metadata,
                    error_code=e.error,
                )
                for p, e in parts
            ),
        )
        for topic, parts in by_topic.items()
    )


async def handle(ctx: RequestContext[OffsetFetchRequest]) -> Any:
    req = ctx.request
    version = ctx.api_version
    throttle = datetime.timedelta(0)
    if isinstance(req, legacy.OffsetFetchRequestV0):
        wanted = _requested(req.topics) or []
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_id):
            allowed = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, wanted, lambda tp: tp.topic)
            entries = await _from_zookeeper(ctx, req.group_id, [tp for tp in wanted if tp.topic in allowed])
            refusal = ErrorCode.topic_authorization_failed
        else:
            entries, refusal = {}, ErrorCode.group_authorization_failed
        for tp in wanted:
            entries.setdefault(tp, OffsetFetchEntry(error=refusal))
        return legacy.OffsetFetchResponseV0(
            topics=tuple(
                legacy.OffsetFetchResponseTopicV0(
                    name=t.name,
                    partitions=tuple(
                        legacy.OffsetFetchResponsePartitionV0(
                            partition_index=p,
                            committed_offset=i64(entries[TopicPartition(t.name, p)].offset),
                            metadata="",
                            error_code=entries[TopicPartition(t.name, p)].error,
                        )
                        for p in t.partition_indexes
                    ),
                )
                for t in req.topics
            )
        )
    # read by version number (v7+ require_stable, v8+ groups, v9+ a member per group), so that only
    # the version a client uses is imported; the casts name the oldest version with the field read
    if version >= 8:
        batched = cast("offset_fetch_v8.OffsetFetchRequest", req)
        groups = []
        for g in batched.groups:
            if version >= 9:
                with_member = cast("offset_fetch_v9.OffsetFetchRequestGroup", g)
                member: tuple[str | None, int] = (with_member.member_id, int(with_member.member_epoch))
            else:
                member = (None, -1)
            error, entries = _fetch(ctx, g.group_id, _requested(g.topics), bool(batched.require_stable), member)
            groups.append(
                ctx.make(
                    "OffsetFetchResponseGroup",
                    group_id=g.group_id,
                    topics=_topics(ctx, entries, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions"),
                    error_code=error,
                )
            )
        return ctx.response(throttle_time=throttle, groups=tuple(groups))
    single = cast("offset_fetch_v7.OffsetFetchRequest", req)  # v1..v7: one group
    requested = _requested(single.topics)
    error, entries = _fetch(ctx, single.group_id, requested, version >= 7 and bool(single.require_stable))
    if error is not ErrorCode.none:
        entries = {tp: OffsetFetchEntry(error=error) for tp in requested or ()} if version == 1 else {}
    topics = _topics(ctx, entries, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition")
    return ctx.response(throttle_time=throttle, topics=topics, error_code=error)
