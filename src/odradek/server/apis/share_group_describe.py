"""ShareGroupDescribe (key 77): share groups (KIP-932) with their epochs, assignor (``simple``)
and each member's assignment.

v1 only. As Kafka: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group otherwise);
an unknown group is GROUP_ID_NOT_FOUND ("Group ... not found."), a classic or consumer group too
("Group ... is not a share group."); NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for every
group request. Ids are answered in the order asked, repeats included. Authorized operations are
filled for the groups described without error when asked for. With an authorizer, a group whose
members hold a topic the client may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without
members. An error entry has Kafka's defaults (empty state and assignor, epochs 0).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.coordinator.group.share_assignor import SIMPLE_ASSIGNOR, ShareAssignment
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.replication.pacing import Pacer
from odradek.server.apis.describe_groups import GROUP_OPERATIONS
from odradek.server.auth_helper import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
    filter_authorized,
    has_authorizer,
)
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_groups import ShareGroupDescribeRequest

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
MIN_VERSION = 1
MAX_VERSION = 1

UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _failed(
    ctx: RequestContext[ShareGroupDescribeRequest], group_id: str, error: ErrorCode, message: str | None
) -> Any:
    return ctx.make(
        "DescribedGroup",
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=(),
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _topic_names(names: Mapping[Any, str], assignment: ShareAssignment) -> list[tuple[Any, str, frozenset[int]]]:
    """(topic id, name, partitions) of the topics the metadata still knows, by name."""
    out = [(tid, names[tid], ps) for tid, ps in assignment.items() if tid in names]
    return sorted(out, key=lambda t: t[1])


async def handle(ctx: RequestContext[ShareGroupDescribeRequest]) -> Any:
    req = ctx.request
    share_groups = ctx.services.group_coordinator.share_groups
    names = ctx.services.metadata_cache.topic_names
    described = []
    pacer = Pacer()
    for group_id in req.group_ids:
        await pacer.step()
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(_failed(ctx, group_id, ErrorCode.group_authorization_failed, None))
            continue
        error, message, group = share_groups.describe(group_id)
        if group is None:
            described.append(_failed(ctx, group_id, error, message))
            continue
        members = sorted(group.members.values(), key=lambda m: m.member_id)
        assigned = {m.member_id: _topic_names(names, m.assigned) for m in members}
        topics = {name for parts in assigned.values() for _, name, _ in parts}
        if has_authorizer(ctx) and filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics) != topics:
            described.append(_failed(ctx, group_id, ErrorCode.topic_authorization_failed, UNAUTHORIZED_TOPICS))
            continue
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
                assignor_name=SIMPLE_ASSIGNOR,
                members=tuple(
                    ctx.make(
                        "Member",
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names,
                        assignment=ctx.make(
                            "Assignment",
                            topic_partitions=tuple(
                                ctx.make("TopicPartitions", topic_id=tid, topic_name=name, partitions=tuple(sorted(ps)))
                                for tid, name, ps in assigned[m.member_id]
                            ),
                        ),
                    )
                    for m in members
                ),
                authorized_operations=operations,
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), groups=tuple(described))
