"""DeleteTopics (key 20): delete topics by name (v1..v6) or by topic id (v6).

v1..v5 carry ``topic_names``; v6 carries ``topics``, each with a ``name`` or a ``topic_id``
(naming both is INVALID_REQUEST; an id this broker does not know, UNKNOWN_TOPIC_ID). Each topic
is answered on its own: UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist,
TOPIC_DELETION_DISABLED when ``delete.topic.enable`` is false, INVALID_REQUEST for a topic named
twice in one request. ``error_message`` is sent from v5, ``topic_id`` from v6.

The deletion is written to the metadata store (``/admin/delete_topics``); the controller removes
the partitions. The answer waits, up to the request's ``timeout``, until the topic has left this
broker's metadata; a timeout > 0 that expires first gives REQUEST_TIMED_OUT (the deletion still
goes on). A timeout <= 0 does not wait. Topics are deleted concurrently. Under a
``controller_mutation_rate`` each deleted topic's partitions count (KIP-599; strict from v5:
THROTTLING_QUOTA_EXCEEDED, see :mod:`odradek.server.controller_mutation_quota`). Runs on the
broker's event loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.controller_mutation_quota import THROTTLING_QUOTA_EXCEEDED_MESSAGE, controller_mutation_quota
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.delete_topics.v1 import request as delete_topics_v1
    from kio.schema.delete_topics.v6 import request as delete_topics_v6

    from odradek.server.apis.request_types_admin import DeleteTopicsRequest

API_KEY = ApiKey.DELETE_TOPICS
MIN_VERSION = 1
MAX_VERSION = 6
_TOPICS = 6
"""v6+ name topics in ``topics`` (by name or id); older versions in ``topic_names``."""

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)


def _name_of_id(ctx: RequestContext, topic_id: uuid.UUID) -> str | None:
    for meta in ctx.services.metadata_cache.topics.values():
        if meta.topic_id == topic_id:
            return meta.name
    return None


async def _delete(ctx: RequestContext, name: str, timeout_ms: int) -> tuple[ErrorCode, str | None]:
    try:
        await ctx.services.admin.delete_topic(name, max(timeout_ms, 0))
        if timeout_ms > 0 and ctx.services.metadata_cache.topic(name) is not None:
            return ErrorCode.request_timed_out, f"Timed out waiting for the deletion of topic {name}."
        return ErrorCode.none, None
    except KafkaError as exc:
        return exc.error_code, str(exc) or None
    except Exception as exc:
        log.exception("DeleteTopics of %s failed", name)
        return ErrorCode.unknown_server_error, f"unexpected error: {exc}"


async def handle(ctx: RequestContext[DeleteTopicsRequest]) -> Any:
    req = ctx.request
    timeout_ms = int(req.timeout.total_seconds() * 1000)
    # (name, topic_id, error, message): error None means "to delete".
    entries: list[tuple[str | None, uuid.UUID, ErrorCode | None, str | None]] = []
    by_topic = ctx.api_version >= _TOPICS  # read by version number: only the version a client uses is imported
    if by_topic:
        for t in cast("delete_topics_v6.DeleteTopicsRequest", req).topics:
            topic_id = t.topic_id or ZERO_UUID
            if t.name is not None and topic_id != ZERO_UUID:
                entries.append(
                    (
                        t.name,
                        topic_id,
                        ErrorCode.invalid_request,
                        "Only one of topicName or topicId should be specified.",
                    )
                )
            elif t.name is None:
                name = _name_of_id(ctx, topic_id)
                if name is None:
                    entries.append((None, topic_id, ErrorCode.unknown_topic_id, f"Topic id {topic_id} does not exist."))
                else:
                    entries.append((name, topic_id, None, None))
            else:
                meta = ctx.services.metadata_cache.topic(t.name)
                entries.append((t.name, meta.topic_id if meta else ZERO_UUID, None, None))
    else:
        entries = [
            (name, ZERO_UUID, None, None) for name in cast("delete_topics_v1.DeleteTopicsRequest", req).topic_names
        ]
    counts = Counter(name for name, _, error, _ in entries if error is None)
    for i, (name, topic_id, error, _message) in enumerate(entries):
        if error is None and counts[name] > 1:
            entries[i] = (name, topic_id, ErrorCode.invalid_request, "Duplicate topic in request.")
    deletable = filter_authorized(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, (n for n, _, e, _ in entries if e is None and n is not None)
    )
    by_id = by_topic and any(t.name is None for t in cast("delete_topics_v6.DeleteTopicsRequest", req).topics)
    described = (
        filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (n for n, _, _, _ in entries if n), log_if_denied=False
        )
        if by_id
        else set()
    )
    for i, (name, topic_id, error, _message) in enumerate(entries):
        if error is None and name is not None and name not in deletable:
            # a topic named by id alone keeps its name from a principal that may not describe it
            hidden = topic_id != ZERO_UUID and name not in described
            entries[i] = (None if hidden else name, topic_id, ErrorCode.topic_authorization_failed, None)
    to_delete = [name for name, _, error, _ in entries if error is None and name is not None]
    throttled: dict[str, tuple[ErrorCode, str | None]] = {}
    quota = controller_mutation_quota(ctx)
    if quota is not None:  # each existing topic's partitions count, in request order (KIP-599)
        for name in to_delete:
            meta = ctx.services.metadata_cache.topic(name)
            if meta is not None and not quota.record(len(meta.partitions)):
                throttled[name] = (ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        to_delete = [name for name in to_delete if name not in throttled]
    outcomes = dict(zip(to_delete, await asyncio.gather(*(_delete(ctx, n, timeout_ms) for n in to_delete))))
    outcomes.update(throttled)
    if quota is not None:
        ctx.throttle_ms = max(ctx.throttle_ms, quota.throttle_time_ms())
    responses = []
    for name, topic_id, error, message in entries:
        if error is None and name is not None:
            error, message = outcomes[name]
        responses.append(
            ctx.make(
                "DeletableTopicResult",
                name=name,
                topic_id=topic_id,
                error_code=error,
                error_message=message,
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), responses=tuple(responses))
