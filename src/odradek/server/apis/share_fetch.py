"""ShareFetch (key 78): a share group member acquires records of the partitions this broker leads
and acknowledges what it had (KIP-932), in a share session (:mod:`odradek.share.share_session`).

v1..v2 (Kafka 4.1's and 4.2's; v0 was the early-access format Kafka 4.1 removed). Per request:

1. The share session: epoch 0 opens one (the member's earlier session here is closed and its
   records released; acknowledgements are not allowed: INVALID_REQUEST), -1 closes it (only
   acknowledgements: fetching with -1 is INVALID_REQUEST), any other epoch continues it
   (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH). The request's partitions join the
   session and its forgotten topics leave it (their acquired records are released).
2. Acknowledgements are applied, each partition's all or nothing; a partition's result is its
   ``acknowledge_error_code`` (INVALID_RECORD_STATE for records this member did not acquire).
3. Every partition of the session is fetched (:class:`odradek.share.manager.SharePartitionManager`),
   waiting up to ``max_wait_ms`` when nothing can be acquired.

The answer lists every partition of the session when the session was just opened; otherwise the
partitions with records, an error or an acknowledgement result. ``acquisition_lock_timeout_ms`` is
the group's record lock duration. Leadership errors carry the leader hint (``current_leader`` and
``node_endpoints``).
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
from odradek.share.share_session import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, ShareTopicPartition

API_KEY = ApiKey.SHARE_FETCH
MIN_VERSION = 1
MAX_VERSION = 2


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None = None, lock_ms: int = 0) -> Any:
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=(),
        node_endpoints=(),
    )


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


async def handle(ctx: RequestContext) -> Any:
    req = ctx.request
    group_id, member_id, epoch = req.group_id, req.member_id, int(req.share_session_epoch)
    if not group_id or not member_id:
        return _answer(ctx, ErrorCode.invalid_request, "group id and member id are required")
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return _answer(ctx, ErrorCode.group_authorization_failed)
    manager = ctx.services.share_partition_manager
    lock_ms = manager.settings_for(group_id).record_lock_duration_ms
    resolved = resolve(ctx, req.topics)
    acking = bool(resolved.acks or resolved.bad_acks)
    fetching = [p for t in req.topics for p in t.partitions if not getattr(p, "acknowledgement_batches", ())]
    sessions = manager.sessions
    session: ShareSession | ErrorCode
    if epoch == INITIAL_EPOCH:
        if acking:
            return _answer(ctx, ErrorCode.invalid_request, "acknowledgements in a request opening a share session")
        old = sessions.close(group_id, member_id)
        if old is not None:
            await manager.release(group_id, member_id, list(old.partitions))
        session = sessions.open(group_id, member_id, ctx.connection_id, _now_ms())
    else:
        session = sessions.check(group_id, member_id, epoch)
        if epoch == FINAL_EPOCH and fetching:
            return _answer(ctx, ErrorCode.invalid_request, "a request closing a share session cannot fetch")
    if isinstance(session, ErrorCode):
        return _answer(ctx, session, lock_ms=lock_ms)
    if epoch != FINAL_EPOCH:
        if epoch != INITIAL_EPOCH:
            sessions.advance(session, ctx.connection_id, _now_ms())
        session.add(resolved.ok)
        forgotten = [
            ShareTopicPartition(f.topic_id, name, int(i))
            for f in req.forgotten_topics_data
            if f.topic_id is not None and (name := ctx.services.metadata_cache.topic_names.get(f.topic_id))
            for i in f.partitions
        ]
        left = session.forget(forgotten)
        if left:
            await manager.release(group_id, member_id, left)
    ack_results = await manager.acknowledge(group_id, member_id, resolved.acks) if resolved.acks else {}
    for stp, error in resolved.bad_acks.items():
        ack_results[stp] = (error, "malformed acknowledgement batches")
    if epoch == FINAL_EPOCH:
        await manager.close_session(group_id, member_id)
        fetched = {}
    else:
        v2 = ctx.api_version >= 2
        fetched = await manager.fetch(
            group_id,
            member_id,
            list(session.partitions),
            max_wait_ms=int(req.max_wait.total_seconds() * 1000),
            max_bytes=max(1, int(req.max_bytes)),
            max_records=max(1, int(req.max_records)),
            record_limit=v2 and int(req.share_acquire_mode) == 1,
        )
    answers: list[tuple[Any, int, dict[str, Any]]] = []
    full = epoch == INITIAL_EPOCH
    for stp in dict.fromkeys([*fetched, *ack_results]):
        r = fetched.get(stp)
        ack = ack_results.get(stp)
        if not (full or ack is not None or (r is not None and (r.acquired or r.error_code != ErrorCode.none))):
            continue
        answers.append(
            (
                stp.topic_id,
                stp.partition,
                {
                    "error_code": r.error_code if r is not None else ErrorCode.none,
                    "error_message": r.error_message if r is not None else None,
                    "acknowledge_error_code": ack[0] if ack is not None else ErrorCode.none,
                    "acknowledge_error_message": ack[1] if ack is not None else None,
                    "records": r.records if r is not None else b"",
                    "acquired_records": tuple(
                        ctx.make(
                            "AcquiredRecords",
                            first_offset=a.first_offset,
                            last_offset=a.last_offset,
                            delivery_count=a.delivery_count,
                        )
                        for a in (r.acquired if r is not None else ())
                    ),
                },
            )
        )
    for (topic_id, index), error in resolved.failed.items():
        answers.append(
            (
                topic_id,
                index,
                {
                    "error_code": error,
                    "acknowledge_error_code": error,
                    "records": b"",
                    "acquired_records": (),
                },
            )
        )
    responses, endpoints = partition_answers(ctx, "PartitionData", answers, "ShareFetchableTopicResponse")
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=responses,
        node_endpoints=endpoints,
    )
