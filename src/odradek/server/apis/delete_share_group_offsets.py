"""DeleteShareGroupOffsets (key 92): drop an empty share group's state for some topics (KIP-932;
:mod:`odradek.coordinator.group.share_offsets`), what ``kafka-share-groups.sh --delete-offsets``
sends.

v0. As Kafka: DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ on each topic
(TOPIC_AUTHORIZATION_FAILED); NON_EMPTY_GROUP while the group has members; an unknown group, or a
classic or consumer group, is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_group_offsets_support import denied_topics, share_offsets
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 0


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None, responses: tuple[Any, ...] = ()) -> Any:
    return ctx.response(
        throttle_time=datetime.timedelta(0), error_code=error, error_message=message, responses=responses
    )


async def handle(ctx: RequestContext) -> Any:
    req = ctx.request
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed, None)
    names = list(dict.fromkeys(t.topic_name for t in req.topics))
    denied = denied_topics(ctx, AclOperation.READ, names)
    allowed = [n for n in names if n not in denied]
    error, message, results = await share_offsets(ctx).delete(req.group_id, allowed)
    if error is not ErrorCode.none:
        return _answer(ctx, error, message)
    responses = []
    for name in names:
        topic_id, code = (None, ErrorCode.topic_authorization_failed) if name in denied else results[name]
        responses.append(
            ctx.make("DeleteShareGroupOffsetsResponseTopic", topic_name=name, topic_id=topic_id, error_code=code)
        )
    return _answer(ctx, ErrorCode.none, None, tuple(responses))
