"""OffsetCommit (key 8): store a group's consumed positions.

v0..v9. Where offsets go depends on the version, as in Kafka:

- **v0** (Kafka 0.8.1/0.8.2 clients): ZooKeeper, ``/consumers/<group>/offsets/<topic>/<partition>``
  (decimal text; the metadata string is not stored), through the metadata store. Any broker
  answers; no group membership is involved.
- **v1+**: ``__consumer_offsets`` through the group coordinator, acknowledged once durable. v1
  carries a per-partition commit timestamp (-1: now); v2..v4 a retention time (-1: the broker's
  ``offsets.retention.minutes``, else the offset expires that long after the commit); v6+ the
  leader epoch; v7+ ``group_instance_id``. Generation -1 with an empty member id commits for a
  group that is not using group management (allowed only while it has no members).

Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE
(``offset.metadata.max.bytes``), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
INVALID_COMMIT_OFFSET_SIZE. A rejected commit writes nothing.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.group.schemas import OffsetAndMetadata
from odradek.errors import ErrorCode
from odradek.protocol import legacy_messages as legacy
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.join_group import millis
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kio.schema.offset_commit.v2 import request as commit_v2
    from kio.schema.offset_commit.v6 import request as commit_v6
    from kio.schema.offset_commit.v7 import request as commit_v7

    from odradek.server.apis.request_types import OffsetCommitRequest

API_KEY = ApiKey.OFFSET_COMMIT
MIN_VERSION = 0
MAX_VERSION = 9

# Fields by the first version that has them. The request is read by version number (the codec
# decoded it with that version's class), so only the version a client uses is ever imported; the
# casts name, for the type checker, the oldest version with the field read.
_RETENTION = range(2, 5)
"""v2..v4 carry ``retention_time``."""
_LEADER_EPOCH = 6
"""v6+ partitions carry ``committed_leader_epoch``."""
_INSTANCE_ID = 7
"""v7+ carry ``group_instance_id``."""

log = logging.getLogger(__name__)


async def _commit_to_zookeeper(
    ctx: RequestContext, valid: dict[TopicPartition, int]
) -> dict[TopicPartition, ErrorCode]:
    results: dict[TopicPartition, ErrorCode] = {}
    for tp, offset in valid.items():
        try:
            await ctx.services.zk.set_consumer_offset(ctx.request.group_id, tp, offset)
            results[tp] = ErrorCode.none
        except Exception:
            log.exception("writing the ZooKeeper offset of %s for group %s failed", tp, ctx.request.group_id)
            results[tp] = ErrorCode.unknown_server_error
    return results


async def handle(ctx: RequestContext[OffsetCommitRequest]) -> Any:
    req = ctx.request
    version = ctx.api_version
    broker = ctx.services
    now = int(time.time() * 1000)
    retention = millis(cast("commit_v2.OffsetCommitRequest", req).retention_time) if version in _RETENTION else -1
    max_metadata = broker.config.get_int("offset.metadata.max.bytes")
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    group_allowed = authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in req.topics])
    for topic in req.topics:
        meta = broker.metadata_cache.topic(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            metadata = p.committed_metadata or ""
            if not group_allowed:
                errors[tp] = ErrorCode.group_authorization_failed
            elif topic.name not in readable:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif meta is None or tp.partition not in meta.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif version == 0 and len(metadata.encode("utf-8")) > max_metadata:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                stamp = int(p.commit_timestamp) if isinstance(p, legacy.OffsetCommitRequestPartitionV1) else -1
                commit_ts = now if stamp < 0 else stamp
                offsets[tp] = OffsetAndMetadata(
                    offset=p.committed_offset,
                    metadata=metadata,
                    commit_timestamp_ms=commit_ts,
                    leader_epoch=-1
                    if version < _LEADER_EPOCH
                    else int(cast("commit_v6.OffsetCommitRequestPartition", p).committed_leader_epoch),
                    expire_timestamp_ms=commit_ts + retention if 2 <= version <= 4 and retention >= 0 else None,
                )
    if isinstance(req, legacy.OffsetCommitRequestV0):  # v0
        errors.update(await _commit_to_zookeeper(ctx, {tp: v.offset for tp, v in offsets.items()}))
    elif offsets:
        errors.update(
            await broker.group_coordinator.commit_offsets(
                req.group_id,
                req.member_id,
                None if version < _INSTANCE_ID else cast("commit_v7.OffsetCommitRequest", req).group_instance_id,
                int(req.generation_id_or_member_epoch),
                offsets,
            )
        )
    if version <= 1:
        return legacy.OffsetCommitResponseV0(
            topics=tuple(
                legacy.OffsetCommitResponseTopicV0(
                    name=t.name,
                    partitions=tuple(
                        legacy.OffsetCommitResponsePartitionV0(
                            partition_index=p.partition_index,
                            error_code=errors[TopicPartition(t.name, p.partition_index)],
                        )
                        for p in t.partitions
                    ),
                )
                for t in req.topics
            )
        )
    topics = tuple(
        ctx.make(
            "OffsetCommitResponseTopic",
            name=t.name,
            partitions=tuple(
                ctx.make(
                    "OffsetCommitResponsePartition",
                    partition_index=p.partition_index,
                    error_code=errors[TopicPartition(t.name, p.partition_index)],
                )
                for p in t.partitions
            ),
        )
        for t in req.topics
    )
    return ctx.response(throttle_time=datetime.timedelta(0), topics=topics)
