"""A classic group's metadata: members, state, generation, chosen protocol, committed offsets.

Kafka's ``GroupMetadata``: membership (members by id, static members by ``group.instance.id``,
"pending" members that got an id from MEMBER_ID_REQUIRED and have not rejoined yet, members the
current generation still waits a SyncGroup from), the state of :mod:`.state` (every move goes
through :meth:`GroupMetadata.transition_to`, which enforces the transition table), and the
offset cache: committed offsets with the ``__consumer_offsets`` offset of the record holding them,
plus commits written but not yet acknowledged (``pending_offset_commits``).

The group never does I/O or keeps time itself: the coordinator passes ``now_ms``. Event loop
thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.coordinator.group.member import JoinCallback, JoinGroupResult, MemberMetadata, SyncGroupResult
from odradek.coordinator.group.schemas import (
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
    SchemaError,
    decode_subscription,
)
from odradek.coordinator.group.state import GroupState, can_rebalance, check_transition
from odradek.coordinator.runtime import Timer
from odradek.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

__all__ = ["CONSUMER_PROTOCOL_TYPE", "CommitRecord", "GroupMetadata", "GroupOverview", "GroupSummary", "MemberSummary"]

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A committed offset and the ``__consumer_offsets`` offset of its record (None: not written)."""

    value: OffsetAndMetadata
    record_offset: int | None


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"
    """ListGroups v5: ``classic`` or ``consumer`` (KIP-848)."""


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.offsets: dict[TopicPartition, CommitRecord] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False
        # Timers owned by the coordinator's membership logic.
        self.join_timer: Timer | None = None
        self.sync_timer: Timer | None = None
        self.initial_delay_active = False
        self.pending_member_timers: dict[str, Timer] = {}

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"protocol_type={self.protocol_type}, members={sorted(self.members)})"
        )

    # --- state -------------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Move to ``target``; IllegalStateTransition if the table does not allow it."""
        check_transition(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp_ms = now_ms

    def reset_membership(self, state: GroupState, now_ms: int) -> None:
        """Start over without members in ``state`` because the group changes protocol (KIP-848's
        online migration, :mod:`.migration`): Empty when it became a consumer group (it keeps
        only its offsets), Stable when it is a classic group again (its members are added next).
        The state is set outside the transition table, as a load sets it; the caller has answered
        the parked requests and stopped the timers."""
        self.state = state
        self.state_timestamp_ms = now_ms
        self.protocol_type = self.protocol_name = self.leader_id = None
        self.generation_id = 0
        self.members, self.static_members = {}, {}
        self.pending_members, self.pending_sync_members = set(), set()
        self.subscribed_topics = None
        self.new_member_added = self.initial_delay_active = False
        self.join_timer = self.sync_timer = None
        self.pending_member_timers = {}

    @property
    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # --- members -----------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return all(m.is_awaiting_join for m in self.members.values()) and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        """Add a member (and its join callback). The first member fixes the protocol type and
        becomes leader if there is none."""
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already in group {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.awaiting_join = callback
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            member.cancel_heartbeat()
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Sequence[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        member.supported_protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = callback

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did. False if nobody did (or
        there is no leader)."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    # --- static members ----------------------------------------------------------------------------

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """Give a static member a new member id. A request of the old id still parked is
        answered FENCED_INSTANCE_ID (it is a duplicate instance)."""
        member = self.members.pop(old_member_id)
        member.answer_join(JoinGroupResult(old_member_id, ErrorCode.fenced_instance_id))
        member.answer_sync(SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    # --- protocols ---------------------------------------------------------------------------------

    def _candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """Whether a member with these protocols may join: any non-empty set for an empty group,
        else the same protocol type and at least one protocol every member supports."""
        names = set(protocols)
        if self.is_(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self._candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol every member supports with the most votes (each member votes for its
        most preferred candidate); ties go to the first voted. ValueError for an empty group."""
        candidates = self._candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id} has no protocol all members support")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members of a ``consumer`` group subscribe to; None if unknown (not a
        consumer group, no protocol yet, or unparsable metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name)))
        except (SchemaError, KeyError):
            log.warning("cannot parse the consumer subscriptions of group %s", self.group_id)
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        """Bump the generation and choose the protocol; CompletingRebalance, or Empty without members."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """(member id, instance id, metadata of the chosen protocol) of every member, for the leader."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise ValueError(f"group {self.group_id} has no member metadata in state {self.state}")
        name = self.protocol_name
        return tuple((m.member_id, m.group_instance_id, m.metadata(name)) for m in self.members.values())

    # --- views -------------------------------------------------------------------------------------

    def summary(self) -> GroupSummary:
        """DescribeGroups' view: metadata and assignments only when Stable."""
        stable = self.is_(GroupState.STABLE) and self.protocol_name is not None
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable and self.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return GroupSummary(
            self.state.value, self.protocol_type or "", (self.protocol_name or "") if stable else "", members
        )

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", self.state.value)

    def to_record(self, assignment: Mapping[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadataValue to store, with ``assignment`` (member id -> bytes)."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms if self.state_timestamp_ms is not None else -1,
            members=tuple(
                MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(self.protocol_name) if self.protocol_name else b"",
                    assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> GroupMetadata:
        """A group loaded from ``__consumer_offsets``: Stable with its members, or Empty."""
        group = cls(group_id, GroupState.STABLE if value.members else GroupState.EMPTY, now_ms)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp_ms = value.current_state_timestamp_ms if value.current_state_timestamp_ms >= 0 else None
        for m in value.members:
            member = MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                group.protocol_type or "",
                [(value.protocol, m.subscription)] if value.protocol else [],
                assignment=m.assignment,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    # --- offsets -----------------------------------------------------------------------------------

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        record = self.offsets.get(tp)
        return record.value if record is not None else None

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def has_pending_commit(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits

    def prepare_offset_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, value: OffsetAndMetadata, record_offset: int) -> None:
        """The commit of ``value`` to ``tp`` was written at ``record_offset``: make it visible
        (unless a later record already is), and drop it from the pending commits."""
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.record_offset is None or current.record_offset < record_offset:
                self.offsets[tp] = CommitRecord(value, record_offset)
        if self.pending_offset_commits.get(tp) == value:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == value:
            del self.pending_offset_commits[tp]

    def load_offset(self, tp: TopicPartition, value: OffsetAndMetadata | None, record_offset: int) -> None:
        """Apply one record read from the log at load time (None value = tombstone)."""
        if value is None:
            self.offsets.pop(tp, None)
        else:
            self.offsets[tp] = CommitRecord(value, record_offset)

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            record = self.offsets.pop(tp, None)
            if record is not None:
                removed[tp] = record.value
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Drop and return the offsets that expired (Kafka's rules, KIP-211):

        - an Empty group with a protocol type: ``retention_ms`` after the group became Empty
          (after the commit for groups stored without a state timestamp);
        - a Stable consumer group whose subscriptions are known: offsets of topics no member
          subscribes to, ``retention_ms`` after their commit;
        - a group that never had members ("simple" commits): ``retention_ms`` after the commit;
        - otherwise nothing. Offsets with a commit in flight never expire; a commit with its own
          expire timestamp (OffsetCommit v2..v4) expires at that time instead.
        """
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.state_timestamp_ms
            subscribed: set[str] = set()

            def base(record: CommitRecord) -> int:
                return state_ts if state_ts is not None else record.value.commit_timestamp_ms
        elif self.is_consumer_group and self.subscribed_topics is not None and self.is_(GroupState.STABLE):
            subscribed = self.subscribed_topics

            def base(record: CommitRecord) -> int:
                return record.value.commit_timestamp_ms
        elif self.protocol_type is None:
            subscribed = set()

            def base(record: CommitRecord) -> int:
                return record.value.commit_timestamp_ms
        else:
            return {}
        expired: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, record in self.offsets.items():
            if tp.topic in subscribed or tp in self.pending_offset_commits:
                continue
            expire_at = record.value.expire_timestamp_ms
            if (expire_at is not None and now_ms >= expire_at) or (
                expire_at is None and now_ms - base(record) >= retention_ms
            ):
                expired[tp] = record.value
        for tp in expired:
            del self.offsets[tp]
        return expired
