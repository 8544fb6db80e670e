"""What the console's group pages show and change: consumer groups of both protocols and share groups.

Reuses the CLI's coordinator-routed clients (:class:`odradek.cli.consumer_groups.GroupsClient`,
:class:`odradek.cli.share_groups.ShareGroupsClient`), :func:`~odradek.cli.consumer_groups.lag_rows`
(committed offset, high watermark, lag per partition) and
:func:`~odradek.cli.consumer_groups.reset_plan` (Kafka's offset reset rules), so the pages and
``odradek consumer-groups`` agree. A group list renders at most :data:`MAX_GROUPS` groups per
page.

Run on the console's client loop only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odradek.cli.common import CommandError
from odradek.cli.consumer_groups import LagRow, lag_rows, reset_plan
from odradek.cli.consumer_groups_view import Group, Listed
from odradek.cli.share_groups import ShareGroupsClient
from odradek.client.admin import AdminClient
from odradek.client.errors import error_for, error_name
from odradek.console.guard import check, visible
from odradek.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType
from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "MAX_GROUPS",
    "GroupView",
    "ShareGroupView",
    "delete_group",
    "group_list",
    "group_view",
    "plan_group_reset",
    "reset_group",
    "share_group_view",
]

MAX_GROUPS = 200


def _client(admin: AdminClient) -> ShareGroupsClient:
    return ShareGroupsClient(admin)


async def group_list(admin: AdminClient, page: int = 0, name_filter: str = "") -> tuple[list[Listed], int]:
    """One page of groups of every kind (classic, consumer, share) and how many match ``name_filter``."""
    groups = [g for g in await _client(admin).list_groups() if name_filter in g.group_id]
    shown = await visible(admin, AclOperation.DESCRIBE, ResourceType.GROUP, [g.group_id for g in groups])
    groups = [g for g in groups if g.group_id in shown]
    return groups[page * MAX_GROUPS : (page + 1) * MAX_GROUPS], len(groups)


@dataclass
class GroupView:
    group: Group
    lags: list[LagRow]
    total_lag: int


async def group_view(admin: AdminClient, group_id: str) -> GroupView:
    """State, members (epochs, target and current assignment for KIP-848 groups) and lag per partition."""
    await check(admin, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
    client = _client(admin)
    group = await client.describe(group_id)
    if group.state == "Dead":
        raise error_for(ErrorCode.group_id_not_found, f"Consumer group '{group_id}' does not exist.")
    lags = await lag_rows(client, group)
    topics = {r.tp.topic for r in lags} | {t for m in group.members for t in [*m.assignment, *(m.target or {})]}
    shown = await visible(admin, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
    lags = [r for r in lags if r.tp.topic in shown]
    for m in group.members:  # as the broker's OffsetFetch and describe answers leave out hidden topics
        m.assignment = {t: ps for t, ps in m.assignment.items() if t in shown}
        m.target = None if m.target is None else {t: ps for t, ps in m.target.items() if t in shown}
    return GroupView(group, lags, sum(r.lag or 0 for r in lags))


async def plan_group_reset(admin: AdminClient, group_id: str, how: str, value: int | None) -> dict[TopicPartition, int]:
    """The new offsets a reset would commit for every partition the group has committed."""
    await check(admin, AclOperation.READ, ResourceType.GROUP, group_id)
    client = _client(admin)
    committed = await client.committed(group_id)
    readable = await visible(admin, AclOperation.READ, ResourceType.TOPIC, {tp.topic for tp in committed})
    committed = {tp: o for tp, o in committed.items() if tp.topic in readable}
    if not committed:
        raise CommandError(f"group {group_id} has no committed offsets to reset")
    return await reset_plan(client, sorted(committed), committed, how, value)


async def reset_group(admin: AdminClient, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit ``offsets`` as an admin; the group must be inactive (Empty), as Kafka requires."""
    await check(admin, AclOperation.READ, ResourceType.GROUP, group_id)
    for topic in sorted({tp.topic for tp in offsets}):
        await check(admin, AclOperation.READ, ResourceType.TOPIC, topic)
    client = _client(admin)
    group = await client.describe(group_id)
    if group.state not in ("Empty", "Dead"):
        raise CommandError(
            f"Assignments can only be reset if the group '{group_id}' is inactive, "
            f"but the current state is {group.state}."
        )
    errors = await client.commit(group_id, offsets)
    bad = {tp: e for tp, e in errors.items() if e is not ErrorCode.none}
    if bad:
        raise CommandError("; ".join(f"{tp}: {error_name(e)}" for tp, e in sorted(bad.items())))


async def delete_group(admin: AdminClient, group_id: str) -> None:
    await check(admin, AclOperation.DELETE, ResourceType.GROUP, group_id)
    code = await _client(admin).delete(group_id)
    if code is not ErrorCode.none:
        raise CommandError(f"Group '{group_id}' could not be deleted due to: {error_name(code)}")


@dataclass
class ShareGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    coordinator: int
    members: list[tuple[str, str, str, int, list[tuple[str, list[int]]]]]
    """(member id, client id, host, member epoch, [(topic, partitions)])."""
    offsets: list[tuple[str, int, int | None, int | None]]
    """(topic, partition, start offset, lag)."""


async def share_group_view(admin: AdminClient, group_id: str) -> ShareGroupView:
    """Members, assignments and start offsets of a share group (ShareGroupDescribe, DescribeShareGroupOffsets)."""
    await check(admin, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
    client = _client(admin)
    g, node = await client.describe_share(group_id)
    members = [
        (
            m.member_id,
            m.client_id,
            m.client_host,
            int(m.member_epoch),
            sorted((t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions),
        )
        for m in g.members
    ]
    answer: Any = await client.start_offsets(group_id, None)
    offsets = []
    for t in sorted(answer.topics, key=lambda t: t.topic_name):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            start = int(p.start_offset) if p.start_offset >= 0 and not p.error_code else None
            lag = int(p.lag) if getattr(p, "lag", -1) >= 0 else None
            offsets.append((t.topic_name, int(p.partition_index), start, lag))
    names = {o[0] for o in offsets} | {t for m in members for t, _ in m[4]}
    shown = await visible(admin, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    offsets = [o for o in offsets if o[0] in shown]
    members = [(*m[:4], [(t, ps) for t, ps in m[4] if t in shown]) for m in members]
    return ShareGroupView(group_id, g.group_state, int(g.group_epoch), int(g.assignment_epoch), node, members, offsets)
