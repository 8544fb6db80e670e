"""ListOffsets (key 2): offsets by timestamp.

v0 (Kafka 3.9's ``handleListOffsetRequestV0``; removed in 4.0): each partition asks for at most
``max_num_offsets`` offsets and is answered ``old_style_offsets``, latest first, from the segment
starts (see :meth:`~odradek.storage.local_log.LocalLog.legacy_fetch_offsets_before`): -1 gives
the log end offset (then segment starts, as many as asked), -2 the log start offset, any other
timestamp the starts of segments last modified at or before it (file mtimes, not record
timestamps; none: an empty list). For a consumer (replica_id -1) offsets above the high
watermark are replaced by the high watermark, so latest is the high watermark. A replica id of
-2 (debugging) may ask a follower. Errors answer no offsets; a negative ``max_num_offsets``
UNKNOWN_SERVER_ERROR (Kafka fails building the array). The response has no throttle time.

v1..v9. Timestamps: -2 earliest (log start offset), -1 latest (high watermark, or the last
stable offset for read_committed), -3 the record with the largest timestamp (v7+), -4 earliest
local (v8+, KIP-405: the log start offset, as Kafka without tiered storage), -5 latest tiered
(v9+, KIP-1005: offset -1 and leader epoch -1, as Kafka without tiered storage), otherwise the
first offset whose timestamp is at least the given one; (-1, -1) when no record qualifies.
"""

from __future__ import annotations

import datetime
import itertools
import logging
from typing import TYPE_CHECKING, Any, cast

from kio.static.primitive import i64

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import legacy_messages as legacy
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from kio.schema.list_offsets.v2 import request as list_offsets_v2

    from odradek.server.apis.request_types import ListOffsetsRequest

API_KEY = ApiKey.LIST_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 9

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext[ListOffsetsRequest]) -> Any:
    req = ctx.request
    if isinstance(req, legacy.ListOffsetsRequestV0):
        return handle_v0(ctx, req)
    rm = ctx.services.replica_manager
    # v2+ carry isolation_level (read by version number: only the version a client uses is imported)
    isolation = 0 if ctx.api_version < 2 else cast("list_offsets_v2.ListOffsetsRequest", req).isolation_level
    topics = []
    described = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in req.topics])
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            error = ErrorCode.none
            offset, timestamp, epoch = -1, -1, -1
            if topic.name not in described:
                error = ErrorCode.topic_authorization_failed
            else:
                try:
                    offset, timestamp = rm.fetch_offset_for_timestamp(tp, p.timestamp, isolation)
                    epoch = rm.get_partition(tp).leader_epoch if offset >= 0 else -1
                except KafkaError as exc:
                    error = exc.error_code
            partitions.append(
                ctx.make(
                    "ListOffsetsPartitionResponse",
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(ctx.make("ListOffsetsTopicResponse", name=topic.name, partitions=tuple(partitions)))
    return ctx.response(throttle_time=datetime.timedelta(0), topics=tuple(topics))


def handle_v0(
    ctx: RequestContext[ListOffsetsRequest], req: legacy.ListOffsetsRequestV0
) -> legacy.ListOffsetsResponseV0:
    """ListOffsets v0: each partition's ``old_style_offsets`` (see the module docstring)."""
    described = filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.name for t in req.topics])
    topics = []
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            error, offsets = ErrorCode.none, []
            if topic.name not in described:
                error = ErrorCode.topic_authorization_failed
            elif p.max_num_offsets < 0:
                log.error("Error while responding to offset request: max_num_offsets %d", p.max_num_offsets)
                error = ErrorCode.unknown_server_error
            else:
                try:
                    offsets = _legacy_offsets(ctx, req.replica_id, topic.name, p)
                except KafkaError as exc:
                    error = exc.error_code
            old_style = tuple(i64(o) for o in offsets)
            partitions.append(
                legacy.ListOffsetsPartitionResponseV0(
                    partition_index=p.partition_index, error_code=error, old_style_offsets=old_style
                )
            )
        topics.append(legacy.ListOffsetsTopicResponseV0(name=topic.name, partitions=tuple(partitions)))
    return legacy.ListOffsetsResponseV0(topics=tuple(topics))


def _legacy_offsets(
    ctx: RequestContext[ListOffsetsRequest], replica_id: int, topic: str, p: legacy.ListOffsetsPartitionV0
) -> list[int]:
    """Kafka's ``Partition.legacyFetchOffsetsForTimestamp`` for one partition of a v0 request."""
    rm = ctx.services.replica_manager
    tp = TopicPartition(topic, p.partition_index)
    partition = rm.get_partition(tp) if replica_id == DEBUGGING_REPLICA_ID else rm.leader_partition(tp)
    offsets = partition.log.legacy_fetch_offsets_before(p.timestamp, p.max_num_offsets)
    if replica_id != CONSUMER_REPLICA_ID:
        return offsets
    hw = partition.high_watermark
    if any(o > hw for o in offsets):
        return [hw, *itertools.dropwhile(lambda o: o > hw, offsets)]
    return offsets
