"""Fetch (key 1): stored record batches, long-polled.

v4..v17 (Kafka 3.9's range from v4). v13+ name topics by id (KIP-516): an id the metadata cache
does not know (or the zero id) is answered UNKNOWN_TOPIC_ID for each of its partitions, and the
response names topics by id too. v15+ carry the follower's id in the tagged ``ReplicaState``
(KIP-903) instead of ``replica_id``; v17's ``replica_directory_id`` is accepted and unused (one log
directory per partition, no JBOD moves). v16+ answers NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH
with the leader this broker knows (tagged ``current_leader`` and ``node_endpoints``, KIP-951,
:mod:`odradek.server.apis.leader_hints`). Waits up to ``max_wait_ms`` until
``min_bytes`` are available; ``max_bytes`` bounds the response and ``partition_max_bytes`` each
partition, but the first partition with data returns at least one whole batch (KIP-74). Consumers
(replica_id -1) read up to the high watermark (read_uncommitted) or the last stable offset
(read_committed); followers (replica_id >= 0) up to the log end. Fetch sessions (KIP-227) are not
kept: every answer has session_id 0, which clients treat as a full, sessionless fetch.

Per partition: OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, and
(v9+, KIP-320) FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when ``current_leader_epoch`` is older /
newer than the leader's. A follower's fetch offset is its log end offset: the leader records it
(``Partition.update_follower_fetch_state``), which moves the high watermark and the ISR.
The response is framed by :mod:`odradek.protocol.fetch_response` around the stored batches:
small partition reads as bytes from one ``pread``, large ones (``SENDFILE_MIN_BYTES``) as file
slices the connection sends with ``sendfile`` straight from the page cache.
"""

from __future__ import annotations

from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.fetch_response import FetchedPartition, NodeEndpoint, encode_fetch_response
from odradek.replication.replica_manager import FetchRequestPartition
from odradek.server.apis.leader_hints import HINTED_ERRORS, current_leader, hinted_brokers
from odradek.server.auth_helper import AclOperation, ResourceType, authorize_cluster, filter_authorized
from odradek.server.client_quotas import max_quota_window_bytes, record_quota, unrecord_quota
from odradek.server.metadata_cache import ZERO_UUID
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

API_KEY = ApiKey.FETCH
MIN_VERSION = 4
MAX_VERSION = 17


def _replica_id(req: Any, version: int) -> int:
    if version >= 15:
        state = getattr(req, "replica_state", None)
        return -1 if state is None else int(state.replica_id)
    return int(req.replica_id)


async def handle(ctx: RequestContext) -> list[Any]:
    req = ctx.request
    version = ctx.api_version
    by_id = version >= 13
    names = ctx.services.metadata_cache.topic_names if by_id else {}
    keys: dict[str, Any] = {}  # topic name -> how the response names it (name, or id from v13)
    unknown: list[tuple[Any, list[FetchedPartition]]] = []
    requests: list[FetchRequestPartition] = []
    replica_id = _replica_id(req, version)
    readable = _readable(ctx, replica_id, req.topics, names if by_id else None)
    denied: list[tuple[Any, list[FetchedPartition]]] = []
    for t in req.topics:
        topic_id = (t.topic_id or ZERO_UUID) if by_id else None  # kio reads the zero id as None
        name = names.get(topic_id) if topic_id is not None else t.topic
        if name is None:
            unknown.append((topic_id, [_unknown_topic_id(p.partition) for p in t.partitions]))
            continue
        if name not in readable:
            denied.append((topic_id if by_id else name, [_denied(p.partition) for p in t.partitions]))
            continue
        keys[name] = topic_id if by_id else name
        requests.extend(
            FetchRequestPartition(
                TopicPartition(name, p.partition),
                p.fetch_offset,
                p.partition_max_bytes,
                getattr(p, "current_leader_epoch", -1),
                getattr(p, "last_fetched_epoch", -1),
            )
            for p in t.partitions
        )
    max_wait_ms = int(req.max_wait.total_seconds() * 1000)
    if replica_id >= 0:
        ctx.mark_from_follower()
    max_bytes, min_bytes = getattr(req, "max_bytes", 2**31 - 1), req.min_bytes
    fetch_quotas = ctx.services.client_quotas.fetch if replica_id < 0 else None
    if fetch_quotas is not None and fetch_quotas.quotas:
        # Kafka's handleFetchRequest: no more than the quota lets through in one quota window
        # (a larger answer is a certain throttle, and a throttled answer is empty: no progress).
        max_bytes = int(min(max_bytes, max_quota_window_bytes(ctx, fetch_quotas)))
        min_bytes = min(min_bytes, max_bytes)
    results = await ctx.services.replica_manager.fetch_messages(
        requests,
        max_wait_ms=0 if unknown or (denied and not requests) else max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=getattr(req, "isolation_level", 0),
        replica_id=replica_id,
        on_delay=ctx.mark_delayed,
    )
    if fetch_quotas is not None and fetch_quotas.quotas:  # consumer_byte_rate: the records answered
        answered = sum(r.records_size for r in results)
        ctx.throttle_ms = record_quota(ctx, fetch_quotas, answered)
        if ctx.throttle_ms > 0:  # Kafka's getThrottledResponse: nothing answered, nothing counted
            unrecord_quota(ctx, fetch_quotas, answered)
            return encode_fetch_response(version, ctx.header.correlation_id, [], throttle_time_ms=ctx.throttle_ms)
    stats = ctx.services.topic_stats
    if stats is not None:
        for r in results:
            stats.fetched(r.topic_partition.topic, r.records_size, r.error_code != ErrorCode.none, replica_id >= 0)
    by_topic: dict[Any, list[FetchedPartition]] = {}
    for r in results:
        by_topic.setdefault(keys[r.topic_partition.topic], []).append(
            FetchedPartition(
                partition_index=r.topic_partition.partition,
                error_code=int(r.error_code),
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                records=r.records if r.records is not None else b"",
                aborted_transactions=r.aborted_transactions if r.error_code == ErrorCode.none else (),
                diverging_epoch=r.diverging_epoch,
                current_leader=current_leader(ctx, r.topic_partition)
                if version >= 16 and r.error_code in HINTED_ERRORS
                else None,
            )
        )
    topics = list(by_topic.items()) + denied + unknown
    return encode_fetch_response(
        version,
        ctx.header.correlation_id,
        topics,
        throttle_time_ms=ctx.throttle_ms,
        node_endpoints=_node_endpoints(ctx, by_topic.values()),
    )


def _node_endpoints(ctx: RequestContext, answered: Any) -> list[NodeEndpoint]:
    """The hinted leaders' addresses (v16+ ``node_endpoints``); empty when nothing was hinted."""
    leaders = (p.current_leader[0] for parts in answered for p in parts if p.current_leader)
    return [NodeEndpoint(b.id, b.host, b.port, b.rack) for b in hinted_brokers(ctx, leaders)]


def _readable(ctx: RequestContext, replica_id: int, topics: Any, names: Any) -> set[str]:
    """The topics this fetch may read: every one for a follower with CLUSTER_ACTION, none for a
    follower without it, else those the consumer may READ (Kafka's ``handleFetchRequest``)."""
    requested = [names.get(t.topic_id or ZERO_UUID) if names is not None else t.topic for t in topics]
    present = [n for n in requested if n is not None]
    if replica_id >= 0:
        return set(present) if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION) else set()
    return filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, present)


def _denied(partition: int) -> FetchedPartition:
    return FetchedPartition(partition, int(ErrorCode.topic_authorization_failed), -1, -1, -1, b"")


def _unknown_topic_id(partition: int) -> FetchedPartition:
    return FetchedPartition(partition, int(ErrorCode.unknown_topic_id), -1, -1, -1, b"")
