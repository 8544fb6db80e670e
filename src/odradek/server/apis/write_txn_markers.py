"""WriteTxnMarkers (key 27): a transaction coordinator writes COMMIT/ABORT markers on partition leaders.

v1 (Kafka 4.0 removed v0, and the protocol library has no codec for it). For every marker
(producer id, producer epoch, result, coordinator epoch) and every partition named, this broker,
which must lead the partition, appends one control batch (Kafka's ``EndTransactionMarker``:
attributes transactional + control, one record whose key is version 0 + type (0 ABORT, 1 COMMIT)
and whose value is version 0 + the coordinator epoch), then waits, as acks=all, until the ISR has
it. The wire shape is :mod:`odradek.client.write_txn_markers`'s; the response answers each marker's
partitions per topic in request order (adjacent partitions of one topic under one entry, as Kafka's
per-partition map). Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
INVALID_PRODUCER_EPOCH when the producer already wrote with a newer epoch on the partition (a
zombie coordinator's marker), REQUEST_TIMED_OUT.

A marker closes the producer's open transaction on the partition, moving the last stable offset;
an ABORT adds an entry to the segment's ``.txnindex`` (:mod:`odradek.storage.txn_state`). After
markers were written to ``__consumer_offsets`` partitions, the group coordinator is told
(``handle_txn_completion(producer_id, partitions, commit)``) so it can materialise or drop the
producer's transactional offset commits.

Controller-like inter-broker API: accepted from any client, as Kafka without an authorizer.
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any

from odradek.client import write_txn_markers as message
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record, build_batch
from odradek.replication.pacing import Pacer
from odradek.server.auth_helper import authorize_cluster_action
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types import WriteTxnMarkersRequest

API_KEY = message.API_KEY
MIN_VERSION = message.MIN_VERSION
MAX_VERSION = message.MAX_VERSION

CONSUMER_OFFSETS = "__consumer_offsets"
MARKER_TIMEOUT_MS = 30_000


def control_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> bytes:
    """One control batch holding a COMMIT (``commit``) or ABORT marker."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [Record(key, value)],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
    )


def append_marker(
    ctx: RequestContext, tp: TopicPartition, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
) -> ErrorCode | int:
    """Append one marker to ``tp``: the offset the ISR must reach for it, or the partition's error."""
    rm = ctx.services.replica_manager
    try:
        partition = rm.leader_partition(tp)
        entry = partition.producer_state.producers.get(producer_id)
        if entry is not None and entry.epoch > producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            return ErrorCode.transaction_coordinator_fenced  # a newer coordinator already wrote a marker
        info = rm.append_records(
            tp, control_batch(producer_id, producer_epoch, commit, coordinator_epoch), -1, "coordinator"
        )
    except KafkaError as exc:
        return exc.error_code
    return info.last_offset + 1


async def _await_isr(ctx: RequestContext, tp: TopicPartition, appended: ErrorCode | int) -> ErrorCode:
    if isinstance(appended, ErrorCode):
        return appended
    return await ctx.services.replica_manager.wait_for_acks(tp, appended, MARKER_TIMEOUT_MS)


async def handle(ctx: RequestContext[WriteTxnMarkersRequest]) -> Any:
    """Every marker is appended first, in paced steps (a request may name thousands of
    partitions), then the ISR waits run together, as Kafka's one DelayedProduce for the request:
    the request takes at most one ``MARKER_TIMEOUT_MS``, however many partitions time out."""
    markers = message.decode(ctx.request)
    if not authorize_cluster_action(ctx):
        denied = ErrorCode.cluster_authorization_failed
        return message.encode_response(
            ctx.api_version, [(m.producer_id, [(tp, denied) for tp in m.partitions]) for m in markers]
        )
    pacer = Pacer()
    appended: list[list[ErrorCode | int]] = []
    for marker in markers:
        appended.append([])
        for tp in marker.partitions:
            await pacer.step()
            appended[-1].append(
                append_marker(
                    ctx, tp, marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch
                )
            )
    waits = [
        _await_isr(ctx, tp, a)
        for m, done in zip(markers, appended, strict=True)
        for tp, a in zip(m.partitions, done, strict=True)
    ]
    errors = iter(await asyncio.gather(*waits))
    results = []
    for marker in markers:
        outcome = [(tp, next(errors)) for tp in marker.partitions]
        offsets_partitions = {tp.partition for tp, e in outcome if e == ErrorCode.none and tp.topic == CONSUMER_OFFSETS}
        if offsets_partitions:
            await ctx.services.group_coordinator.handle_txn_completion(
                marker.producer_id, offsets_partitions, marker.commit
            )
        results.append((marker.producer_id, outcome))
    return message.encode_response(ctx.api_version, results)
