"""ListGroups (key 16): the groups this broker coordinates.

v0..v5. v4+ filter by state (case-insensitive names: Empty, Stable, ...) and answer each group's
state; v5+ filter by type and answer it (``classic``, ``consumer`` or ``share``; a filter naming
none of them gives nothing). COORDINATOR_LOAD_IN_PROGRESS (with the groups loaded so far) while a
``__consumer_offsets`` partition loads. A client lists a cluster's groups by asking every broker.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize_cluster, filter_authorized
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.list_groups.v4 import request as list_groups_v4
    from kio.schema.list_groups.v5 import request as list_groups_v5

    from odradek.server.apis.request_types_groups import ListGroupsRequest

API_KEY = ApiKey.LIST_GROUPS
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext[ListGroupsRequest]) -> Any:
    req = ctx.request
    states: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    # read by version number (v4+ states_filter, v5+ types_filter): only the version a client uses is imported
    if ctx.api_version >= 5:
        filtered = cast("list_groups_v5.ListGroupsRequest", req)
        states, types = filtered.states_filter, filtered.types_filter
    elif ctx.api_version == 4:
        states = cast("list_groups_v4.ListGroupsRequest", req).states_filter
    error, overviews = ctx.services.group_coordinator.list_groups(states, types)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE, log_if_denied=False):
        visible = filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, overviews, lambda g: g.group_id, log_if_denied=False
        )
        overviews = [g for g in overviews if g.group_id in visible]
    groups = tuple(
        ctx.make(
            "ListedGroup",
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.state,
            group_type=g.group_type,
        )
        for g in sorted(overviews, key=lambda g: g.group_id)
    )
    return ctx.response(throttle_time=datetime.timedelta(0), error_code=error, groups=groups)
