"""ConsumerGroupDescribe (key 69): next-generation consumer groups (KIP-848) with their epochs,
assignor, and each member's current and target assignment (v1: and whether it speaks the classic
protocol or the consumer one).

v0..v1. DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED per group otherwise); an unknown group,
or a classic one, is GROUP_ID_NOT_FOUND; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for
every group request. Repeated ids are described once.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.coordinator.group.consumer_group import Assignment
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.replication.pacing import Pacer
from odradek.server.apis.describe_groups import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, authorized_operations, has_authorizer
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_groups import ConsumerGroupDescribeRequest

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
MIN_VERSION = 0
MAX_VERSION = 1

CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1
"""``member_type`` (v1): 0 classic, 1 consumer protocol; -1 unknown."""


def _assignment(ctx: RequestContext[ConsumerGroupDescribeRequest], assignment: Assignment) -> Any:
    cache = ctx.services.metadata_cache
    parts = []
    for name, partitions in sorted(assignment.items()):
        meta = cache.topic(name)
        if meta is not None:
            parts.append(
                ctx.make(
                    "TopicPartitions", topic_id=meta.topic_id, topic_name=name, partitions=tuple(sorted(partitions))
                )
            )
    return ctx.make("Assignment", topic_partitions=tuple(parts))


async def handle(ctx: RequestContext[ConsumerGroupDescribeRequest]) -> Any:
    req = ctx.request
    coordinator = ctx.services.group_coordinator
    described = []
    pacer = Pacer()
    for group_id in dict.fromkeys(req.group_ids):
        await pacer.step()
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error, group = ErrorCode.group_authorization_failed, None
        else:
            error, group = coordinator.consumer_group(group_id)
        if group is None:
            described.append(
                ctx.make(
                    "DescribedGroup",
                    error_code=error,
                    error_message=None,
                    group_id=group_id,
                    group_state="Dead" if error == ErrorCode.group_id_not_found else "",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=(),
                )
            )
            continue
        members = tuple(
            ctx.make(
                "Member",
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(ctx, m.assigned),
                target_assignment=_assignment(ctx, group.target.get(m.member_id, {})),
                **(
                    {"member_type": CONSUMER_MEMBER_TYPE if m.classic is None else CLASSIC_MEMBER_TYPE}
                    if ctx.api_version >= 1
                    else {}
                ),
            )
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        )
        if not req.include_authorized_operations:
            operations = AUTHORIZED_OPERATIONS_OMITTED
        elif not has_authorizer(ctx):
            operations = GROUP_OPERATIONS
        else:
            operations = authorized_operations(ctx, ResourceType.GROUP, group_id)
        described.append(
            ctx.make(
                "DescribedGroup",
                error_code=ErrorCode.none,
                error_message=None,
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor(),
                members=members,
                authorized_operations=operations,
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), groups=tuple(described))
