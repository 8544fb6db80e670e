"""ShareAcknowledge (key 79): a share group member settles records it acquired (KIP-932) without
fetching more: ACCEPT, RELEASE, REJECT, GAP, and RENEW from v2.

v1..v2. The share session must exist (epoch 0 cannot open one: INVALID_SHARE_SESSION_EPOCH; no
session: SHARE_SESSION_NOT_FOUND; another epoch: INVALID_SHARE_SESSION_EPOCH); -1 applies the
acknowledgements, then closes the session and releases what the member still holds. Each
partition's acknowledgements are all or nothing (INVALID_RECORD_STATE for records this member did
not acquire; INVALID_REQUEST for malformed batches), answered once the new state is durable.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.share_support import partition_answers, resolve
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext
from odradek.share.share_session import FINAL_EPOCH, INITIAL_EPOCH

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
MIN_VERSION = 1
MAX_VERSION = 2


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None = None) -> Any:
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(0),
        responses=(),
        node_endpoints=(),
    )


async def handle(ctx: RequestContext) -> Any:
    req = ctx.request
    group_id, member_id, epoch = req.group_id, req.member_id, int(req.share_session_epoch)
    if not group_id or not member_id:
        return _answer(ctx, ErrorCode.invalid_request, "group id and member id are required")
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed)
    manager = ctx.services.share_partition_manager
    if epoch == INITIAL_EPOCH:
        return _answer(ctx, ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session")
    session = manager.sessions.check(group_id, member_id, epoch)
    if isinstance(session, ErrorCode):
        return _answer(ctx, session)
    if epoch != FINAL_EPOCH:
        manager.sessions.advance(session, ctx.connection_id, int(time.monotonic() * 1000))
    resolved = resolve(ctx, req.topics)
    results = await manager.acknowledge(group_id, member_id, resolved.acks) if resolved.acks else {}
    for stp, error in resolved.bad_acks.items():
        results[stp] = (error, "malformed acknowledgement batches")
    if epoch == FINAL_EPOCH:
        await manager.close_session(group_id, member_id)
    answers: list[tuple[Any, int, dict[str, Any]]] = [
        (stp.topic_id, stp.partition, {"error_code": error, "error_message": message})
        for stp, (error, message) in results.items()
    ]
    answers += [(topic_id, index, {"error_code": error}) for (topic_id, index), error in resolved.failed.items()]
    responses, endpoints = partition_answers(ctx, "PartitionData", answers, "ShareAcknowledgeTopicResponse")
    lock_ms = manager.settings_for(group_id).record_lock_duration_ms
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=responses,
        node_endpoints=endpoints,
    )
