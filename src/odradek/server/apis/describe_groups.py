"""DescribeGroups (key 15): state, protocol and members of groups.

v0..v5 (Kafka 3.9's range). Member metadata and assignments are shown only for Stable groups (as
Kafka). v3+ can ask for the authorized operations (odradek has no ACLs: every group operation,
READ|DELETE|DESCRIBE); v4+ show ``group_instance_id``; an unknown group is described as Dead with
no error (Kafka 4.0's v6 answers GROUP_ID_NOT_FOUND; the coordinator keeps that answer for when v6
is advertised). Per-group errors: COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR.

A group named twice is described once: a request repeating the id of a group whose members carry
large metadata would otherwise have its answer grow with every copy (the answers for distinct
groups are bounded by what the coordinator holds). The answer is built in slices
(:class:`odradek.replication.pacing.Pacer`), so thousands of groups never hold the event loop."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.replication.pacing import Pacer
from odradek.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
    has_authorizer,
)
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.describe_groups.v3 import request as describe_groups_v3

    from odradek.server.apis.request_types import DescribeGroupsRequest

API_KEY = ApiKey.DESCRIBE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 5

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
"""READ (3), DELETE (6), DESCRIBE (8): Kafka's AclOperation codes as a bit field."""
_OPERATIONS_FLAG = 3
"""v3+ carry ``include_authorized_operations``. The request is read by version number, so that only
the version a client uses is imported."""


def _operations(ctx: RequestContext[DescribeGroupsRequest], group_id: str, include: bool) -> int:
    """The group's ``authorized_operations`` field: every group operation without an authorizer."""
    if not include:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not has_authorizer(ctx):
        return GROUP_OPERATIONS
    return authorized_operations(ctx, ResourceType.GROUP, group_id)


async def handle(ctx: RequestContext[DescribeGroupsRequest]) -> Any:
    req = ctx.request
    coordinator = ctx.services.group_coordinator
    include_ops = (
        ctx.api_version >= _OPERATIONS_FLAG
        and cast("describe_groups_v3.DescribeGroupsRequest", req).include_authorized_operations
    )
    groups = []
    pacer = Pacer()
    for group_id in dict.fromkeys(req.groups):
        await pacer.step()
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error, message, summary = coordinator.describe_group(group_id, ctx.api_version)
        else:
            error, message, summary = ErrorCode.group_authorization_failed, None, None
        members = ()
        if summary is not None:
            members = tuple(
                ctx.make(
                    "DescribedGroupMember",
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in summary.members
            )
        groups.append(
            ctx.make(
                "DescribedGroup",
                error_code=error,
                error_message=message,
                group_id=group_id,
                group_state=summary.state if summary else "",
                protocol_type=summary.protocol_type if summary else "",
                protocol_data=summary.protocol if summary else "",
                members=members,
                authorized_operations=_operations(ctx, group_id, summary is not None and include_ops),
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), groups=tuple(groups))
