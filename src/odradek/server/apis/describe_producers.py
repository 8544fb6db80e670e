"""DescribeProducers (key 61): the active producers of partitions this broker leads.

v0. Per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (this broker does not lead
it; Kafka answers from the leader only), or one entry per producer id in the partition's producer
state (``ProducerStateManager``): its epoch, the last sequence of its last batch (-1 when only
markers are known), the max timestamp of its last batch, the coordinator epoch of its last marker
(-1 when none), and the first offset of its open transaction (-1 when none is open). Producers
removed by retention or ``producer.id.expiration.ms`` are not listed. Event loop only.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.server.apis.request_types_txn import DescribeProducersRequest

API_KEY = ApiKey.DESCRIBE_PRODUCERS
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger(__name__)


def active_producers(ctx: RequestContext, tp: TopicPartition) -> list[Any]:
    """The ProducerState entries of ``tp``; raises KafkaError subclasses."""
    partition = ctx.services.replica_manager.leader_partition(tp)
    ongoing = partition.txn_state.ongoing
    return [
        ctx.make(
            "ProducerState",
            producer_id=entry.producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=ongoing.get(entry.producer_id, -1),
        )
        for entry in sorted(partition.producer_state.producers.values(), key=lambda e: e.producer_id)
    ]


async def handle(ctx: RequestContext[DescribeProducersRequest]) -> Any:
    topics = []
    readable = filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, ctx.request.topics, lambda t: t.name)
    for topic in ctx.request.topics:
        partitions = []
        for index in topic.partition_indexes:
            error, message, producers = ErrorCode.none, None, []
            try:
                if topic.name in readable:
                    producers = active_producers(ctx, TopicPartition(topic.name, index))
                else:
                    error = ErrorCode.topic_authorization_failed
            except KafkaError as exc:
                error, message = exc.error_code, str(exc) or None
            except Exception:
                log.exception("DescribeProducers of %s-%d failed", topic.name, index)
                error = ErrorCode.unknown_server_error
            partitions.append(
                ctx.make(
                    "PartitionResponse",
                    partition_index=index,
                    error_code=error,
                    error_message=message,
                    active_producers=tuple(producers),
                )
            )
        topics.append(ctx.make("TopicResponse", name=topic.name, partitions=tuple(partitions)))
    return ctx.response(throttle_time=datetime.timedelta(0), topics=tuple(topics))
