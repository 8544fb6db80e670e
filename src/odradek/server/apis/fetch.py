"""Fetch (key 1): stored record batches, long-polled, in incremental fetch sessions (KIP-227).

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
(read_committed); followers (replica_id >= 0) up to the log end.

Sessions (v7+): ``ctx.services.fetch_manager`` (:mod:`odradek.server.fetch_session`) turns the
request's ``session_id`` / ``session_epoch`` / ``forgotten_topics_data`` into a context that says
which partitions to read (the request's, or a session's, incremental requests naming only what
changed) and which of the reads to answer; a session error answers at once with no partitions.
As Kafka's ``handleFetchRequest``: a partition whose topic id is unknown is UNKNOWN_TOPIC_ID, one
the consumer may not READ (or any, for a follower without CLUSTER_ACTION) TOPIC_AUTHORIZATION_FAILED,
without being read; a request with nothing to read is answered at once. A throttled answer
(fetch byte-rate quota) is empty and keeps the session (its epoch moved on).

Per partition: OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, and
(v9+, KIP-320) FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when ``current_leader_epoch`` is older /
newer than the leader's. A follower's fetch offset is its log end offset: the leader records it
(``Partition.update_follower_fetch_state``) for every partition of the session at each fetch,
which moves the high watermark and the ISR.
The response is framed by :mod:`odradek.protocol.fetch_response` around the stored batches:
small partition reads as bytes from one ``pread``, large ones (``SENDFILE_MIN_BYTES``) as file
slices the connection sends with ``sendfile`` straight from the page cache. Runs on the broker's
event loop; loops over a session's partitions give the loop a turn every slice
(:mod:`odradek.replication.pacing`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.fetch_response import FetchedPartition, NodeEndpoint, encode_fetch_response
from odradek.replication.pacing import Pacer
from odradek.replication.replica_manager import FetchPartitionResult, FetchRequestPartition
from odradek.server.apis.leader_hints import HINTED_ERRORS, current_leader, hinted_brokers
from odradek.server.auth_helper import AclOperation, ResourceType, authorize_cluster, filter_authorized
from odradek.server.client_quotas import max_quota_window_bytes, record_quota, unrecord_quota
from odradek.server.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID, PartitionData, PartitionKey
from odradek.server.metadata_cache import ZERO_UUID
from odradek.server.request import RequestContext
from odradek.server.request_limits import MAX_ENTRIES, setting
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from kio.schema.fetch.v4 import request as fetch_v4
    from kio.schema.fetch.v5 import request as fetch_v5
    from kio.schema.fetch.v7 import request as fetch_v7
    from kio.schema.fetch.v9 import request as fetch_v9
    from kio.schema.fetch.v12 import request as fetch_v12
    from kio.schema.fetch.v13 import request as fetch_v13
    from kio.schema.fetch.v15 import request as fetch_v15

    from odradek.server.apis.request_types import FetchRequest

API_KEY = ApiKey.FETCH
MIN_VERSION = 4
MAX_VERSION = 17

# Fields by the first version that has them. The request is read by version number (the codec
# decoded it with that version's class), so only the version a client uses is ever imported; the
# casts name, for the type checker, the oldest version with the field read.
_SESSIONS = 7
"""Before v7 a fetch is always sessionless (no session fields, no forgotten topics)."""
_LOG_START = 5
_LEADER_EPOCH = 9
_LAST_FETCHED_EPOCH = 12
_TOPIC_IDS = 13
_REPLICA_STATE = 15
"""v15+ carry the follower's id in ``replica_state`` (KIP-903) instead of ``replica_id``."""


def _replica_id(req: FetchRequest, version: int) -> int:
    if version >= _REPLICA_STATE:
        return int(cast("fetch_v15.FetchRequest", req).replica_state.replica_id)
    return int(cast("fetch_v4.FetchRequest", req).replica_id)


def _fetch_data(req: FetchRequest, version: int, names: Mapping[uuid.UUID, str]) -> list[PartitionData]:
    """The request's partitions: by id (v13+, the name None when unknown here) or by name."""
    out: list[PartitionData] = []
    by_id = version >= _TOPIC_IDS
    log_start = version >= _LOG_START
    leader_epoch = version >= _LEADER_EPOCH
    last_fetched = version >= _LAST_FETCHED_EPOCH
    for t in req.topics:
        if by_id:
            topic_id = cast("fetch_v13.FetchTopic", t).topic_id or ZERO_UUID  # kio reads the zero id as None
            name = names.get(topic_id)
        else:
            topic_id, name = ZERO_UUID, cast("fetch_v4.FetchTopic", t).topic
        for p in t.partitions:
            out.append(
                PartitionData(
                    name,
                    topic_id,
                    int(p.partition),
                    int(p.fetch_offset),
                    int(cast("fetch_v5.FetchPartition", p).log_start_offset) if log_start else -1,
                    int(p.partition_max_bytes),
                    int(cast("fetch_v9.FetchPartition", p).current_leader_epoch) if leader_epoch else -1,
                    int(cast("fetch_v12.FetchPartition", p).last_fetched_epoch) if last_fetched else -1,
                )
            )
    return out


def _forgotten(req: FetchRequest, version: int) -> list[PartitionKey]:
    if version < _SESSIONS:
        return []
    out: list[PartitionKey] = []
    by_id = version >= _TOPIC_IDS
    for t in cast("fetch_v7.FetchRequest", req).forgotten_topics_data:
        # keyed as PartitionData.key: by id from v13, the zero id (kio reads it as None) as the empty name
        key: str | uuid.UUID = (cast("fetch_v13.ForgottenTopic", t).topic_id or "") if by_id else t.topic
        if key == ZERO_UUID:
            key = ""
        out.extend((key, int(p)) for p in t.partitions)
    return out


async def handle(ctx: RequestContext[FetchRequest]) -> list[Any]:
    req = ctx.request
    version = ctx.api_version
    services = ctx.services
    names = services.metadata_cache.topic_names if version >= 13 else {}
    replica_id = _replica_id(req, version)
    if version < _SESSIONS:
        session_id, epoch = INVALID_SESSION_ID, FINAL_EPOCH
    else:
        with_session = cast("fetch_v7.FetchRequest", req)
        session_id, epoch = int(with_session.session_id), int(with_session.session_epoch)
    fetch_context = services.fetch_manager.new_context(
        version,
        session_id,
        epoch,
        replica_id >= 0,
        _fetch_data(req, version, names),
        _forgotten(req, version),
        names,
        _now_ms(),
        setting(services.config, MAX_ENTRIES),
    )
    interesting, erroneous, unknown_id = await _split(ctx, replica_id, fetch_context.partitions())
    if replica_id >= 0:
        ctx.mark_from_follower()
    max_bytes, min_bytes = int(req.max_bytes), int(req.min_bytes)
    fetch_quotas = services.client_quotas.fetch if replica_id < 0 else None
    if fetch_quotas is not None and fetch_quotas.quotas:
        # Kafka's handleFetchRequest: no more than the quota lets through in one quota window
        # (a larger answer is a certain throttle, and a throttled answer is empty: no progress).
        max_bytes = int(min(max_bytes, max_quota_window_bytes(ctx, fetch_quotas)))
        min_bytes = min(min_bytes, max_bytes)
    max_wait_ms = 0 if unknown_id else int(req.max_wait.total_seconds() * 1000)
    clock = fetch_context.clock if replica_id >= 0 else None
    rm = services.replica_manager

    async def read(wait_ms: int) -> list[FetchPartitionResult]:
        if not interesting and clock is None:
            return []
        return await rm.fetch_messages(
            [
                FetchRequestPartition(
                    TopicPartition(p.topic, p.partition),
                    p.fetch_offset,
                    p.max_bytes,
                    p.current_leader_epoch,
                    p.last_fetched_epoch,
                )
                for p in interesting
                if p.topic is not None
            ],
            max_wait_ms=wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=int(req.isolation_level),
            replica_id=replica_id,
            on_delay=ctx.mark_delayed,
            clock=clock,
        )

    if not fetch_context.watching:
        results = await read(max_wait_ms) if interesting else []
    else:  # the session's changed partitions; while none has anything to answer, wait for the next change
        deadline = time.monotonic() + max_wait_ms / 1000.0
        delayed = False
        while True:
            results = await read(0)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or rm.satisfied(results, min_bytes):
                break
            if not delayed:
                delayed = True
                ctx.mark_delayed()
            if not await fetch_context.wait_for_change(remaining):
                break  # nothing changed: the last read holds
            interesting, erroneous, unknown_id = await _split(ctx, replica_id, fetch_context.partitions())
    if fetch_quotas is not None and fetch_quotas.quotas:  # consumer_byte_rate: the records answered
        answered = sum(r.records_size for r in results)
        ctx.throttle_ms = record_quota(ctx, fetch_quotas, answered)
        if ctx.throttle_ms > 0:  # Kafka's getThrottledResponse: nothing answered, nothing counted
            unrecord_quota(ctx, fetch_quotas, answered)
            error_code, session_id = fetch_context.throttled()
            return encode_fetch_response(
                version,
                ctx.header.correlation_id,
                [],
                throttle_time_ms=ctx.throttle_ms,
                error_code=error_code,
                session_id=session_id,
            )
    stats = services.topic_stats
    if stats is not None:
        for r in results:
            stats.fetched(r.topic_partition.topic, r.records_size, r.error_code != ErrorCode.none, replica_id >= 0)
    answer = fetch_context.answer(list(zip(interesting, results, strict=True)) + erroneous, _now_ms())
    by_topic: dict[str | uuid.UUID, list[FetchedPartition]] = {}
    pacer = Pacer()
    for p, r in answer.partitions:
        await pacer.step()
        by_topic.setdefault(p.topic_id if version >= 13 else p.topic or "", []).append(_fetched(ctx, version, r))
    return encode_fetch_response(
        version,
        ctx.header.correlation_id,
        list(by_topic.items()),
        throttle_time_ms=ctx.throttle_ms,
        error_code=answer.error_code,
        session_id=answer.session_id,
        node_endpoints=_node_endpoints(ctx, by_topic.values()),
    )


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


async def _split(
    ctx: RequestContext[FetchRequest], replica_id: int, wanted: list[PartitionData]
) -> tuple[list[PartitionData], list[tuple[PartitionData, FetchPartitionResult]], bool]:
    """The partitions to read, those answered with an error unread (an unknown topic id, a topic
    the fetcher may not read), and whether a topic id was unknown."""
    readable = _readable(ctx, replica_id, {p.topic for p in wanted if p.topic is not None})
    erroneous: list[tuple[PartitionData, FetchPartitionResult]] = []
    interesting: list[PartitionData] = []
    unknown_id = False
    pacer = Pacer()
    for p in wanted:
        await pacer.step()
        if p.topic is None:
            unknown_id = True
            erroneous.append((p, _error(p, ErrorCode.unknown_topic_id)))
        elif p.topic not in readable:
            erroneous.append((p, _error(p, ErrorCode.topic_authorization_failed)))
        else:
            interesting.append(p)
    return interesting, erroneous, unknown_id


def _fetched(ctx: RequestContext[FetchRequest], version: int, r: FetchPartitionResult) -> FetchedPartition:
    return FetchedPartition(
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


def _node_endpoints(
    ctx: RequestContext[FetchRequest], answered: Iterable[list[FetchedPartition]]
) -> list[NodeEndpoint]:
    """The hinted leaders' addresses (v16+ ``node_endpoints``); empty when nothing was hinted."""
    leaders = (p.current_leader[0] for parts in answered for p in parts if p.current_leader)
    return [NodeEndpoint(b.id, b.host, b.port, b.rack) for b in hinted_brokers(ctx, leaders)]


def _readable(ctx: RequestContext[FetchRequest], replica_id: int, topics: set[str]) -> set[str]:
    """The topics this fetch may read: every one for a follower with CLUSTER_ACTION, none for a
    follower without it, else those the consumer may READ (Kafka's ``handleFetchRequest``)."""
    if replica_id >= 0:
        return topics if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION) else set()
    return filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, sorted(topics))


def _error(p: PartitionData, error: ErrorCode) -> FetchPartitionResult:
    """The answer for a partition not read (its topic unknown or not readable)."""
    return FetchPartitionResult(TopicPartition(p.topic or "", p.partition), error, records=b"")
