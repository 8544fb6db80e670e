"""DeleteRecords (key 21): move partitions' log start offsets forward.

v0..v2. Per partition: ``offset`` -1 means the high watermark; any other offset must be between
0 and the high watermark (OFFSET_OUT_OF_RANGE otherwise). Records below the new log start offset
become unreadable at once and their segments are deleted when wholly below it. An offset at or
below the current log start offset changes nothing. The answer is the partition's
``low_watermark`` (its new log start offset), or -1 with the error:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (this broker does not lead it),
OFFSET_OUT_OF_RANGE.

The leader answers as soon as its own log start offset moved: followers catch up on their next
fetch (Kafka waits for every replica's low watermark; ``timeout`` is not used). Runs on the
broker's event loop.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import DeleteRecordsRequest

API_KEY = ApiKey.DELETE_RECORDS
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1


def delete_records(ctx: RequestContext, tp: TopicPartition, offset: int) -> int:
    """The new low watermark of ``tp``; raises KafkaError subclasses per partition."""
    rm = ctx.services.replica_manager
    partition = rm.leader_partition(tp)
    high_watermark = partition.high_watermark
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > high_watermark:
        raise OffsetOutOfRangeError(
            f"Cannot increment the log start offset of {tp.topic}-{tp.partition} to {offset}: "
            f"the high watermark is {high_watermark}"
        )
    return rm.delete_records(tp, target)


async def handle(ctx: RequestContext[DeleteRecordsRequest]) -> Any:
    topics = []
    deletable = filter_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, [t.name for t in ctx.request.topics])
    for topic in ctx.request.topics:
        partitions = []
        for p in topic.partitions:
            error, low_watermark = ErrorCode.none, -1
            if topic.name not in deletable:
                error = ErrorCode.topic_authorization_failed
            else:
                try:
                    low_watermark = delete_records(ctx, TopicPartition(topic.name, p.partition_index), p.offset)
                except KafkaError as exc:
                    error = exc.error_code
                except Exception:
                    log.exception("DeleteRecords of %s-%d failed", topic.name, p.partition_index)
                    error = ErrorCode.unknown_server_error
            partitions.append(
                ctx.make(
                    "DeleteRecordsPartitionResult",
                    partition_index=p.partition_index,
                    low_watermark=low_watermark,
                    error_code=error,
                )
            )
        topics.append(ctx.make("DeleteRecordsTopicResult", name=topic.name, partitions=tuple(partitions)))
    return ctx.response(throttle_time=datetime.timedelta(0), topics=tuple(topics))
