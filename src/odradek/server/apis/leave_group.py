"""LeaveGroup (key 13): members leave a group (the rest rebalance).

v0..v2 name one ``member_id``; v3+ a batch of members (KIP-345), each by member id and/or
``group_instance_id`` (an empty member id with an instance id removes that static member: the
administrative way out of a group); v5 adds a reason. v3+ answer each member; before v3 the
single error is the top-level error, or the member's. A member that is not in the group gets
UNKNOWN_MEMBER_ID, a stale member id of a static member FENCED_INSTANCE_ID.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.leave_group.v0 import request as leave_group_v0
    from kio.schema.leave_group.v3 import request as leave_group_v3
    from kio.schema.leave_group.v5 import request as leave_group_v5

    from odradek.server.apis.request_types_groups import LeaveGroupRequest

API_KEY = ApiKey.LEAVE_GROUP
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext[LeaveGroupRequest]) -> Any:
    req = ctx.request
    leaving: list[tuple[str, str | None, str | None]]
    version = ctx.api_version  # read by number: only the version a client uses is imported
    if version < 3:  # one member
        leaving = [(cast("leave_group_v0.LeaveGroupRequest", req).member_id, None, None)]
    elif version >= 5:  # members with a reason
        leaving = [
            (m.member_id, m.group_instance_id, m.reason) for m in cast("leave_group_v5.LeaveGroupRequest", req).members
        ]
    else:
        leaving = [
            (m.member_id, m.group_instance_id, None) for m in cast("leave_group_v3.LeaveGroupRequest", req).members
        ]
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ctx.response(
            throttle_time=datetime.timedelta(0), error_code=ErrorCode.group_authorization_failed, members=()
        )
    error, member_errors = ctx.services.group_coordinator.leave_group(req.group_id, leaving)
    if ctx.api_version < 3:
        if error is ErrorCode.none:
            error = next((e for e in member_errors if e is not ErrorCode.none), ErrorCode.none)
        return ctx.response(throttle_time=datetime.timedelta(0), error_code=error)
    members = tuple(
        ctx.make("MemberResponse", member_id=mid, group_instance_id=iid, error_code=e)
        for (mid, iid, _), e in zip(leaving, member_errors)
    )
    return ctx.response(throttle_time=datetime.timedelta(0), error_code=error, members=members)
