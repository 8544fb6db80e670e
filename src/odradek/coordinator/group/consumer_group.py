"""A consumer group of the next-generation protocol (KIP-848), as Kafka 4.x's ``ConsumerGroup``
and ``CurrentAssignmentBuilder``: epochs, the target assignment and each member's reconciliation.

The coordinator computes the assignment; members converge to it one heartbeat at a time:

- **Group epoch**: bumped whenever what the assignment depends on changes (a member joins or
  leaves, a subscription changes, a subscribed topic's partition count changes).
- **Target assignment**: computed by the group's server-side assignor
  (:mod:`.consumer_assignors`) when the group epoch is ahead of the assignment epoch; the
  assignment epoch then equals the group epoch.
- **Member epoch**: a member reaches the assignment epoch once it owns nothing the target takes
  from it. Reconciliation (``CurrentAssignmentBuilder``), per member and heartbeat:

  1. partitions it owns that its target no longer holds must be revoked first: the member stays
     at its epoch in ``UNREVOKED_PARTITIONS`` and is told only the partitions it keeps, until a
     heartbeat's owned partitions no longer include the revoked ones;
  2. then it moves to the assignment epoch and gets the partitions of its target that no other
     member still owns or is revoking; those still held elsewhere wait (``UNRELEASED_PARTITIONS``)
     and are given at a later heartbeat once released;
  3. with nothing to revoke or wait for it is ``STABLE``.

  So a partition never has two owners: a member is given a partition only once no other member
  owns it or is revoking it.

Partitions are named by topic name here; the heartbeat handler translates to topic ids. The
group's state (Kafka's names): ``Empty`` (no members), ``Assigning`` (the target is behind the
group epoch), ``Reconciling`` (a member is not at the assignment epoch), ``Stable``.

A member may also speak the classic protocol (JoinGroup and SyncGroup, :mod:`.consumer_classic`):
it then carries its :attr:`ConsumerGroupMember.classic` metadata (session timeout, protocols) and
reconciles the same way, at each JoinGroup, with the owned partitions of its subscription.

Pure state, no I/O and no timers (those are :mod:`.consumer_membership`'s). Event loop only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from odradek.coordinator.group.consumer_schemas import ClassicMemberMetadata

__all__ = [
    "Assignment",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "MemberState",
    "TopicsAssigner",
]

Assignment = dict[str, frozenset[int]]
"""Topic name -> partitions."""

TopicsAssigner = Callable[
    [str, Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Assignment]], dict[str, Assignment]
]
"""``(assignor name, member -> subscribed topics, topic -> partition count, member -> current
target) -> member -> new target``."""


class MemberState(enum.Enum):
    """Kafka's ``MemberState`` (the values ConsumerGroupDescribe shows)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass
class ConsumerGroupMember:
    """One member: what it sent (subscription, timeouts, client) and where it stands."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    """Partitions the member may use now."""
    pending_revocation: Assignment = field(default_factory=dict)
    """Partitions it must give up before it moves on (still its own until it does)."""
    classic: ClassicMemberMetadata | None = None
    """A member that joined with JoinGroup: its session timeout and protocols (name, metadata) in
    its order of preference; None for a member of the consumer protocol."""

    def owns(self) -> Iterable[tuple[str, int]]:
        """Every partition it holds or is revoking."""
        for assignment in (self.assigned, self.pending_revocation):
            for topic, partitions in assignment.items():
                for p in partitions:
                    yield topic, p


def _nonempty(assignment: Mapping[str, Iterable[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


class ConsumerGroup:
    """See the module docstring."""

    def __init__(self, group_id: str, default_assignor: str = "uniform") -> None:
        self.group_id = group_id
        self.default_assignor = default_assignor
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        """Member -> its target assignment at :attr:`assignment_epoch`."""
        self.subscribed_topics: dict[str, int] = {}
        """The partition count of each subscribed topic when the group epoch last moved."""
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        """Each subscribed regular expression -> the topics it matched when last resolved."""
        self.regex_versions: dict[str, tuple[int, int]] = {}
        """Each resolved regular expression -> (group epoch, time in ms) when its topics last changed."""

    # --- what the group is -------------------------------------------------------------------

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def member_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The topics ``member`` subscribes to: its names and what its regex matched."""
        topics = frozenset(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            topics |= self.resolved_regexes.get(member.subscribed_topic_regex, frozenset())
        return topics

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in self.member_topics(m)}

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a classic member with these protocols may join (Kafka's
        ``supportsClassicProtocols``): protocol type ``consumer`` and one protocol every classic
        member supports (any protocol while there is none)."""
        wanted = set(names)
        if protocol_type != "consumer" or not wanted:
            return False
        for member in self.classic_members():
            assert member.classic is not None
            wanted &= {p.name for p in member.classic.supported_protocols}
        return bool(wanted)

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        """Whether a member in ``UNRELEASED_PARTITIONS`` still waits for a partition of its target
        that another member owns or revokes (Kafka's ``waitingOnUnreleasedPartition``)."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        owners = self._owners(member.member_id)
        return any(
            (topic, p) in owners and p not in member.assigned.get(topic, frozenset())
            for topic, partitions in self.target.get(member.member_id, {}).items()
            for p in partitions
        )

    def assignor(self) -> str:
        """The assignor the members ask for most (Kafka's ``computePreferredServerAssignor``),
        ties to the smaller name; the default when none asks."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.default_assignor
        return min(votes, key=lambda name: (-votes[name], name))

    # --- epochs and the target ---------------------------------------------------------------

    def bump_epoch(self, topics: Mapping[str, int]) -> None:
        """Something the assignment depends on changed: a new group epoch (``topics``: the
        partition count of each subscribed topic now)."""
        self.group_epoch += 1
        self.subscribed_topics = dict(topics)

    def maybe_update_target(self, assign: TopicsAssigner) -> bool:
        """Compute the target assignment if the group epoch moved past it; whether it did."""
        if self.assignment_epoch >= self.group_epoch:
            return False
        subscriptions = {
            mid: frozenset(t for t in self.member_topics(m) if t in self.subscribed_topics)
            for mid, m in self.members.items()
        }
        current = {mid: self.target.get(mid, {}) for mid in self.members}
        new = assign(self.assignor(), subscriptions, self.subscribed_topics, current)
        self.target = {mid: _nonempty(new.get(mid, {})) for mid in self.members}
        self.assignment_epoch = self.group_epoch
        return True

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Drop a member (left, fenced, expired); its partitions are free for the others at once."""
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        return member

    # --- reconciliation ----------------------------------------------------------------------

    def _owners(self, excluding: str) -> dict[tuple[str, int], str]:
        """Partition -> the member (other than ``excluding``) holding or revoking it."""
        owners: dict[tuple[str, int], str] = {}
        for mid, m in self.members.items():
            if mid != excluding:
                for tp in m.owns():
                    owners[tp] = mid
        return owners

    def reconcile(self, member: ConsumerGroupMember, owned: Assignment | None) -> bool:
        """Move ``member`` towards its target (see the module docstring); ``owned`` is what its
        heartbeat says it owns (None: not sent, unchanged). Whether its assignment or epoch changed."""
        before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
        target_epoch = self.assignment_epoch
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            still_owned = owned is None or any(
                p in owned.get(t, frozenset()) for t, ps in member.pending_revocation.items() for p in ps
            )
            if still_owned:
                return False
            member.pending_revocation = {}
            self._advance(member, target_epoch)
        elif member.member_epoch != target_epoch or member.state is MemberState.UNRELEASED_PARTITIONS:
            self._advance(member, target_epoch)
        return before != (member.member_epoch, member.state, member.assigned, member.pending_revocation)

    def _advance(self, member: ConsumerGroupMember, target_epoch: int) -> None:
        target = self.target.get(member.member_id, {})
        kept: dict[str, set[int]] = {}
        revoke: dict[str, set[int]] = {}
        for topic, partitions in member.assigned.items():
            wanted = target.get(topic, frozenset())
            kept[topic] = set(partitions & wanted)
            revoke[topic] = set(partitions - wanted)
        if any(revoke.values()):  # revoke first, at the current epoch
            member.assigned = _nonempty(kept)
            member.pending_revocation = _nonempty(revoke)
            member.state = MemberState.UNREVOKED_PARTITIONS
            return
        owners = self._owners(member.member_id)
        unreleased = False
        for topic, wanted in target.items():
            for p in wanted:
                if (topic, p) in owners:
                    unreleased = True
                else:
                    kept.setdefault(topic, set()).add(p)
        if member.member_epoch != target_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = target_epoch
        member.assigned = _nonempty(kept)
        member.pending_revocation = {}
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
