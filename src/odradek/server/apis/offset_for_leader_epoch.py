"""OffsetForLeaderEpoch (key 23): where a leader epoch ended, from the leader's epoch cache (KIP-101/279).

v2..v4 (the versions the codec has; v3 adds ``replica_id``). A follower asks, on becoming
follower, for the end offset of its latest epoch and truncates its divergent tail to it; clients
use it after a leader change (KIP-320) to detect log truncation.

Per partition, answered by the leader only: NONE with (leader_epoch, end_offset) per
:meth:`odradek.storage.leader_epoch.LeaderEpochFileCache.end_offset_for` (-1, -1 for an epoch the
leader does not know); UNKNOWN_TOPIC_OR_PARTITION; NOT_LEADER_OR_FOLLOWER; FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH when ``current_leader_epoch`` is older / newer than the leader's.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize_cluster, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import OffsetForLeaderEpochRequest

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
MIN_VERSION = 2
MAX_VERSION = 4


async def handle(ctx: RequestContext[OffsetForLeaderEpochRequest]) -> Any:
    replica_manager = ctx.services.replica_manager
    topics = []
    if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        described: set[str] = {t.topic for t in ctx.request.topics}
    else:  # consumers check for truncation with DESCRIBE (KIP-320)
        described = filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, [t.topic for t in ctx.request.topics]
        )
    for topic in ctx.request.topics:
        partitions = []
        for p in topic.partitions:
            error, epoch, end_offset = ErrorCode.none, -1, -1
            if topic.topic not in described:
                error = ErrorCode.topic_authorization_failed
            else:
                try:
                    epoch, end_offset = replica_manager.last_offset_for_leader_epoch(
                        TopicPartition(topic.topic, p.partition), p.current_leader_epoch, p.leader_epoch
                    )
                except KafkaError as exc:
                    error = exc.error_code
            partitions.append(
                ctx.make(
                    "EpochEndOffset", error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end_offset
                )
            )
        topics.append(ctx.make("OffsetForLeaderTopicResult", topic=topic.topic, partitions=tuple(partitions)))
    return ctx.response(throttle_time=datetime.timedelta(0), topics=tuple(topics))
