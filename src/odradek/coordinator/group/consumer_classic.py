"""Classic members of consumer groups: JoinGroup, SyncGroup, Heartbeat and LeaveGroup served by a
consumer group (KIP-848), as Kafka 4.x's group coordinator serves them
(``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``, ...).

A consumer of the classic protocol (protocol type ``consumer``) may join a consumer group that
has members, or stay in a classic group that became one (:mod:`.migration`). It is then a
:class:`~.consumer_group.ConsumerGroupMember` like the others: the group's server-side assignor
gives it a target assignment and it reconciles towards it (revoking first, so a partition never
has two owners); only the way it learns of it differs:

- **JoinGroup** is answered at once, never parked. The member's subscription (topics, rack) and
  the partitions it owns come from the ConsumerProtocolSubscription of its first protocol; a new
  member or a changed subscription moves the group epoch, and the target assignment is computed
  again; the member reconciles with the partitions it owns. The answer's generation is the
  member's epoch, its protocol the member's first one, and it names no leader: the member never
  assigns. A dynamic member without id gets MEMBER_ID_REQUIRED (v4+) and is added when it comes
  back with it; a static one without member id takes over its instance's place and assignment
  (another member id for a known instance is FENCED_INSTANCE_ID, a known member id for an unknown
  instance UNKNOWN_MEMBER_ID); when the place was the last consumer-protocol member's, the group
  may become a classic group (:mod:`.migration`). Protocols that some classic member of the group does not support,
  or a protocol type other than ``consumer``, are INCONSISTENT_GROUP_PROTOCOL (so is a
  subscription that does not decode); a full group (``group.consumer.max.size``) is
  GROUP_MAX_SIZE_REACHED.
- **SyncGroup** (generation: the member's epoch, else ILLEGAL_GENERATION; protocol type and name:
  those of its join, else INCONSISTENT_GROUP_PROTOCOL) answers the partitions the member may own
  now, as a ConsumerProtocolAssignment of its metadata's version; REBALANCE_IN_PROGRESS when the
  group epoch moved past the member's epoch (unless it is still revoking).
- **Heartbeat** answers REBALANCE_IN_PROGRESS while the member has to rejoin: the group epoch is
  past its epoch, it must revoke partitions, or every partition it waited for was released.
- **LeaveGroup** removes the members it names (UNKNOWN_MEMBER_ID for a member of the consumer
  protocol); the group epoch moves once per request.
- **Timers**: the member's own session timeout (its JoinGroup's) restarts at each heartbeat,
  join and sync. After a REBALANCE_IN_PROGRESS it must rejoin, and after a join it must sync,
  within its rebalance timeout; otherwise it is fenced (:meth:`.ConsumerGroupMembership.fence`).

A member none of whose requests is valid gets UNKNOWN_MEMBER_ID, as for classic groups. Event
loop only.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from odradek.coordinator.group.consumer_assignment import assign
from odradek.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState
from odradek.coordinator.group.consumer_membership import ConsumerGroupMembership
from odradek.coordinator.group.consumer_schemas import ClassicMemberMetadata, ClassicProtocol
from odradek.coordinator.group.member import JoinGroupResult, JoinRequest, SyncGroupResult
from odradek.coordinator.group.membership import LeavingMember
from odradek.coordinator.group.schemas import (
    SchemaError,
    consumer_protocol_version,
    decode_consumer_subscription,
    encode_assignment,
)
from odradek.errors import ErrorCode

__all__ = ["CONSUMER_PROTOCOL_TYPE", "ClassicMembers"]

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"

Persist = Callable[[str], Coroutine[Any, Any, ErrorCode]]
Downgrade = Callable[[ConsumerGroup, str, ConsumerGroupMember], bool]
"""``(group, replaced member id, replaced member)``: whether the group became a classic group."""


class ClassicMembers:
    """See the module docstring. ``partition_count(topic)``: the metadata cache's (None: unknown
    topic); ``persist(group_id)`` writes what changed in a consumer group."""

    def __init__(
        self,
        groups: ConsumerGroupMembership,
        partition_count: Callable[[str], int | None],
        persist: Persist,
        downgrade: Downgrade | None = None,
    ) -> None:
        self.groups = groups
        self.partition_count = partition_count
        self.persist = persist
        self.downgrade = downgrade
        """Asked after a static classic member took the place of a consumer-protocol member."""

    # --- JoinGroup ---------------------------------------------------------------------------

    async def join(self, req: JoinRequest) -> JoinGroupResult:
        """JoinGroup for a consumer group with members; answered once its change is durable."""
        result = self.join_now(req)
        error = await self.persist(req.group_id)
        return result if error is ErrorCode.none else JoinGroupResult(req.member_id, error)

    def join_now(self, req: JoinRequest) -> JoinGroupResult:
        group = self.groups.group(req.group_id)
        if group is None:
            return JoinGroupResult(req.member_id, ErrorCode.unknown_member_id)
        member_id = req.member_id or str(uuid.uuid4())
        if len(group.members) >= self.groups.config.max_size and (not req.member_id or member_id not in group.members):
            return JoinGroupResult(req.member_id, ErrorCode.group_max_size_reached)
        if not group.supports_classic_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            return JoinGroupResult(req.member_id, ErrorCode.inconsistent_group_protocol)
        if not req.member_id and req.group_instance_id is None and req.require_known_member_id:
            log.info("consumer group %s: a classic member joins; its member id is %s", group.group_id, member_id)
            return JoinGroupResult(member_id, ErrorCode.member_id_required)
        try:
            subscription = decode_consumer_subscription(req.protocols[0][1])
        except SchemaError as exc:
            log.info(
                "consumer group %s: classic member %s sent no readable subscription: %s", req.group_id, member_id, exc
            )
            return JoinGroupResult(req.member_id, ErrorCode.inconsistent_group_protocol)
        replaced = _static_member(group, req.group_instance_id) if req.group_instance_id and not req.member_id else None
        member = self._joining_member(group, req, member_id)
        if isinstance(member, ErrorCode):
            return JoinGroupResult(req.member_id, member)
        changed = replaced is None and member.member_id not in group.members  # a taken place is no new member
        if changed:
            log.info("consumer group %s: member %s joins with the classic protocol", group.group_id, member.member_id)
        group.members[member.member_id] = member
        changed |= _update(member, req, subscription.topics, subscription.rack_id)
        subscribed = {t: n for t in group.subscribed_topic_names() if (n := self.partition_count(t)) is not None}
        if changed or subscribed != group.subscribed_topics:
            group.bump_epoch(subscribed)
            log.info("consumer group %s: epoch %d (classic member %s)", group.group_id, group.group_epoch, member_id)
        group.maybe_update_target(assign)
        group.reconcile(member, {t: frozenset(ps) for t, ps in subscription.owned_partitions.items() if ps})
        self.groups.cancel_classic_timeout("join", group.group_id, member.member_id)
        self.groups.schedule_session(group, member)
        self.groups.schedule_classic_timeout("sync", group.group_id, member.member_id, member.rebalance_timeout_ms)
        if replaced is not None and replaced.classic is None and self.downgrade is not None:
            self.downgrade(group, replaced.member_id, replaced)  # the last consumer-protocol member may be gone
        return JoinGroupResult(
            member.member_id,
            ErrorCode.none,
            member.member_epoch,
            CONSUMER_PROTOCOL_TYPE,
            req.protocols[0][0],
        )

    def _joining_member(
        self, group: ConsumerGroup, req: JoinRequest, member_id: str
    ) -> ConsumerGroupMember | ErrorCode:
        instance_id = req.group_instance_id
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        existing = _static_member(group, instance_id)
        if req.member_id:
            if existing is None:
                return ErrorCode.unknown_member_id
            return existing if existing.member_id == member_id else ErrorCode.fenced_instance_id
        if existing is None:
            return ConsumerGroupMember(member_id, instance_id=instance_id)
        # the instance is back with a new member id: it takes the old one's place and assignment
        log.info(
            "consumer group %s: static member %s rejoins as %s (was %s)",
            group.group_id,
            instance_id,
            member_id,
            existing.member_id,
        )
        self.groups.cancel_timers(group.group_id, existing.member_id)
        del group.members[existing.member_id]
        group.target[member_id] = group.target.pop(existing.member_id, {})
        return dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)

    # --- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        instance_id: str | None,
    ) -> SyncGroupResult:
        group = self.groups.group(group_id)
        member = _classic_member(group, member_id, instance_id)
        if isinstance(member, ErrorCode):
            return SyncGroupResult(member)
        assert group is not None and member.classic is not None
        if generation_id != member.member_epoch:
            return SyncGroupResult(ErrorCode.illegal_generation)
        first = member.classic.supported_protocols[0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != first.name
        ):
            return SyncGroupResult(ErrorCode.inconsistent_group_protocol)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._expect_rejoin(group, member)
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        self.groups.cancel_classic_timeout("sync", group_id, member.member_id)
        self.groups.schedule_session(group, member)
        try:
            version = consumer_protocol_version(first.metadata)
        except SchemaError:
            version = 0
        partitions = {topic: sorted(ps) for topic, ps in sorted(member.assigned.items())}
        return SyncGroupResult(
            ErrorCode.none, encode_assignment(partitions, version=version), protocol_type, protocol_name
        )

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        group = self.groups.group(group_id)
        member = _classic_member(group, member_id, instance_id)
        if isinstance(member, ErrorCode):
            return member
        assert group is not None
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        self.groups.schedule_session(group, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member))
        ):
            self._expect_rejoin(group, member)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _expect_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self.groups.schedule_classic_timeout(
            "join", group.group_id, member.member_id, member.rebalance_timeout_ms, if_absent=True
        )

    def leave(self, group_id: str, members: Sequence[LeavingMember]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, an error per member named); a member may be named by instance id alone.
        The change is written in the background (``persist`` is spawned by the caller)."""
        group = self.groups.group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id, []
        errors: list[ErrorCode] = []
        leaving: list[str] = []
        for member_id, instance_id, reason in members:
            member = _classic_member(group, member_id, instance_id, admin=True)
            if isinstance(member, ErrorCode):
                errors.append(member)
                continue
            log.info(
                "consumer group %s: classic member %s left; client reason: %s",
                group_id,
                member.member_id,
                reason or "not provided",
            )
            leaving.append(member.member_id)
            errors.append(ErrorCode.none)
        if leaving:
            self.groups.remove_members(group, leaving, "left the group (LeaveGroup)")
        return ErrorCode.none, errors


def _static_member(group: ConsumerGroup, instance_id: str) -> ConsumerGroupMember | None:
    return next((m for m in group.members.values() if m.instance_id == instance_id), None)


def _classic_member(
    group: ConsumerGroup | None, member_id: str, instance_id: str | None, admin: bool = False
) -> ConsumerGroupMember | ErrorCode:
    """The classic member a request names (Kafka's ``validateConsumerGroupMember``): by instance id
    when given (FENCED_INSTANCE_ID if held by another member id; ``admin``: an empty member id
    names the instance's member), else by member id; UNKNOWN_MEMBER_ID for none, or for a member
    of the consumer protocol."""
    if group is None:
        return ErrorCode.unknown_member_id
    if instance_id is None:
        member = group.members.get(member_id)
    else:
        member = _static_member(group, instance_id)
        if member is not None and member.member_id != member_id and not (admin and member_id == ""):
            return ErrorCode.fenced_instance_id
    if member is None or member.classic is None:
        return ErrorCode.unknown_member_id
    return member


def _update(member: ConsumerGroupMember, req: JoinRequest, topics: Sequence[str], rack_id: str | None) -> bool:
    """Apply a JoinGroup to its member; whether its subscription changed."""
    names = tuple(sorted(set(topics)))
    changed = names != member.subscribed_topic_names
    member.subscribed_topic_names = names
    if req.group_instance_id is not None:
        member.instance_id = req.group_instance_id
    if rack_id is not None:
        member.rack_id = rack_id
    if req.rebalance_timeout_ms > 0:
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.client_id, member.client_host = req.client_id, req.client_host
    protocols = tuple(ClassicProtocol(name, metadata) for name, metadata in req.protocols)
    member.classic = ClassicMemberMetadata(req.session_timeout_ms, protocols)
    return changed
