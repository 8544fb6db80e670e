"""Heartbeat (key 12): a member is alive; the answer says whether to rejoin.

v0..v4 (v3+ carry ``group_instance_id``). NONE (Stable, CompletingRebalance),
REBALANCE_IN_PROGRESS (rejoin), UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR. While the coordinator loads it answers NONE, as Kafka.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.heartbeat.v3 import request as heartbeat_v3

    from odradek.server.apis.request_types import HeartbeatRequest

API_KEY = ApiKey.HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext[HeartbeatRequest]) -> Any:
    req = ctx.request
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ctx.response(throttle_time=datetime.timedelta(0), error_code=ErrorCode.group_authorization_failed)
    # read by version number (v3+ group_instance_id): only the version a client uses is imported
    instance_id = None if ctx.api_version < 3 else cast("heartbeat_v3.HeartbeatRequest", req).group_instance_id
    error = ctx.services.group_coordinator.heartbeat(req.group_id, req.member_id, instance_id, req.generation_id)
    return ctx.response(throttle_time=datetime.timedelta(0), error_code=error)
