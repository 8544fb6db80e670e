"""Produce (key 0): append producers' record batches to partition leaders.

v3..v11. Each partition is answered on its own: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
CORRUPT_MESSAGE (CRC or framing), INVALID_RECORD (bad batch header), MESSAGE_TOO_LARGE
(``max.message.bytes``), NOT_ENOUGH_REPLICAS (acks=all with fewer in-sync replicas than
``min.insync.replicas``: nothing appended). With acks=all the answer waits until every in-sync
replica has the batch (the high watermark passes it), at most the request's ``timeout``:
REQUEST_TIMED_OUT after it, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
``min.insync.replicas`` meanwhile (the batch is in the leader's log), NOT_LEADER_OR_FOLLOWER if
leadership moved. ``acks`` must be 0, 1 or -1 (else
INVALID_REQUIRED_ACKS for every partition); with acks=0 no response is sent (Kafka closes the
connection on an error then, so the producer notices on its next request; odradek logs it and
keeps the connection). A produce to an unknown topic auto-creates it when
``auto.create.topics.enable`` is set, and is answered UNKNOWN_TOPIC_OR_PARTITION meanwhile
(retriable), as Kafka does. Clients may not write to internal topics (``__consumer_offsets``,
``__transaction_state``): INVALID_TOPIC_EXCEPTION; the coordinators append to them directly.

Records that break a per-record rule (a record without a key on a compacted topic; a timestamp
outside ``message.timestamp.before.max.ms`` / ``after.max.ms``; a producer-set LogAppendTime) fail
their partition with INVALID_RECORD or INVALID_TIMESTAMP, Kafka's ``error_message`` and, in v8+,
``record_errors`` (``batch_index`` and ``batch_index_error_message`` per rejected record, KIP-467);
nothing of that partition is appended. See :mod:`odradek.storage.log_validator`. A topic with
``confluent.value.schema.validation=true`` also refuses values without a schema id registered
under ``<topic>-value`` (INVALID_RECORD, :mod:`odradek.server.schema_validation`).

v10+ answers NOT_LEADER_OR_FOLLOWER with the leader this broker knows (``current_leader`` and
``node_endpoints``, KIP-951, :mod:`odradek.server.apis.leader_hints`).

Batches are appended exactly as received (offsets stamped in); records are decoded only for those
checks, which ordinary (uncompacted, no timestamp limit) topics never need.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from odradek.errors import ErrorCode, KafkaError, RecordValidationError
from odradek.metrics.broker_topic import BrokerTopicStats
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.leader_hints import HINTED_ERRORS, current_leader, node_endpoints
from odradek.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    filter_authorized,
    has_authorizer,
    may_auto_create,
)
from odradek.server.client_quotas import record_quota
from odradek.server.metadata_cache import INTERNAL_TOPICS
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types import ProduceRequest

API_KEY = ApiKey.PRODUCE
MIN_VERSION = 3
MAX_VERSION = 11

log = logging.getLogger(__name__)
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


def _log_start_offset(ctx: RequestContext, tp: TopicPartition) -> int:
    """The partition's log start offset, as Kafka reports it with per-record errors (-1 if unknown)."""
    try:
        return ctx.services.replica_manager.get_partition(tp).log.log_start_offset
    except KafkaError:
        return -1


class _PartitionData(Protocol):
    """One partition's data in a Produce request (every version's ``PartitionProduceData``)."""

    @property
    def index(self) -> int: ...

    @property
    def records(self) -> bytes | None: ...


@dataclass
class _Answer:
    """One partition's answer, filled by the append and (acks=all) the wait for the ISR."""

    index: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    base_offset: int = -1
    append_time: datetime.datetime | None = None
    log_start: int = -1
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    required_offset: int = -1
    """acks=all: the high watermark this partition waits for (last appended offset + 1)."""
    records_count: int = 0
    valid_bytes: int = 0
    rejected_bytes: int = 0
    """The batch's size when it was refused as too large (Kafka's BytesRejectedPerSec)."""


async def _append(ctx: RequestContext, name: str, pdata: _PartitionData, acks: int) -> _Answer:
    answer = _Answer(pdata.index)
    if acks not in (0, 1, -1):
        answer.error = ErrorCode.invalid_required_acks
    elif name in INTERNAL_TOPICS:
        answer.error, answer.message = ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {name}"
    elif pdata.records is None:
        answer.error, answer.message = ErrorCode.invalid_record, "no records in produce request"
    else:
        tp = TopicPartition(name, pdata.index)
        try:
            validator = ctx.services.schema_id_validator
            if validator is not None and validator.enabled(name):
                await validator.check(name, pdata.records)
            info = await ctx.services.replica_manager.append_produced_records(tp, pdata.records, acks)
            answer.base_offset = info.first_offset
            answer.records_count, answer.valid_bytes = info.records_count, info.valid_bytes
            answer.log_start = info.log_start_offset
            if info.log_append_time >= 0:
                answer.append_time = _EPOCH + datetime.timedelta(milliseconds=info.log_append_time)
            if acks == -1 and info.last_offset >= 0:
                answer.required_offset = info.last_offset + 1
        except RecordValidationError as exc:
            answer.error, answer.message = exc.error_code, str(exc)
            answer.record_errors = exc.record_errors
            answer.log_start = _log_start_offset(ctx, tp)
        except KafkaError as exc:
            answer.error, answer.message = exc.error_code, str(exc) or None
            if exc.error_code == ErrorCode.message_too_large:
                answer.rejected_bytes = len(pdata.records)
            if acks == 0:
                log.warning("acks=0 produce to %s-%d from %s failed: %s", name, pdata.index, ctx.client_host, exc)
    return answer


async def _wait_for_isr(ctx: RequestContext, answers: dict[str, list[_Answer]], timeout_ms: int) -> None:
    """acks=all (Kafka's DelayedProduce): every appended partition waits, concurrently, until its
    high watermark covers the append; the wait's error (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER) replaces NONE."""
    waiting = [(name, a) for name, parts in answers.items() for a in parts if a.required_offset >= 0]
    if not waiting:
        return
    rm = ctx.services.replica_manager
    waits = [rm.wait_for_acks(TopicPartition(name, a.index), a.required_offset, timeout_ms) for name, a in waiting]
    # one partition (the usual producer request): awaited directly, no task; it returns at once
    # when the high watermark is already there
    results = [await waits[0]] if len(waits) == 1 else await asyncio.gather(*waits)
    for (_name, answer), error in zip(waiting, results, strict=True):
        if error != ErrorCode.none:
            answer.error = error


_TRANSACTIONAL_FLAG = 0x10
_ATTRIBUTES = struct.Struct(">h")


def _has_transactional_records(req: ProduceRequest) -> bool:
    """Whether some record batch of the request has the transactional attribute (byte 21 of a
    v2 batch header; each batch's length at byte 8)."""
    for topic_data in req.topic_data:
        for pdata in topic_data.partition_data:
            records = pdata.records
            position = 0
            while records is not None and position + 23 <= len(records):
                if _ATTRIBUTES.unpack_from(records, position + 21)[0] & _TRANSACTIONAL_FLAG:
                    return True
                position += 12 + int.from_bytes(records[position + 8 : position + 12], "big", signed=True)
    return False


def _refusals(ctx: RequestContext, req: ProduceRequest) -> dict[str, ErrorCode]:
    """Kafka's ``handleProduceRequest`` checks, before anything is appended: transactional
    records need WRITE on the request's transactional id (else every partition
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE (TOPIC_AUTHORIZATION_FAILED)."""
    names = [t.name for t in req.topic_data]
    if not has_authorizer(ctx):
        return {}
    if _has_transactional_records(req) and not (
        req.transactional_id is not None
        and authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    ):
        return dict.fromkeys(names, ErrorCode.transactional_id_authorization_failed)
    writable = filter_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    return {n: ErrorCode.topic_authorization_failed for n in names if n not in writable}


async def handle(ctx: RequestContext[ProduceRequest]) -> Any:
    req = ctx.request
    broker = ctx.services
    acks = req.acks
    with_record_errors = ctx.has("BatchIndexAndErrorMessage")  # v8+
    answers: dict[str, list[_Answer]] = {}
    refused = _refusals(ctx, req)
    for topic_data in req.topic_data:
        name: str = topic_data.name
        parts = answers.setdefault(name, [])
        if name in refused:
            parts.extend(_Answer(p.index, refused[name]) for p in topic_data.partition_data)
            continue
        if broker.metadata_cache.topic(name) is None and acks in (0, 1, -1) and may_auto_create(ctx, name):
            await broker.admin.maybe_auto_create(name, True)
        for pdata in topic_data.partition_data:
            parts.append(await _append(ctx, name, pdata, acks))
    stats = broker.topic_stats
    if stats is not None:
        _count(stats, answers)
    if acks == -1:
        ctx.mark_delayed()
        await _wait_for_isr(ctx, answers, int(req.timeout.total_seconds() * 1000))
    if broker.client_quotas.produce.quotas:
        # producer_byte_rate counts the whole request when it is answered (Kafka records it in
        # handleProduceRequest's response callback, after an acks=all wait)
        ctx.throttle_ms = record_quota(ctx, broker.client_quotas.produce, ctx.size)
    if acks == 0:
        return None
    with_hints = ctx.has("LeaderIdAndEpoch")  # v10+ (KIP-951)
    leaders: list[int] = []
    topics = []
    for name, parts in answers.items():
        partitions = tuple(
            ctx.make(
                "PartitionProduceResponse",
                **_leader_hint(ctx, name, a, leaders) if with_hints else {},
                index=a.index,
                error_code=a.error,
                base_offset=a.base_offset,
                log_append_time=a.append_time,
                log_start_offset=a.log_start,
                record_errors=tuple(
                    ctx.make("BatchIndexAndErrorMessage", batch_index=i, batch_index_error_message=m)
                    for i, m in a.record_errors
                )
                if with_record_errors
                else (),
                error_message=a.message,
            )
            for a in parts
        )
        topics.append(ctx.make("TopicProduceResponse", name=name, partition_responses=partitions))
    extra = {"node_endpoints": node_endpoints(ctx, "NodeEndpoint", leaders)} if leaders else {}
    throttle = datetime.timedelta(milliseconds=ctx.throttle_ms)
    return ctx.response(responses=tuple(topics), throttle_time=throttle, **extra)


def _count(stats: BrokerTopicStats, answers: dict[str, list[_Answer]]) -> None:
    """Kafka's BrokerTopicMetrics of the append: records and bytes in per appended partition, a
    failure per refused one (its batch's bytes as rejected when it was too large)."""
    for name, parts in answers.items():
        for answer in parts:
            if answer.error == ErrorCode.none:
                stats.produced(name, answer.records_count, answer.valid_bytes)
            else:
                stats.produce_failed(name, answer.rejected_bytes)


def _leader_hint(ctx: RequestContext, name: str, answer: _Answer, leaders: list[int]) -> dict[str, Any]:
    """v10+: the ``current_leader`` of a partition refused for not being led here (KIP-951);
    the leader's id is added to ``leaders`` for the response's ``node_endpoints``."""
    if answer.error not in HINTED_ERRORS:
        return {}
    leader, epoch = current_leader(ctx, TopicPartition(name, answer.index))
    if leader >= 0:
        leaders.append(leader)
    return {"current_leader": ctx.make("LeaderIdAndEpoch", leader_id=leader, leader_epoch=epoch)}
