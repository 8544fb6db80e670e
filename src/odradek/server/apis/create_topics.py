"""CreateTopics (key 19): create topics, or only validate them.

v2..v7. Each topic is answered on its own with ``error_code`` and ``error_message``:

- ``num_partitions`` / ``replication_factor`` of -1 take the broker's ``num.partitions`` /
  ``default.replication.factor``; ``assignments`` (partition -> broker ids) replace both, which
  must then be -1 (else INVALID_REQUEST);
- TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION (name), INVALID_PARTITIONS,
  INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG (unknown key, bad value,
  or a null value), INVALID_REQUEST (a topic named twice in one request: every entry of that name
  gets the error);
- with ``validate_only`` nothing is written, but the answer is the same as for a real creation;
- otherwise the answer waits, up to the request's ``timeout``, until this broker's metadata shows
  the topic with a leader for every partition; a timeout > 0 that expires first gives
  REQUEST_TIMED_OUT (the topic is still created). A timeout <= 0 does not wait.

v5+ also returns ``num_partitions``, ``replication_factor`` and the topic's configs (name, value,
read_only, config_source, is_sensitive, as DescribeConfigs reports them), or -1, -1 and no
configs on error; v7 returns the ``topic_id`` (zero for validate-only requests and errors).
Under a ``controller_mutation_rate`` each created topic's partitions count (KIP-599; strict from
v6: THROTTLING_QUOTA_EXCEEDED, see :mod:`odradek.server.controller_mutation_quota`).
Topics are created concurrently. Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode, InvalidConfigError, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.describe_configs import ConfigEntry, topic_config_entries
from odradek.server.auth_helper import AclOperation, ResourceType, authorize_cluster, filter_authorized
from odradek.server.controller_mutation_quota import (
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    ControllerMutationQuota,
    controller_mutation_quota,
)
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types import CreateTopicsRequest
    from odradek.server.apis.request_types_admin import CreatableTopic

API_KEY = ApiKey.CREATE_TOPICS
MIN_VERSION = 2
MAX_VERSION = 7

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)


@dataclass(slots=True)
class _Result:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: list[ConfigEntry] = field(default_factory=list)


def timeout_ms_of(request: CreateTopicsRequest) -> int:
    """The request's ``timeout`` (an i32 timedelta) in milliseconds."""
    return int(request.timeout.total_seconds() * 1000)


def _leaders_ready(ctx: RequestContext, name: str, partitions: int) -> bool:
    meta = ctx.services.metadata_cache.topic(name)
    return (
        meta is not None
        and len(meta.partitions) >= partitions
        and all(state.leader >= 0 for state in meta.partitions.values())
    )


async def _create(ctx: RequestContext, topic: CreatableTopic, validate_only: bool, timeout_ms: int) -> _Result:
    result = _Result(topic.name)
    try:
        nulls = [c.name for c in topic.configs if c.value is None]
        if nulls:
            raise InvalidConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        assignments = {int(a.partition_index): list(a.broker_ids) for a in topic.assignments}
        assignment, _log_config = await ctx.services.admin.create_topic(
            topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments=assignments or None,
            configs=configs,
            validate_only=validate_only,
            timeout_ms=max(timeout_ms, 0),
        )
        result.num_partitions = len(assignment)
        result.replication_factor = len(next(iter(assignment.values()), []))
        result.configs = topic_config_entries(ctx.services, configs)
        if not validate_only:
            meta = ctx.services.metadata_cache.topic(topic.name)
            if meta is not None:
                result.topic_id = meta.topic_id
            if timeout_ms > 0 and not _leaders_ready(ctx, topic.name, len(assignment)):
                result.error = ErrorCode.request_timed_out
                result.message = f"Timed out waiting for the leaders of topic {topic.name} to be elected."
    except KafkaError as exc:
        result = _Result(topic.name, exc.error_code, str(exc) or None)
    except Exception as exc:
        log.exception("CreateTopics of %s failed", topic.name)
        result = _Result(topic.name, ErrorCode.unknown_server_error, f"unexpected error: {exc}")
    return result


async def _create_within_quota(
    ctx: RequestContext, quota: ControllerMutationQuota, topics: list[Any], timeout_ms: int
) -> list[_Result]:
    """Kafka's order under a controller mutation quota: validate every topic, record the
    partitions of each valid one in request order, create those the quota lets through."""
    results = list(await asyncio.gather(*(_create(ctx, t, True, 0) for t in topics)))
    allowed = [i for i, r in enumerate(results) if r.error == ErrorCode.none and quota.record(r.num_partitions)]
    for i, r in enumerate(results):
        if r.error == ErrorCode.none and i not in allowed:
            results[i] = _Result(r.name, ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE)
    done = await asyncio.gather(*(_create(ctx, topics[i], False, timeout_ms) for i in allowed))
    for i, r in zip(allowed, done, strict=True):
        results[i] = r
    ctx.throttle_ms = max(ctx.throttle_ms, quota.throttle_time_ms())
    return results


async def handle(ctx: RequestContext[CreateTopicsRequest]) -> Any:
    req = ctx.request
    timeout_ms = timeout_ms_of(req)
    validate_only = bool(req.validate_only)
    counts = Counter(t.name for t in req.topics)
    duplicates = {name for name, n in counts.items() if n > 1}
    if authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False):
        creatable = {str(t.name) for t in req.topics}
    else:
        creatable = filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, [t.name for t in req.topics])
    wanted = [t for t in req.topics if t.name not in duplicates and t.name in creatable]
    quota = None if validate_only else controller_mutation_quota(ctx)
    if quota is None:
        created = iter(await asyncio.gather(*(_create(ctx, t, validate_only, timeout_ms) for t in wanted)))
    else:
        created = iter(await _create_within_quota(ctx, quota, wanted, timeout_ms))
    results: list[_Result] = []
    for t in req.topics:
        if t.name not in creatable and t.name not in duplicates:
            results.append(_Result(t.name, ErrorCode.topic_authorization_failed, "Authorization failed."))
        elif t.name in duplicates:
            results.append(
                _Result(
                    t.name,
                    ErrorCode.invalid_request,
                    f"Create topics request contains multiple entries for the topic {t.name}.",
                )
            )
        else:
            results.append(next(created))
    with_configs = ctx.has("CreatableTopicConfigs")  # v5+
    config_readable = filter_authorized(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, results, lambda r: r.name, log_if_denied=False
    )
    topics = tuple(
        ctx.make(
            "CreatableTopicResult",
            name=r.name,
            topic_id=r.topic_id,
            error_code=r.error,
            error_message=r.message,
            topic_config_error_code=0 if r.name in config_readable else ErrorCode.topic_authorization_failed,
            num_partitions=r.num_partitions,
            replication_factor=r.replication_factor,
            configs=tuple(
                ctx.make(
                    "CreatableTopicConfigs",
                    name=c.name,
                    value=c.value,
                    read_only=c.read_only,
                    config_source=c.source,
                    is_sensitive=c.is_sensitive,
                )
                for c in r.configs
            )
            if with_configs and r.name in config_readable
            else (),
        )
        for r in results
    )
    return ctx.response(throttle_time=datetime.timedelta(0), topics=topics)
