"""SyncGroup (key 14): the leader hands out the assignment; every member receives its part.

v0..v5. v3+ carry ``group_instance_id``; v5 carries and answers the protocol type and name (both
required in the request, else INCONSISTENT_GROUP_PROTOCOL). In CompletingRebalance the answer
waits until the leader's assignment is durable in ``__consumer_offsets``; in Stable it is the
member's current assignment. Errors: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
REBALANCE_IN_PROGRESS (also while the coordinator loads: the member simply rejoins),
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.group.member import SyncGroupResult
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.sync_group.v3 import request as sync_v3
    from kio.schema.sync_group.v5 import request as sync_v5

    from odradek.server.apis.request_types import SyncGroupRequest

API_KEY = ApiKey.SYNC_GROUP
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext[SyncGroupRequest]) -> Any:
    req = ctx.request
    version = ctx.api_version  # read by number: only the version a client uses is imported
    instance_id = None if version < 3 else cast("sync_v3.SyncGroupRequest", req).group_instance_id
    protocol_type, protocol_name = None, None
    if version >= 5:
        with_protocol = cast("sync_v5.SyncGroupRequest", req)
        protocol_type, protocol_name = with_protocol.protocol_type, with_protocol.protocol_name
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        result = SyncGroupResult(ErrorCode.group_authorization_failed)
    elif ctx.api_version >= 5 and (protocol_type is None or protocol_name is None):
        result = SyncGroupResult(ErrorCode.inconsistent_group_protocol)
    else:
        result = await ctx.services.group_coordinator.sync_group(
            req.group_id,
            req.generation_id,
            req.member_id,
            protocol_type,
            protocol_name,
            instance_id,
            {a.member_id: bytes(a.assignment) for a in req.assignments},
        )
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
