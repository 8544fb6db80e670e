"""What the share group offset APIs (90-92) share: the coordinator-side view they act through
(:class:`~odradek.coordinator.group.share_offsets.ShareGroupOffsets`), with high watermarks from
the replicas this broker hosts, and topic authorization."""

from __future__ import annotations

from collections.abc import Iterable

from odradek.coordinator.group.share_offsets import ShareGroupOffsets
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition


def share_offsets(ctx: RequestContext) -> ShareGroupOffsets:
    rm = ctx.services.replica_manager

    def high_watermark(topic: str, partition: int) -> int | None:
        local = rm.partitions.get(TopicPartition(topic, partition))
        return None if local is None else local.high_watermark

    return ShareGroupOffsets(ctx.services.group_coordinator.share_groups, high_watermark)


def denied_topics(ctx: RequestContext, operation: AclOperation, names: Iterable[str]) -> set[str]:
    """The topics of ``names`` the client may not ``operation``."""
    wanted = sorted(set(names))
    return set(wanted) - set(filter_authorized(ctx, operation, ResourceType.TOPIC, wanted))
