"""TxnOffsetCommit (key 28): a transactional producer commits a consumer group's offsets.

v0..v4. Sent to the group's coordinator after AddOffsetsToTxn; the offsets are written to
``__consumer_offsets`` with the producer's transaction and become the group's committed offsets
only when the transaction commits (:mod:`odradek.coordinator.group.txn_offsets`). Per-partition
errors: UNKNOWN_TOPIC_OR_PARTITION (a topic this cluster does not have), NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, OFFSET_METADATA_TOO_LARGE. The v3+
generation/member fields (KIP-447) are accepted; the producer's epoch is what fences a zombie,
on the transaction coordinator.
"""

from __future__ import annotations

import datetime
import time
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.group.schemas import OffsetAndMetadata
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from kio.schema.txn_offset_commit.v2 import request as txn_offset_commit_v2
    from kio.schema.txn_offset_commit.v3 import request as txn_offset_commit_v3

    from odradek.server.apis.request_types_txn import TxnOffsetCommitRequest

API_KEY = ApiKey.TXN_OFFSET_COMMIT
MIN_VERSION = 0
MAX_VERSION = 4

# Fields by the first version that has them. The request is read by version number (the codec
# decoded it with that version's class), so only the version a client uses is ever imported; the
# casts name, for the type checker, the oldest version with the field read.
_LEADER_EPOCH = 2
"""v2+ partitions carry ``committed_leader_epoch``."""
_MEMBER = 3
"""v3+ (KIP-447) carry the consumer's group member (``member_id``, ``generation_id``)."""


async def handle(ctx: RequestContext[TxnOffsetCommitRequest]) -> Any:
    req = ctx.request
    now = int(time.time() * 1000)
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    limit = ctx.services.config.get_int("offset.metadata.max.bytes")
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        refused: ErrorCode | None = ErrorCode.transactional_id_authorization_failed
    elif not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        refused = ErrorCode.group_authorization_failed
    else:
        refused = None
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in req.topics])
    for topic in req.topics:
        known = ctx.services.metadata_cache.topic(topic.name) is not None
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            metadata = p.committed_metadata or ""
            if refused is not None:
                errors[tp] = refused
            elif topic.name not in readable:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif not known:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode()) > limit:
                errors[tp] = ErrorCode.offset_metadata_too_large
            else:
                epoch = (
                    -1
                    if ctx.api_version < _LEADER_EPOCH
                    else int(cast("txn_offset_commit_v2.TxnOffsetCommitRequestPartition", p).committed_leader_epoch)
                )
                offsets[tp] = OffsetAndMetadata(int(p.committed_offset), metadata, now, epoch)
    if offsets:
        groups = ctx.services.group_coordinator
        member: tuple[str, int] = ("", -1)
        if ctx.api_version >= _MEMBER:
            with_member = cast("txn_offset_commit_v3.TxnOffsetCommitRequest", req)
            member = (with_member.member_id, int(with_member.generation_id))
        errors.update(
            await groups.txn_commit_offsets(
                req.group_id, int(req.producer_id), int(req.producer_epoch), offsets, *member
            )
        )
    by_topic: dict[str, list[Any]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            ctx.make("TxnOffsetCommitResponsePartition", partition_index=tp.partition, error_code=error)
        )
    topics = tuple(ctx.make("TxnOffsetCommitResponseTopic", name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return ctx.response(throttle_time=datetime.timedelta(0), topics=topics)
