"""Leader hints in Produce and Fetch answers (KIP-951): where a partition's leader moved.

When a Produce (v10+) or Fetch (v12+ for ``current_leader``, v16+ for ``node_endpoints``)
partition is answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, Kafka puts the leader it
knows and that leader's epoch in the partition's ``current_leader`` tagged field, and the leaders'
addresses in the response's ``node_endpoints`` tagged field. A client that knows a lower epoch
switches to the new leader at once instead of refreshing its metadata after a backoff; that is
what keeps a controlled shutdown's leader moves invisible to producers.

The hint is the newer of two views: the metadata cache (UpdateMetadata) and the partition's own
LeaderAndIsr state, which reaches a broker that just lost leadership before UpdateMetadata does.
Unknown leader: ``(-1, -1)`` and no endpoint, as Kafka. Event loop only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

HINTED_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def current_leader(ctx: RequestContext, tp: TopicPartition) -> tuple[int, int]:
    """(leader id, leader epoch) this broker knows for ``tp``; (-1, -1) when it knows none."""
    best = (-1, -1)
    cached = ctx.services.metadata_cache.partition_state(tp)
    if cached is not None:
        best = (cached.leader, cached.leader_epoch)
    local = ctx.services.replica_manager.partitions.get(tp)
    if local is not None and local.state.leader_epoch > best[1]:
        best = (local.state.leader, local.state.leader_epoch)
    if best[0] < 0:
        return -1, -1
    return best


def hinted_brokers(ctx: RequestContext, leader_ids: Iterable[int]) -> list[BrokerInfo]:
    """The brokers to list in ``node_endpoints`` for ``leader_ids``, ordered by id; negative ids and
    brokers missing from the metadata cache, or without the request's listener, are left out; the
    addresses are those of the request's listener (KIP-103)."""
    brokers = ctx.services.metadata_cache.brokers_on(ctx.session.listener_name)
    return [brokers[i] for i in sorted(set(leader_ids)) if i in brokers]


def node_endpoints(ctx: RequestContext, entity: str, leader_ids: Iterable[int]) -> tuple[Any, ...]:
    """``entity`` (the response's kio NodeEndpoint type) for each of :func:`hinted_brokers`."""
    return tuple(
        ctx.make(entity, node_id=b.id, host=b.host, port=b.port, rack=b.rack) for b in hinted_brokers(ctx, leader_ids)
    )
