"""A share group (KIP-932), as Kafka 4.2's ``ShareGroup``, ``ShareGroupMember`` and
``ShareGroupAssignmentBuilder``: members, epochs, the target assignment, and which
share-partitions have their state initialized.

- **Group epoch**: bumped when what the assignment depends on changes: a member joins, leaves or
  changes its subscription, a subscribed topic's partition count (or id: deleted and created
  again) changes, or partitions whose share state was initialized since are not in the target yet.
- **Target assignment**: computed by the ``simple`` assignor (:mod:`.share_assignor`) over every
  member when the group epoch is ahead of the assignment epoch; the assignment epoch then equals
  the group epoch.
- **Member epoch**: there is no revocation step (several members may hold a partition, so nothing
  has to be released first): at its heartbeat a member behind the assignment epoch moves to it and
  takes its target (filtered to the topics it subscribes to) as its assignment at once; its
  previous epoch is kept, and a heartbeat with the previous epoch is still accepted (the answer
  carrying the new one may have been lost).
- **State** (Kafka's names): ``Empty`` without members, ``Stable`` with members.

Partitions go by topic id (``{topic_id: partitions}``), as on the wire and in the records.

**Share-partition state** (``initializing`` / ``initialized`` / ``deleting``, Kafka's
``ShareGroupStatePartitionMetadata``): with a persister, only partitions whose state the share
coordinator has initialized are assignable. A heartbeat finds the subscribed partitions neither
initialized nor being initialized (or being initialized for longer than the retry interval) and
marks them initializing; the coordinator initializes them off the request path and marks them
initialized (or drops them from initializing on failure); the next heartbeat sees initialized
partitions missing from the target and bumps the group epoch. Without a persister every
partition of a subscribed topic is assignable at once.

Pure state, no I/O and no timers (:mod:`.share_membership` has those). Event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.coordinator.group.share_assignor import ShareAssignment, assign_shares

__all__ = ["InitTopic", "ShareGroup", "ShareGroupMember", "ShareTopic"]


class ShareTopic(NamedTuple):
    """A topic as the metadata knows it now."""

    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True)
class InitTopic:
    """Partitions of one topic in a state of share-state initialization; ``since_ms`` is when
    their initialization started (or when the record was loaded), -1 for initialized ones."""

    name: str
    partitions: frozenset[int]
    since_ms: int = -1


@dataclass
class ShareGroupMember:
    """One member: what it sent and what it holds. A new member is at epoch 0 with previous
    epoch 0 (Kafka's defaults), so its join repeated before it heard the answer is accepted."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    """Sorted, without repeats."""
    assigned: ShareAssignment = field(default_factory=dict)
    """Topic id -> the partitions it consumes now."""


def _merge(into: dict[uuid.UUID, InitTopic], topics: Mapping[uuid.UUID, InitTopic]) -> None:
    for tid, t in topics.items():
        old = into.get(tid)
        into[tid] = InitTopic(t.name, t.partitions | (old.partitions if old else frozenset()), t.since_ms)


def _subtract(into: dict[uuid.UUID, InitTopic], topics: Mapping[uuid.UUID, frozenset[int]]) -> None:
    for tid, partitions in topics.items():
        old = into.get(tid)
        if old is None:
            continue
        left = old.partitions - partitions
        if left:
            into[tid] = InitTopic(old.name, left, old.since_ms)
        else:
            del into[tid]


class ShareGroup:
    """See the module docstring."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target: dict[str, ShareAssignment] = {}
        """Member -> its target assignment at :attr:`assignment_epoch`."""
        self.subscribed_topics: dict[str, ShareTopic] = {}
        """The subscribed topics as the metadata knew them when the group epoch last moved."""
        self.initializing: dict[uuid.UUID, InitTopic] = {}
        self.initialized: dict[uuid.UUID, InitTopic] = {}
        self.deleting: dict[uuid.UUID, str] = {}
        """Topic id -> name of topics whose share state is being deleted."""
        self.has_state_metadata = False
        """Whether the group has a ShareGroupStatePartitionMetadata record (written once any
        partition was initialized, then kept, even empty, until the group is deleted)."""

    # --- what the group is -------------------------------------------------------------------

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def topic_ids(self, names: Iterable[str], topics: Mapping[str, ShareTopic]) -> frozenset[uuid.UUID]:
        """The ids of the topics of ``names`` that exist."""
        return frozenset(topics[n].topic_id for n in names if n in topics)

    # --- epochs and the target ---------------------------------------------------------------

    def bump_epoch(self, topics: Mapping[str, ShareTopic]) -> None:
        """Something the assignment depends on changed; ``topics``: the subscribed topics now."""
        self.group_epoch += 1
        self.subscribed_topics = dict(topics)

    def assignable(self, gated: bool) -> dict[uuid.UUID, frozenset[int]]:
        """Topic id -> the partitions the assignor may hand out: those of every subscribed topic,
        or with ``gated`` (a persister is in use) only those whose share state is initialized."""
        out: dict[uuid.UUID, frozenset[int]] = {}
        for topic in self.subscribed_topics.values():
            partitions = frozenset(range(topic.partitions))
            if gated:
                done = self.initialized.get(topic.topic_id)
                partitions &= done.partitions if done is not None else frozenset()
            if partitions:
                out[topic.topic_id] = partitions
        return out

    def maybe_update_target(self, gated: bool) -> bool:
        """Compute the target assignment if the group epoch moved past it; whether it did."""
        if self.assignment_epoch >= self.group_epoch:
            return False
        subscriptions = {
            mid: self.topic_ids(m.subscribed_topic_names, self.subscribed_topics) for mid, m in self.members.items()
        }
        self.target = assign_shares(subscriptions, self.assignable(gated), self.target)
        self.assignment_epoch = self.group_epoch
        return True

    def reconcile(self, member: ShareGroupMember, topics: Mapping[str, ShareTopic], subscription_changed: bool) -> None:
        """Bring ``member`` to the assignment epoch with its target (Kafka's
        ``ShareGroupAssignmentBuilder``); with a changed subscription its assignment is filtered
        again even at the same epoch. ``topics``: the metadata now (to filter by topic id)."""
        if self.assignment_epoch == member.member_epoch and not subscription_changed:
            return
        subscribed = self.topic_ids(member.subscribed_topic_names, topics)
        target = self.target.get(member.member_id, {})
        member.assigned = {t: ps for t, ps in target.items() if t in subscribed}
        if self.assignment_epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch

    def remove_member(self, member_id: str) -> ShareGroupMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        return member

    # --- share-partition state ---------------------------------------------------------------

    def initialized_assignment_pending(self) -> bool:
        """Partitions of a subscribed topic were initialized but the target does not hold exactly
        them (Kafka's ``initializedAssignmentPending``): the assignment must be computed again."""
        if not self.members or not self.initialized:
            return False
        assigned: dict[uuid.UUID, set[int]] = {}
        for target in self.target.values():
            for tid, partitions in target.items():
                assigned.setdefault(tid, set()).update(partitions)
        for name, topic in self.subscribed_topics.items():
            done = self.initialized.get(topic.topic_id)
            if done is not None and done.name == name:
                wanted = {p for p in done.partitions if p < topic.partitions}
                if wanted and assigned.get(topic.topic_id, set()) != wanted:
                    return True
        return False

    def uninitialized(self, topics: Mapping[str, ShareTopic], now_ms: int, retry_ms: int) -> dict[uuid.UUID, InitTopic]:
        """The subscribed partitions (of ``topics``, the metadata now) neither initialized nor
        being initialized for less than ``retry_ms`` (Kafka's ``subscribedTopicsChangeMap``)."""
        out: dict[uuid.UUID, InitTopic] = {}
        for name in sorted(self.subscribed_topic_names()):
            topic = topics.get(name)
            if topic is None:
                continue
            covered: set[int] = set()
            done = self.initialized.get(topic.topic_id)
            if done is not None:
                covered |= done.partitions
            pending = self.initializing.get(topic.topic_id)
            if pending is not None and now_ms - pending.since_ms < retry_ms:
                covered |= pending.partitions
            missing = frozenset(range(topic.partitions)) - covered
            if missing:
                out[topic.topic_id] = InitTopic(name, missing, now_ms)
        return out

    def mark_initializing(self, topics: Mapping[uuid.UUID, InitTopic]) -> None:
        """Their initialization starts now (a topic being deleted is no longer)."""
        _merge(self.initializing, topics)
        for tid in topics:
            self.deleting.pop(tid, None)
        self.has_state_metadata = True

    def mark_initialized(self, topics: Mapping[uuid.UUID, InitTopic]) -> None:
        """Their state exists: assignable from the next heartbeat on."""
        _subtract(self.initializing, {tid: t.partitions for tid, t in topics.items()})
        _merge(self.initialized, {tid: InitTopic(t.name, t.partitions) for tid, t in topics.items()})
        self.has_state_metadata = True

    def unmark_initializing(self, topics: Mapping[uuid.UUID, frozenset[int]]) -> None:
        """Their initialization failed: a later heartbeat tries again."""
        _subtract(self.initializing, topics)

    def mark_deleting(self) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
        """The group is being deleted: every initialized or initializing topic becomes deleting;
        returns topic id -> (name, partitions known to have or get state)."""
        out: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        for source in (self.initialized, self.initializing):
            for tid, t in source.items():
                name, partitions = out.get(tid, (t.name, frozenset()))
                out[tid] = (name, partitions | t.partitions)
        for tid, (name, _) in out.items():
            self.deleting[tid] = name
        for tid, name in self.deleting.items():
            out.setdefault(tid, (name, frozenset()))
        self.initialized.clear()
        self.initializing.clear()
        if out:
            self.has_state_metadata = True
        return out
