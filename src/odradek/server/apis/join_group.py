"""JoinGroup (key 11): join a classic group and wait for the rebalance.

v0..v9. v0 has no rebalance timeout (the session timeout serves as both); v4+ require a
member id (KIP-394: the first JoinGroup of a dynamic member gets MEMBER_ID_REQUIRED and its id);
v5+ carry ``group_instance_id`` (static membership); v7+ answer the protocol type and name
(nullable); v8+ carry a reason; v9 lets a static leader rejoining a stable group skip the
assignment. The answer is sent when the rebalance completes, so a JoinGroup can wait up to the
rebalance timeout; semantics per group state are in :mod:`odradek.coordinator.group.state`.
Errors: INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR,
INVALID_SESSION_TIMEOUT, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID,
INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED, REBALANCE_IN_PROGRESS.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.group.member import JoinRequest
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.join_group.v1 import request as join_v1
    from kio.schema.join_group.v5 import request as join_v5
    from kio.schema.join_group.v8 import request as join_v8

    from odradek.server.apis.request_types import JoinGroupRequest

API_KEY = ApiKey.JOIN_GROUP
MIN_VERSION = 0
MAX_VERSION = 9


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka shows it (``InetAddress.toString``): ``/127.0.0.1``."""
    host = ctx.client_host.rpartition(":")[0] or ctx.client_host
    return "/" + host


def millis(value: datetime.timedelta | int) -> int:
    """A kio i32/i64 timedelta field as milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


async def handle(ctx: RequestContext[JoinGroupRequest]) -> Any:
    req = ctx.request
    version = ctx.api_version
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ctx.response(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.group_authorization_failed,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if version >= 7 else "",
            leader="",
            skip_assignment=False,
            member_id="",
            members=(),
        )
    session_ms = millis(req.session_timeout)
    # read by version number (v1+ rebalance_timeout, v5+ group_instance_id, v8+ reason), so that
    # only the version a client uses is imported; the casts name the oldest version with the field
    rebalance = None if version < 1 else cast("join_v1.JoinGroupRequest", req).rebalance_timeout
    instance_id = None if version < 5 else cast("join_v5.JoinGroupRequest", req).group_instance_id
    reason = None if version < 8 else cast("join_v8.JoinGroupRequest", req).reason
    result = await ctx.services.group_coordinator.join_group(
        JoinRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=instance_id,
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            rebalance_timeout_ms=session_ms if rebalance is None else millis(rebalance),
            session_timeout_ms=session_ms,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in req.protocols),
            require_known_member_id=version >= 4,
            support_skipping_assignment=version >= 9,
            reason=reason,
        )
    )
    members = tuple(
        ctx.make("JoinGroupResponseMember", member_id=mid, group_instance_id=iid, metadata=meta)
        for mid, iid, meta in result.members
    )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )
