"""AlterShareGroupOffsets (key 91): set an empty share group's start offsets (KIP-932;
:mod:`odradek.coordinator.group.share_offsets`), what ``kafka-share-groups.sh --reset-offsets``
sends.

v0. As Kafka: READ on the group (else the request is GROUP_AUTHORIZATION_FAILED), READ on each
topic (TOPIC_AUTHORIZATION_FAILED for its partitions); NON_EMPTY_GROUP while the group has
members; an unknown group is created empty; a classic or consumer group is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_group_offsets_support import denied_topics, share_offsets
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
MIN_VERSION = 0
MAX_VERSION = 0


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None, responses: tuple[Any, ...] = ()) -> Any:
    return ctx.response(
        throttle_time=datetime.timedelta(0), error_code=error, error_message=message, responses=responses
    )


async def handle(ctx: RequestContext) -> Any:
    req = ctx.request
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed, None)
    denied = denied_topics(ctx, AclOperation.READ, [t.topic_name for t in req.topics])
    wanted: dict[str, dict[int, int]] = {}
    for t in req.topics:
        if t.topic_name not in denied:
            wanted.setdefault(t.topic_name, {}).update(
                {int(p.partition_index): int(p.start_offset) for p in t.partitions}
            )
    error, message, results = (
        await share_offsets(ctx).alter(req.group_id, wanted) if wanted else (ErrorCode.none, None, {})
    )
    if error is not ErrorCode.none:
        return _answer(ctx, error, message)
    responses = []
    for t in req.topics:
        if t.topic_name in denied:
            topic_id, codes = None, {int(p.partition_index): ErrorCode.topic_authorization_failed for p in t.partitions}
        else:
            topic_id, codes = results.get(t.topic_name, (None, {}))
        responses.append(
            ctx.make(
                "AlterShareGroupOffsetsResponseTopic",
                topic_name=t.topic_name,
                topic_id=topic_id,
                partitions=tuple(
                    ctx.make("AlterShareGroupOffsetsResponsePartition", partition_index=p, error_code=code)
                    for p, code in sorted(codes.items())
                ),
            )
        )
    return _answer(ctx, ErrorCode.none, None, tuple(responses))
