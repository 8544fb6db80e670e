"""Fetch (key 1): stored record batches, long-polled.

v4..v12 (topic names, not ids). Waits up to ``max_wait_ms`` until ``min_bytes`` are available;
``max_bytes`` bounds the response and ``partition_max_bytes`` each partition, but the first
partition with data returns at least one whole batch (KIP-74). Consumers (replica_id -1) read up
to the high watermark (read_uncommitted) or the last stable offset (read_committed); followers
(replica_id >= 0) up to the log end. Fetch sessions (KIP-227) are not kept: every answer has
session_id 0, which clients treat as a full, sessionless fetch.

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
from odradek.protocol.fetch_response import FetchedPartition, encode_fetch_response
from odradek.replication.replica_manager import FetchRequestPartition
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12


async def handle(ctx: RequestContext) -> list[Any]:
    req = ctx.request
    requests = [
        FetchRequestPartition(
            TopicPartition(t.topic, p.partition),
            p.fetch_offset,
            p.partition_max_bytes,
            getattr(p, "current_leader_epoch", -1),
            getattr(p, "last_fetched_epoch", -1),
        )
        for t in req.topics
        for p in t.partitions
    ]
    max_wait_ms = int(req.max_wait.total_seconds() * 1000)
    results = await ctx.broker.replica_manager.fetch_messages(
        requests,
        max_wait_ms=max_wait_ms,
        min_bytes=req.min_bytes,
        max_bytes=getattr(req, "max_bytes", 2**31 - 1),
        isolation_level=getattr(req, "isolation_level", 0),
        replica_id=req.replica_id,
    )
    by_topic: dict[str, list[FetchedPartition]] = {}
    for r in results:
        by_topic.setdefault(r.topic_partition.topic, []).append(
            FetchedPartition(
                partition_index=r.topic_partition.partition,
                error_code=int(r.error_code),
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                records=r.records if r.records is not None else b"",
                aborted_transactions=r.aborted_transactions if r.error_code == ErrorCode.none else (),
                diverging_epoch=r.diverging_epoch,
            )
        )
    return encode_fetch_response(ctx.api_version, ctx.header.correlation_id, list(by_topic.items()))
