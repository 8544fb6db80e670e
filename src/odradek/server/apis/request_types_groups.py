"""The request bodies of the group APIs the handlers of :mod:`odradek.server.apis` serve, as unions
over the generated request classes of each API's served versions (``MIN_VERSION``..``MAX_VERSION``),
as in :mod:`odradek.server.apis.request_types`. OffsetFetch's is
:data:`odradek.server.apis.request_types.OffsetFetchRequest`.

Handlers import this module for annotations only (under ``TYPE_CHECKING``).
"""

from __future__ import annotations

from typing import TypeAlias

from kio.schema.consumer_group_describe import v0 as consumer_group_describe_v0
from kio.schema.consumer_group_describe import v1 as consumer_group_describe_v1
from kio.schema.consumer_group_heartbeat import v0 as consumer_group_heartbeat_v0
from kio.schema.consumer_group_heartbeat import v1 as consumer_group_heartbeat_v1
from kio.schema.delete_groups import v0 as delete_groups_v0
from kio.schema.delete_groups import v1 as delete_groups_v1
from kio.schema.delete_groups import v2 as delete_groups_v2
from kio.schema.find_coordinator import v0 as find_coordinator_v0
from kio.schema.find_coordinator import v1 as find_coordinator_v1
from kio.schema.find_coordinator import v2 as find_coordinator_v2
from kio.schema.find_coordinator import v3 as find_coordinator_v3
from kio.schema.find_coordinator import v4 as find_coordinator_v4
from kio.schema.find_coordinator import v5 as find_coordinator_v5
from kio.schema.find_coordinator import v6 as find_coordinator_v6
from kio.schema.leave_group import v0 as leave_group_v0
from kio.schema.leave_group import v1 as leave_group_v1
from kio.schema.leave_group import v2 as leave_group_v2
from kio.schema.leave_group import v3 as leave_group_v3
from kio.schema.leave_group import v4 as leave_group_v4
from kio.schema.leave_group import v5 as leave_group_v5
from kio.schema.list_groups import v0 as list_groups_v0
from kio.schema.list_groups import v1 as list_groups_v1
from kio.schema.list_groups import v2 as list_groups_v2
from kio.schema.list_groups import v3 as list_groups_v3
from kio.schema.list_groups import v4 as list_groups_v4
from kio.schema.list_groups import v5 as list_groups_v5
from kio.schema.offset_delete import v0 as offset_delete_v0
from kio.schema.share_group_describe import v1 as share_group_describe_v1
from kio.schema.share_group_heartbeat import v1 as share_group_heartbeat_v1

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupHeartbeatRequest",
    "DeleteGroupsRequest",
    "FindCoordinatorRequest",
    "LeaveGroupRequest",
    "ListGroupsRequest",
    "OffsetDeleteRequest",
    "ShareGroupDescribeRequest",
    "ShareGroupHeartbeatRequest",
]

ConsumerGroupHeartbeatRequest: TypeAlias = (
    consumer_group_heartbeat_v0.ConsumerGroupHeartbeatRequest
    | consumer_group_heartbeat_v1.ConsumerGroupHeartbeatRequest
)
"""consumer_group_heartbeat v0..v1."""

ConsumerGroupDescribeRequest: TypeAlias = (
    consumer_group_describe_v0.ConsumerGroupDescribeRequest | consumer_group_describe_v1.ConsumerGroupDescribeRequest
)
"""consumer_group_describe v0..v1."""

ShareGroupHeartbeatRequest: TypeAlias = share_group_heartbeat_v1.ShareGroupHeartbeatRequest
"""share_group_heartbeat v1."""

ShareGroupDescribeRequest: TypeAlias = share_group_describe_v1.ShareGroupDescribeRequest
"""share_group_describe v1."""

LeaveGroupRequest: TypeAlias = (
    leave_group_v0.LeaveGroupRequest
    | leave_group_v1.LeaveGroupRequest
    | leave_group_v2.LeaveGroupRequest
    | leave_group_v3.LeaveGroupRequest
    | leave_group_v4.LeaveGroupRequest
    | leave_group_v5.LeaveGroupRequest
)
"""leave_group v0..v5."""

ListGroupsRequest: TypeAlias = (
    list_groups_v0.ListGroupsRequest
    | list_groups_v1.ListGroupsRequest
    | list_groups_v2.ListGroupsRequest
    | list_groups_v3.ListGroupsRequest
    | list_groups_v4.ListGroupsRequest
    | list_groups_v5.ListGroupsRequest
)
"""list_groups v0..v5."""

DeleteGroupsRequest: TypeAlias = (
    delete_groups_v0.DeleteGroupsRequest | delete_groups_v1.DeleteGroupsRequest | delete_groups_v2.DeleteGroupsRequest
)
"""delete_groups v0..v2."""

OffsetDeleteRequest: TypeAlias = offset_delete_v0.OffsetDeleteRequest
"""offset_delete v0."""

FindCoordinatorRequest: TypeAlias = (
    find_coordinator_v0.FindCoordinatorRequest
    | find_coordinator_v1.FindCoordinatorRequest
    | find_coordinator_v2.FindCoordinatorRequest
    | find_coordinator_v3.FindCoordinatorRequest
    | find_coordinator_v4.FindCoordinatorRequest
    | find_coordinator_v5.FindCoordinatorRequest
    | find_coordinator_v6.FindCoordinatorRequest
)
"""find_coordinator v0..v6."""
