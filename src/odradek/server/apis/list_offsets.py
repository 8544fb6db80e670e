"""ListOffsets (key 2): offsets by timestamp.

v1..v9. Timestamps: -2 earliest (log start offset), -1 latest (high watermark, or the last
stable offset for read_committed), -3 the record with the largest timestamp (v7+), -4 earliest
local (v8+, KIP-405: the log start offset, as Kafka without tiered storage), -5 latest tiered
(v9+, KIP-1005: offset -1 and leader epoch -1, as Kafka without tiered storage), otherwise the
first offset whose timestamp is at least the given one; (-1, -1) when no record qualifies.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.list_offsets import v1 as list_offsets_v1

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types import ListOffsetsRequest

API_KEY = ApiKey.LIST_OFFSETS
MIN_VERSION = 1
MAX_VERSION = 9


async def handle(ctx: RequestContext[ListOffsetsRequest]) -> Any:
    req = ctx.request
    rm = ctx.services.replica_manager
    isolation = 0 if isinstance(req, list_offsets_v1.ListOffsetsRequest) else req.isolation_level
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
