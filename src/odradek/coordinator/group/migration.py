"""Online migration between classic groups and consumer groups (KIP-848), as Kafka 4.x's group
coordinator converts them under ``group.consumer.migration.policy``
(:class:`~.group_config.ConsumerGroupMigrationPolicy`); and the writes of consumer groups to
``__consumer_offsets``.

- **Upgrade.** A ConsumerGroupHeartbeat joining (epoch 0) a classic group that has members turns
  it into a consumer group when the policy allows upgrades, the group's protocol type is
  ``consumer``, it has no more members than ``group.consumer.max.size`` and every member's
  ConsumerProtocol subscription and assignment decode. Otherwise the heartbeat gets
  GROUP_ID_NOT_FOUND ("not a consumer group") as in Kafka (GROUP_MAX_SIZE_REACHED when the group
  is exactly full), and the group stays classic. Its members become classic members of the
  consumer group (:mod:`.consumer_classic`): epoch the classic generation, Stable, owning their
  assignment and the partitions their last JoinGroup said they owned that no member was assigned
  (so a partition a cooperative member is still revoking is not handed out), which is also their
  target until the next assignment. Parked JoinGroups and SyncGroups are answered REBALANCE_IN_PROGRESS. The
  joining member moves the group epoch, so at their next heartbeat the classic members are told
  to rejoin and reconcile with the group's assignor.
- **Downgrade.** When the last consumer-protocol member of a group whose other members all use
  the classic protocol leaves (epoch -1), expires, is fenced or has its place (its
  ``group.instance.id``) taken by a classic member, the policy allows downgrades and
  the others fit in ``group.max.size``, the group becomes a classic group again: Stable with the
  group epoch as its generation, each member with its target assignment (as a
  ConsumerProtocolAssignment of its metadata's version) and the protocol all support with the
  most votes; then a rebalance starts at once, as Kafka starts one, and the members rejoin (not
  after a static member's replacement: the joining member syncs with the classic group).
- Committed offsets stay through both: they are kept with the classic group object, which stays
  in the coordinator (without members while the group is a consumer group).
- **Records.** Each conversion is one batch: on upgrade a tombstone of the ``GroupMetadata``
  record then every record of the consumer group; on downgrade tombstones for every record of
  the consumer group then the ``GroupMetadata`` record with the members and their assignments.
  So a new coordinator loads the group as whichever kind was written last. Between conversions
  :meth:`GroupMigration.persist` writes a consumer group's records whose bytes changed since
  its last write, and tombstones for those that went.

Event loop only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from odradek.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from odradek.coordinator.group.consumer_membership import JOIN_EPOCH, ConsumerGroupMembership, ConsumerHeartbeat
from odradek.coordinator.group.consumer_membership import ConsumerHeartbeatResult as Result
from odradek.coordinator.group.consumer_persistence import group_records
from odradek.coordinator.group.consumer_schemas import ClassicMemberMetadata, ClassicProtocol
from odradek.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, GroupMetadata
from odradek.coordinator.group.manager import GroupMetadataManager
from odradek.coordinator.group.member import JoinGroupResult, MemberMetadata, SyncGroupResult
from odradek.coordinator.group.membership import GroupMembership
from odradek.coordinator.group.schemas import (
    SchemaError,
    consumer_protocol_version,
    decode_assignment,
    decode_consumer_subscription,
    encode_assignment,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from odradek.coordinator.group.state import GroupState
from odradek.errors import ErrorCode
from odradek.protocol.records import Record

__all__ = ["GroupMigration"]

log = logging.getLogger(__name__)


class GroupMigration:
    """See the module docstring. ``topic_id``: topic name -> id (None: consumer groups are kept
    in memory only); ``partition_count``: a topic's, None while unknown; ``classic_max_size``:
    ``group.max.size``."""

    def __init__(
        self,
        consumer_groups: ConsumerGroupMembership,
        manager: GroupMetadataManager,
        membership: GroupMembership,
        classic_max_size: int,
        topic_id: Callable[[str], uuid.UUID | None] | None,
        partition_count: Callable[[str], int | None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.consumer_groups = consumer_groups
        self.manager = manager
        self.membership = membership
        self.classic_max_size = classic_max_size
        self.topic_id = topic_id
        self.partition_count = partition_count
        self.spawn = spawn
        self.policy = consumer_groups.config.migration_policy
        self.written: dict[str, dict[bytes, bytes]] = {}
        """Each consumer group's records as last submitted to ``__consumer_offsets``."""
        self._classic: dict[str, Record] = {}
        """The ``GroupMetadata`` record a conversion writes with the next write of its group."""
        consumer_groups.downgrade = self.downgrade

    # --- upgrade -----------------------------------------------------------------------------

    def upgrade(self, req: ConsumerHeartbeat, classic: GroupMetadata) -> Result | None:
        """Turn ``classic`` (a group with members) into a consumer group for the heartbeat ``req``;
        None once converted, else the answer to give (the group stays classic)."""
        group_id = classic.group_id
        invalid = self.consumer_groups.validate(req)
        if invalid is not None:
            return Result(*invalid)
        refused = Result(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        max_size = self.consumer_groups.config.max_size
        why = None
        if req.member_epoch != JOIN_EPOCH:
            return refused
        if not self.policy.upgrade_enabled:
            why = f"group.consumer.migration.policy is {self.policy.value}"
        elif not classic.is_consumer_group:
            why = f"its protocol type is {classic.protocol_type}, not {CONSUMER_PROTOCOL_TYPE}"
        elif classic.size > max_size:
            why = f"it has {classic.size} members, more than group.consumer.max.size {max_size}"
        if why is not None:
            log.info("cannot upgrade classic group %s to a consumer group: %s", group_id, why)
            return refused
        if classic.size == max_size and req.member_id not in classic.members:
            return Result(ErrorCode.group_max_size_reached, f"group {group_id} has {classic.size} members")
        try:
            group = self._consumer_group_of(classic)
        except SchemaError as exc:
            log.warning("cannot upgrade classic group %s: its consumer protocol is malformed: %s", group_id, exc)
            return Result(ErrorCode.group_id_not_found, f"Cannot upgrade the classic group {group_id}: {exc}")
        for member in classic.members.values():
            member.answer_join(JoinGroupResult(member.member_id, ErrorCode.rebalance_in_progress))
            member.answer_sync(SyncGroupResult(ErrorCode.rebalance_in_progress))
            member.cancel_heartbeat()
        self.membership.on_group_deleted(classic)  # its join, sync and pending-member timers
        classic.reset_membership(GroupState.EMPTY, self.manager.time_ms())
        self.consumer_groups.install(group)  # the members' sessions start
        self._classic[group_id] = Record(encode_group_metadata_key(group_id), None)
        log.info(
            "upgraded classic group %s (generation %d, %d members) to a consumer group",
            group_id,
            group.group_epoch,
            len(group.members),
        )
        return None

    def _consumer_group_of(self, classic: GroupMetadata) -> ConsumerGroup:
        """The consumer group of ``classic``'s members (SchemaError when one's protocol does not decode)."""
        group = ConsumerGroup(classic.group_id, self.consumer_groups.config.assignors[0])
        group.group_epoch = group.assignment_epoch = classic.generation_id
        assignments = {mid: decode_assignment(m.assignment) for mid, m in classic.members.items()}
        handed_out = {(t, p) for a in assignments.values() for t, ps in a.items() for p in ps}
        for m in classic.members.values():
            name = classic.protocol_name
            metadata = (
                m.metadata(name) if name is not None and name in m.protocol_names() else m.supported_protocols[0][1]
            )
            subscription = decode_consumer_subscription(metadata)
            owned: dict[str, set[int]] = {t: set(ps) for t, ps in assignments[m.member_id].items()}
            for topic, partitions in subscription.owned_partitions.items():  # still revoking: not handed out yet
                owned.setdefault(topic, set()).update(p for p in partitions if (topic, p) not in handed_out)
            assigned = {t: frozenset(ps) for t, ps in owned.items() if ps and self.partition_count(t) is not None}
            group.members[m.member_id] = ConsumerGroupMember(
                m.member_id,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                member_epoch=classic.generation_id,
                previous_member_epoch=classic.generation_id,
                assigned=assigned,
                classic=ClassicMemberMetadata(
                    m.session_timeout_ms, tuple(ClassicProtocol(n, d) for n, d in m.supported_protocols)
                ),
            )
            group.target[m.member_id] = dict(assigned)
        names = group.subscribed_topic_names()
        group.subscribed_topics = {t: n for t in names if (n := self.partition_count(t)) is not None}
        return group

    # --- downgrade ---------------------------------------------------------------------------

    def downgrade(self, group: ConsumerGroup, leaving_id: str, replaced: ConsumerGroupMember | None = None) -> bool:
        """The member ``leaving_id`` leaves ``group`` for good: whether the group became a classic
        group instead (it was the last consumer-protocol member; see the module docstring).
        ``replaced``: the member, already out of the group, whose place a static classic member
        took (the group then converts without a rebalance, as Kafka does)."""
        leaving = replaced or group.members.get(leaving_id)
        others = [m for m in group.members.values() if m.member_id != leaving_id]
        if leaving is None or leaving.classic is not None or not others or any(m.classic is None for m in others):
            return False
        group_id = group.group_id
        if not self.policy.downgrade_enabled or len(others) > self.classic_max_size:
            log.info(
                "consumer group %s keeps only classic members but stays a consumer group "
                "(group.consumer.migration.policy %s, %d members, group.max.size %d)",
                group_id,
                self.policy.value,
                len(others),
                self.classic_max_size,
            )
            return False
        now = self.manager.time_ms()
        try:
            staged = _classic_group_of(group, others, now)
        except (SchemaError, ValueError) as exc:
            log.warning("cannot downgrade consumer group %s to a classic group: %s", group_id, exc)
            return False
        self.consumer_groups.forget(group_id)
        classic = self.manager.get_group(group_id) or self.manager.add_group(
            GroupMetadata(group_id, GroupState.EMPTY, now)
        )
        classic.reset_membership(GroupState.STABLE, now)
        classic.generation_id = group.group_epoch
        for classic_member in staged.members.values():
            classic.add(classic_member)
        classic.protocol_name = staged.protocol_name
        classic.subscribed_topics = classic.compute_subscribed_topics()
        assignments = {mid: classic_member.assignment for mid, classic_member in classic.members.items()}
        value = encode_group_metadata_value(classic.to_record(assignments))
        self._classic[group_id] = Record(encode_group_metadata_key(group_id), value)
        for classic_member in classic.members.values():
            self.membership.schedule_heartbeat(classic, classic_member, classic_member.session_timeout_ms)
        log.info(
            "downgraded consumer group %s to a classic group (generation %d, %d members): member %s left",
            group_id,
            classic.generation_id,
            classic.size,
            leaving_id,
        )
        if replaced is None:
            self.membership.prepare_rebalance(classic, f"Downgrade group {group_id} from consumer to classic.")
        return True

    # --- records -----------------------------------------------------------------------------

    async def persist(self, group_id: str) -> ErrorCode:
        """Write what changed in a consumer group since its last write (tombstones for the records
        that went), with the ``GroupMetadata`` record of a conversion. The records submitted become
        the new base at once, so writes of one group follow each other in the log as their changes
        did."""
        classic = self._classic.pop(group_id, None)
        if self.topic_id is None:
            return ErrorCode.none
        group = self.consumer_groups.group(group_id)
        new = group_records(group, self.topic_id) if group is not None else {}
        old = self.written.get(group_id, {})
        changed = [Record(k, v) for k, v in new.items() if old.get(k) != v]
        changed += [Record(k, None) for k in old if k not in new]
        if classic is not None:
            changed = [classic, *changed] if classic.value is None else [*changed, classic]
        if not changed:
            return ErrorCode.none
        if new:
            self.written[group_id] = new
        else:
            self.written.pop(group_id, None)
        return await self.manager.write_records(group_id, changed)

    def persist_later(self, group_id: str) -> None:
        """A consumer group changed outside a request that waits for its write (a timer, a
        LeaveGroup): write it in the background."""
        self.spawn(self._persist_logged(group_id))

    async def _persist_logged(self, group_id: str) -> None:
        error = await self.persist(group_id)
        if error is not ErrorCode.none:
            log.warning("writing consumer group %s failed: %s", group_id, error.name)

    def forget(self, group_id: str) -> None:
        """The coordinator no longer has the group (unloaded)."""
        self.written.pop(group_id, None)
        self._classic.pop(group_id, None)


def _classic_group_of(group: ConsumerGroup, members: list[ConsumerGroupMember], now_ms: int) -> GroupMetadata:
    """A classic group (not installed) of ``members``, the classic members of ``group``: their
    protocol chosen (ValueError when they share none) and their target assignments encoded in
    its metadata's version (SchemaError when one does not decode)."""
    staged = GroupMetadata(group.group_id, GroupState.STABLE, now_ms)
    for m in members:
        assert m.classic is not None
        protocols = [(p.name, p.metadata) for p in m.classic.supported_protocols]
        staged.add(
            MemberMetadata(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                protocols,
            )
        )
    protocol = staged.protocol_name = staged.select_protocol()
    for member in staged.members.values():
        target = {t: sorted(ps) for t, ps in sorted(group.target.get(member.member_id, {}).items())}
        version = consumer_protocol_version(member.metadata(protocol))
        member.assignment = encode_assignment(target, version=version)
    return staged
