"""DeleteGroups (key 42): delete empty groups and their committed offsets.

v0..v2. Per group: NONE (tombstones for its offsets and metadata are written), NON_EMPTY_GROUP
(it has members), GROUP_ID_NOT_FOUND, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_groups import DeleteGroupsRequest

API_KEY = ApiKey.DELETE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext[DeleteGroupsRequest]) -> Any:
    names = list(dict.fromkeys(ctx.request.groups_names))
    deletable = filter_authorized(ctx, AclOperation.DELETE, ResourceType.GROUP, names)
    results: dict[str, ErrorCode] = dict.fromkeys(names, ErrorCode.group_authorization_failed)
    if deletable:
        results.update(await ctx.services.group_coordinator.delete_groups([g for g in names if g in deletable]))
    return ctx.response(
        throttle_time=datetime.timedelta(0),
        results=tuple(ctx.make("DeletableGroupResult", group_id=g, error_code=results[g]) for g in names),
    )
