"""Produce (key 0): append producers' record batches to partition leaders.

v3..v11. Each partition is answered on its own: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
CORRUPT_MESSAGE (CRC or framing), INVALID_RECORD (bad batch header), MESSAGE_TOO_LARGE
(``max.message.bytes``), NOT_ENOUGH_REPLICAS. ``acks`` must be 0, 1 or -1 (else
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
nothing of that partition is appended. See :mod:`odradek.storage.log_validator`.

Batches are appended exactly as received (offsets stamped in); records are decoded only for those
checks, which ordinary (uncompacted, no timestamp limit) topics never need.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from odradek.errors import ErrorCode, KafkaError, RecordValidationError
from odradek.server.metadata_cache import INTERNAL_TOPICS
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11

log = logging.getLogger(__name__)
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


def _log_start_offset(ctx: RequestContext, tp: TopicPartition) -> int:
    """The partition's log start offset, as Kafka reports it with per-record errors (-1 if unknown)."""
    try:
        return ctx.broker.replica_manager.get_partition(tp).log.log_start_offset
    except KafkaError:
        return -1


async def handle(ctx: RequestContext) -> Any:
    req = ctx.request
    broker = ctx.broker
    replica_manager = broker.replica_manager
    acks = req.acks
    with_record_errors = ctx.has("BatchIndexAndErrorMessage")  # v8+
    topics = []
    for topic_data in req.topic_data:
        name = topic_data.name
        partitions = []
        if broker.metadata_cache.topic(name) is None and acks in (0, 1, -1):
            await broker.admin.maybe_auto_create(name, True)
        for pdata in topic_data.partition_data:
            error = ErrorCode.none
            message: str | None = None
            base_offset = -1
            append_time: datetime.datetime | None = None
            log_start = -1
            record_errors: list[tuple[int, str | None]] = []
            if acks not in (0, 1, -1):
                error = ErrorCode.invalid_required_acks
            elif name in INTERNAL_TOPICS:
                error, message = ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {name}"
            elif pdata.records is None:
                error, message = ErrorCode.invalid_record, "no records in produce request"
            else:
                try:
                    info = await replica_manager.append_produced_records(
                        TopicPartition(name, pdata.index), pdata.records, acks
                    )
                    base_offset = info.first_offset
                    log_start = info.log_start_offset
                    if info.log_append_time >= 0:
                        append_time = _EPOCH + datetime.timedelta(milliseconds=info.log_append_time)
                except RecordValidationError as exc:
                    error, message = exc.error_code, str(exc)
                    record_errors = exc.record_errors
                    log_start = _log_start_offset(ctx, TopicPartition(name, pdata.index))
                except KafkaError as exc:
                    error, message = exc.error_code, str(exc) or None
                    if acks == 0:
                        log.warning(
                            "acks=0 produce to %s-%d from %s failed: %s",
                            name,
                            pdata.index,
                            ctx.client_host,
                            exc,
                        )
            partitions.append(
                ctx.make(
                    "PartitionProduceResponse",
                    index=pdata.index,
                    error_code=error,
                    base_offset=base_offset,
                    log_append_time=append_time,
                    log_start_offset=log_start,
                    record_errors=tuple(
                        ctx.make("BatchIndexAndErrorMessage", batch_index=i, batch_index_error_message=m)
                        for i, m in record_errors
                    )
                    if with_record_errors
                    else (),
                    error_message=message,
                )
            )
        topics.append(ctx.make("TopicProduceResponse", name=name, partition_responses=tuple(partitions)))
    if acks == 0:
        return None
    return ctx.response(responses=tuple(topics), throttle_time=datetime.timedelta(0))
