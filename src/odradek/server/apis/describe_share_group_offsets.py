"""DescribeShareGroupOffsets (key 90): each share-partition's start offset, leader epoch and lag
for share groups (KIP-932; :mod:`odradek.coordinator.group.share_offsets`).

v0..v1 (v1 adds the lag: -1 where this coordinator hosts no replica of the partition to read its
high watermark from). As Kafka: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for that
group), DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions); null topics: every
topic the group has share state for. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for every
group request; a classic or consumer group is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.coordinator.group.share_offsets import PartitionOffset, TopicOffsets
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_group_offsets_support import denied_topics, share_offsets
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 1
MAX_GROUPS = 1000


def _partition(ctx: RequestContext, p: PartitionOffset) -> Any:
    return ctx.make(
        "DescribeShareGroupOffsetsResponsePartition",
        partition_index=p.partition,
        start_offset=p.start_offset,
        leader_epoch=p.leader_epoch,
        lag=p.lag,
        error_code=p.error,
        error_message=p.message,
    )


async def handle(ctx: RequestContext) -> Any:
    offsets = share_offsets(ctx)
    groups = []
    for g in ctx.request.groups[:MAX_GROUPS]:
        topics = None if g.topics is None else [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
        found: TopicOffsets = []
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            error, message = ErrorCode.group_authorization_failed, None
        else:
            error, message, found = await offsets.describe(g.group_id, topics)
        denied = denied_topics(ctx, AclOperation.DESCRIBE, [name for name, _, _ in found])
        answered = [
            ctx.make(
                "DescribeShareGroupOffsetsResponseTopic",
                topic_name=name,
                topic_id=topic_id,
                partitions=tuple(
                    _partition(ctx, PartitionOffset(p.partition, error=ErrorCode.topic_authorization_failed))
                    if name in denied
                    else _partition(ctx, p)
                    for p in parts
                ),
            )
            for name, topic_id, parts in found
        ]
        groups.append(
            ctx.make(
                "DescribeShareGroupOffsetsResponseGroup",
                group_id=g.group_id,
                topics=tuple(answered),
                error_code=error,
                error_message=message,
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), groups=tuple(groups))
