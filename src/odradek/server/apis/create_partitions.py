"""CreatePartitions (key 37): raise the partition count of existing topics.

v0..v3. Each topic is answered on its own with ``error_code`` and ``error_message``:

- ``count`` is the new total; it must be larger than the current count (INVALID_PARTITIONS
  otherwise, also when equal, as Kafka);
- ``assignments`` (null for automatic placement) gives the replicas of each new partition, one
  entry per new partition (else INVALID_REQUEST), each with the topic's replication factor and
  live, distinct brokers (INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT);
- UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist, INVALID_REQUEST for a topic named
  twice in one request;
- with ``validate_only`` nothing is written. Otherwise the answer waits, up to ``timeout``, until
  this broker's metadata shows every new partition with a leader; a timeout > 0 that expires
  first gives REQUEST_TIMED_OUT (the partitions are still created).

Under a ``controller_mutation_rate`` the partitions each topic adds count (KIP-599; strict from
v3: THROTTLING_QUOTA_EXCEEDED, see :mod:`odradek.server.controller_mutation_quota`). Topics are
handled concurrently. Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.controller_mutation_quota import (
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    ControllerMutationQuota,
    controller_mutation_quota,
)
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_admin import CreatePartitionsRequest, CreatePartitionsTopic

API_KEY = ApiKey.CREATE_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 3

log = logging.getLogger(__name__)


def _leaders_ready(ctx: RequestContext, name: str, count: int) -> bool:
    meta = ctx.services.metadata_cache.topic(name)
    return (
        meta is not None
        and len(meta.partitions) >= count
        and all(state.leader >= 0 for state in meta.partitions.values())
    )


async def _grow(
    ctx: RequestContext, topic: CreatePartitionsTopic, validate_only: bool, timeout_ms: int
) -> tuple[ErrorCode, str | None]:
    try:
        assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        await ctx.services.admin.create_partitions(
            topic.name, topic.count, assignments, validate_only, max(timeout_ms, 0)
        )
        if not validate_only and timeout_ms > 0 and not _leaders_ready(ctx, topic.name, topic.count):
            return ErrorCode.request_timed_out, f"Timed out waiting for the new partitions of {topic.name}."
        return ErrorCode.none, None
    except KafkaError as exc:
        return exc.error_code, str(exc) or None
    except Exception as exc:
        log.exception("CreatePartitions of %s failed", topic.name)
        return ErrorCode.unknown_server_error, f"unexpected error: {exc}"


async def _grow_within_quota(
    ctx: RequestContext, quota: ControllerMutationQuota, topics: list[CreatePartitionsTopic], timeout_ms: int
) -> list[tuple[ErrorCode, str | None]]:
    """Kafka's order under a controller mutation quota: validate every topic, record the
    partitions each valid one adds in request order, grow those the quota lets through."""
    results = list(await asyncio.gather(*(_grow(ctx, t, True, 0) for t in topics)))
    allowed = []
    for i, (topic, (error, _)) in enumerate(zip(topics, results, strict=True)):
        if error != ErrorCode.none:
            continue
        meta = ctx.services.metadata_cache.topic(topic.name)
        if quota.record(topic.count - (len(meta.partitions) if meta is not None else 0)):
            allowed.append(i)
        else:
            results[i] = (ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE)
    done = await asyncio.gather(*(_grow(ctx, topics[i], False, timeout_ms) for i in allowed))
    for i, outcome in zip(allowed, done, strict=True):
        results[i] = outcome
    ctx.throttle_ms = max(ctx.throttle_ms, quota.throttle_time_ms())
    return results


async def handle(ctx: RequestContext[CreatePartitionsRequest]) -> Any:
    req = ctx.request
    timeout_ms = int(req.timeout.total_seconds() * 1000)
    validate_only = bool(req.validate_only)
    counts = Counter(t.name for t in req.topics)
    alterable = filter_authorized(ctx, AclOperation.ALTER, ResourceType.TOPIC, [t.name for t in req.topics])
    unique = [t for t in req.topics if counts[t.name] == 1 and t.name in alterable]
    quota = None if validate_only else controller_mutation_quota(ctx)
    if quota is None:
        outcomes = iter(await asyncio.gather(*(_grow(ctx, t, validate_only, timeout_ms) for t in unique)))
    else:
        outcomes = iter(await _grow_within_quota(ctx, quota, unique, timeout_ms))
    results = []
    for t in req.topics:
        message: str | None
        if counts[t.name] > 1:
            error, message = ErrorCode.invalid_request, "Duplicate topic in request."
        elif t.name not in alterable:
            error, message = ErrorCode.topic_authorization_failed, "The topic authorization is failed."
        else:
            error, message = next(outcomes)
        results.append(ctx.make("CreatePartitionsTopicResult", name=t.name, error_code=error, error_message=message))
    return ctx.response(throttle_time=datetime.timedelta(0), results=tuple(results))
