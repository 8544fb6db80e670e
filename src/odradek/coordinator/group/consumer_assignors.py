"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

With the consumer protocol the coordinator, not a group leader, computes every member's target
assignment. This module is that computation and nothing else: pure functions of their inputs, no
I/O, no clock, no shared state. Any thread may call them; the assignor objects are stateless.

Inputs:

- :class:`MemberSubscription` per member: member id, optional ``group.instance.id`` and rack, and
  the subscribed topic *names* (a regex subscription is resolved to names before it gets here);
- :class:`MemberAssignment` per member: what the member currently owns, topic -> partitions;
- :class:`GroupSpec`: both of the above for every member, and whether all members subscribe to the
  same topics (``homogeneous``, computed);
- :class:`SubscribedTopicDescriber`: topic -> partition count (and optionally the racks of each
  partition's replicas), i.e. the topics that exist right now.

Output (:data:`TargetAssignment`): member id -> topic -> ``frozenset`` of partition indexes. Every
member of the group is a key, possibly with an empty dict; a topic only appears with a non-empty set.

Rules shared by both assignors:

- a partition goes to at most one member, and every partition of every topic that at least one
  member subscribes to goes to some member (topics nobody subscribes to are not assigned);
- a member only gets partitions of topics it subscribes to;
- a subscribed topic the describer does not know (deleted, or not created yet) is ignored, and a
  current assignment of a deleted topic, of a partition index beyond the topic's partition count or
  of a topic the member no longer subscribes to is dropped;
- input mappings may be in any order: members are always visited in member-id order, topics in name
  order (or the order stated below), partitions in index order, so equal inputs give equal outputs.

Racks are carried in the describer and the subscriptions but neither assignor uses them yet.

The assignor a member asks for travels as ``ServerAssignor`` in ConsumerGroupHeartbeat; an unknown
name raises :class:`UnsupportedAssignorError` (``UNSUPPORTED_ASSIGNOR``), see :func:`assignor_for`.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from bisect import insort
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import ClassVar

from odradek.errors import ErrorCode, KafkaError

__all__ = [
    "ASSIGNORS",
    "ConsumerGroupPartitionAssignor",
    "GroupSpec",
    "MemberAssignment",
    "MemberSubscription",
    "RangeAssignor",
    "SubscribedTopicDescriber",
    "TargetAssignment",
    "UniformAssignor",
    "UnsupportedAssignorError",
    "assignor_for",
]

TargetAssignment = dict[str, dict[str, frozenset[int]]]
"""member id -> topic name -> partition indexes; every member present, no empty partition sets."""

_EMPTY: Mapping[str, frozenset[int]] = MappingProxyType({})

# The heterogeneous uniform builder stops balancing after this many passes over the topics. Members
# with identical subscriptions settle in one pass; overlapping, different subscriptions converge
# roughly geometrically, so the limit trades the last bit of balance for a bounded running time.
_MAX_BALANCE_PASSES = 16


class UnsupportedAssignorError(KafkaError):
    """A member asked for a server assignor this broker does not have (``UNSUPPORTED_ASSIGNOR``)."""

    error_code = ErrorCode.unsupported_assignor

    def __init__(self, name: str, available: Iterable[str]) -> None:
        self.name = name
        self.available = tuple(sorted(available))
        super().__init__(f"unsupported assignor {name!r}; this broker has {', '.join(self.available)}")


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What one member subscribes to. ``topics``: topic names; ``instance_id``: ``group.instance.id``
    of a static member, else None; ``rack_id``: the client's ``client.rack``, else None."""

    member_id: str
    topics: frozenset[str]
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """Partitions one member owns now: topic -> frozenset of partition indexes (no empty sets).

    Build it with :meth:`of`, which copies any mapping of iterables and drops empty topics.
    """

    partitions: Mapping[str, frozenset[int]] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def of(cls, partitions: Mapping[str, Iterable[int]] | None = None) -> MemberAssignment:
        if not partitions:
            return cls()
        frozen = {topic: frozenset(parts) for topic, parts in partitions.items()}
        return cls(MappingProxyType({topic: parts for topic, parts in frozen.items() if parts}))

    def size(self) -> int:
        """The number of partitions owned, over all topics."""
        return sum(len(parts) for parts in self.partitions.values())


@dataclass(frozen=True, slots=True)
class SubscribedTopicDescriber:
    """The topics that exist: name -> partition count (>= 0), and optionally, per topic, partition ->
    racks holding a replica. A topic absent from ``partition_counts`` does not exist."""

    partition_counts: Mapping[str, int]
    partition_racks: Mapping[str, Mapping[int, frozenset[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for topic, count in self.partition_counts.items():
            if count < 0:
                raise ValueError(f"topic {topic!r} has a negative partition count {count}")

    def num_partitions(self, topic: str) -> int | None:
        """The partition count of ``topic``, or None when the topic does not exist."""
        return self.partition_counts.get(topic)

    def racks_for_partition(self, topic: str, partition: int) -> frozenset[str]:
        """Racks with a replica of the partition; empty when unknown."""
        return self.partition_racks.get(topic, {}).get(partition, frozenset())


_NOBODY: Mapping[str, MemberAssignment] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """Every member's subscription and current assignment.

    ``subscriptions`` is keyed by member id (each key must equal its value's ``member_id``);
    ``assignments`` may leave members out (they own nothing) but may not name unknown members.
    ``homogeneous`` is computed: True when every member subscribes to the same topic names (also
    True for an empty group). Build it with :meth:`of` from a list of subscriptions.
    """

    subscriptions: Mapping[str, MemberSubscription]
    assignments: Mapping[str, MemberAssignment] = field(default_factory=lambda: _NOBODY)
    homogeneous: bool = field(init=False)

    def __post_init__(self) -> None:
        for member_id, sub in self.subscriptions.items():
            if member_id != sub.member_id:
                raise ValueError(f"subscription of {sub.member_id!r} filed under {member_id!r}")
        strangers = set(self.assignments) - set(self.subscriptions)
        if strangers:
            raise ValueError(f"assignments of members not in the group: {sorted(strangers)}")
        distinct = {sub.topics for sub in self.subscriptions.values()}
        object.__setattr__(self, "homogeneous", len(distinct) <= 1)

    @classmethod
    def of(
        cls,
        subscriptions: Iterable[MemberSubscription],
        assignments: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
    ) -> GroupSpec:
        subs = {sub.member_id: sub for sub in subscriptions}
        current = {member: MemberAssignment.of(parts) for member, parts in (assignments or {}).items()}
        return cls(MappingProxyType(subs), MappingProxyType(current))

    def member_ids(self) -> list[str]:
        """Member ids in ascending order."""
        return sorted(self.subscriptions)

    def assignment(self, member_id: str) -> MemberAssignment:
        """What the member owns now (empty when not given)."""
        return self.assignments.get(member_id, MemberAssignment())


class ConsumerGroupPartitionAssignor(ABC):
    """A server-side assignor: a name a client can ask for and a pure ``assign``."""

    name: ClassVar[str]

    @abstractmethod
    def assign(self, group: GroupSpec, topics: SubscribedTopicDescriber) -> TargetAssignment:
        """The target assignment of every member of ``group`` given the topics that exist now."""


def _subscribed_existing(group: GroupSpec, topics: SubscribedTopicDescriber) -> dict[str, frozenset[str]]:
    """member id -> the subscribed topics that exist."""
    return {
        member: frozenset(t for t in sub.topics if topics.num_partitions(t) is not None)
        for member, sub in group.subscriptions.items()
    }


def _valid_holdings(
    group: GroupSpec, topics: SubscribedTopicDescriber, subscribed: Mapping[str, frozenset[str]]
) -> dict[str, list[tuple[str, int]]]:
    """member id -> the (topic, partition) it owns and may keep, sorted.

    Dropped: topics it no longer subscribes to or that no longer exist, indexes out of range, and a
    partition already claimed by a member earlier in member-id order (so input claiming one
    partition for two members still yields an exclusive assignment).
    """
    claimed: set[tuple[str, int]] = set()
    held: dict[str, list[tuple[str, int]]] = {}
    for member in group.member_ids():
        keep: list[tuple[str, int]] = []
        for topic, parts in sorted(group.assignment(member).partitions.items()):
            count = topics.num_partitions(topic)
            if count is None or topic not in subscribed[member]:
                continue
            for partition in sorted(parts):
                if 0 <= partition < count and (topic, partition) not in claimed:
                    claimed.add((topic, partition))
                    keep.append((topic, partition))
        held[member] = keep
    return held


def _to_target(members: Iterable[str], owned: Mapping[str, Iterable[tuple[str, int]]]) -> TargetAssignment:
    result: TargetAssignment = {}
    for member in members:
        per_topic: dict[str, set[int]] = {}
        for topic, partition in owned.get(member, ()):
            per_topic.setdefault(topic, set()).add(partition)
        result[member] = {topic: frozenset(parts) for topic, parts in sorted(per_topic.items())}
    return result


class UniformAssignor(ConsumerGroupPartitionAssignor):
    """``uniform``, the default: balanced first, sticky second.

    **Homogeneous group** (all members subscribe to the same topics), P partitions, M members:

    - every member gets ``P // M`` or ``P // M + 1`` partitions, counted over all topics (a member
      may get several partitions of one topic and none of another);
    - the ``P % M`` larger quotas go to the members that currently own the most partitions that are
      still valid, ties to the smaller member id; this maximises the partitions kept;
    - a member keeps its valid partitions up to its quota, the lowest (topic, partition) first;
    - the rest, sorted by (topic, partition), fill the members below quota in member-id order, each
      taking a consecutive run.

    **Heterogeneous group**, in three phases:

    1. every member keeps all its valid partitions;
    2. each partition nobody keeps goes to the subscriber of its topic with the fewest partitions
       in total (ties: smaller member id), topics taken in the order below, partitions ascending;
    3. balancing: for each topic with two or more subscribers, in the order below, partitions move
       one at a time from its subscriber with the most partitions in total that owns some of the
       topic (ties: larger member id; it gives its highest partition of the topic) to its subscriber
       with the fewest (ties: smaller member id) while the two differ by more than one. Passes
       repeat until one moves nothing, at most 16 passes.

    Topic order: partitions per subscriber descending, then subscriber count ascending, then name.
    Every topic ends with its subscribers' totals within one of each other whenever they share the
    same subscriptions; with overlapping, different subscriptions the result is close to that.

    Complexity: homogeneous O(P log P + M log M); heterogeneous O(P log M) for phases 1-2 and
    O(P_t * S_t) per topic and pass for phase 3 (S_t subscribers of a topic with P_t partitions).
    """

    name = "uniform"

    def assign(self, group: GroupSpec, topics: SubscribedTopicDescriber) -> TargetAssignment:
        members = group.member_ids()
        if not members:
            return {}
        subscribed = _subscribed_existing(group, topics)
        held = _valid_holdings(group, topics, subscribed)
        if group.homogeneous:
            owned = self._homogeneous(members, subscribed[members[0]], topics, held)
        else:
            owned = _HeterogeneousBuilder(members, subscribed, topics, held).build()
        return _to_target(members, owned)

    @staticmethod
    def _homogeneous(
        members: list[str],
        subscribed: frozenset[str],
        topics: SubscribedTopicDescriber,
        held: Mapping[str, list[tuple[str, int]]],
    ) -> dict[str, list[tuple[str, int]]]:
        total = sum(topics.num_partitions(t) or 0 for t in subscribed)
        base, extra = divmod(total, len(members))
        by_holding = sorted(members, key=lambda m: (-len(held[m]), m))
        quota = {member: base + (1 if rank < extra else 0) for rank, member in enumerate(by_holding)}
        owned = {member: held[member][: quota[member]] for member in members}
        kept = {tp for parts in owned.values() for tp in parts}
        free = [(t, p) for t in sorted(subscribed) for p in range(topics.num_partitions(t) or 0) if (t, p) not in kept]
        cursor = 0
        for member in members:
            need = quota[member] - len(owned[member])
            if need > 0:
                owned[member] = owned[member] + free[cursor : cursor + need]
                cursor += need
        if cursor != len(free):  # cannot happen: quotas add up to the partition count
            raise AssertionError("uniform assignor left partitions unassigned")
        return owned


class _HeterogeneousBuilder:
    """One run of the heterogeneous uniform algorithm (see :class:`UniformAssignor`)."""

    def __init__(
        self,
        members: list[str],
        subscribed: Mapping[str, frozenset[str]],
        topics: SubscribedTopicDescriber,
        held: Mapping[str, list[tuple[str, int]]],
    ) -> None:
        self.members = members
        self.index = {member: i for i, member in enumerate(members)}
        self.counts = {topic: topics.num_partitions(topic) or 0 for sub in subscribed.values() for topic in sub}
        # topic -> subscriber indexes, ascending
        self.subscribers: dict[str, list[int]] = {topic: [] for topic in self.counts}
        for i, member in enumerate(members):
            for topic in subscribed[member]:
                self.subscribers[topic].append(i)
        self.load = [0] * len(members)
        # topic -> partition -> owner index, -1 when unassigned
        self.owner = {topic: [-1] * count for topic, count in self.counts.items()}
        for member, parts in held.items():
            i = self.index[member]
            for topic, partition in parts:
                self.owner[topic][partition] = i
                self.load[i] += 1

    def _topic_order(self, names: Iterable[str]) -> list[str]:
        def key(topic: str) -> tuple[Fraction, int, str]:
            subs = len(self.subscribers[topic])
            return (-Fraction(self.counts[topic], subs), subs, topic)

        return sorted(names, key=key)

    def build(self) -> dict[str, list[tuple[str, int]]]:
        for topic in self._topic_order(self.counts):
            free = [p for p, o in enumerate(self.owner[topic]) if o == -1]
            if not free:
                continue
            heap = [(self.load[i], i) for i in self.subscribers[topic]]
            heapq.heapify(heap)
            for partition in free:
                load, i = heapq.heappop(heap)
                self.owner[topic][partition] = i
                self.load[i] = load + 1
                heapq.heappush(heap, (load + 1, i))
        movable = self._topic_order(t for t, subs in self.subscribers.items() if len(subs) >= 2)
        for _ in range(_MAX_BALANCE_PASSES):
            if sum(self._balance_topic(topic) for topic in movable) == 0:
                break
        owned: dict[str, list[tuple[str, int]]] = {member: [] for member in self.members}
        for topic in sorted(self.owner):
            for partition, i in enumerate(self.owner[topic]):
                owned[self.members[i]].append((topic, partition))
        return owned

    def _balance_topic(self, topic: str) -> int:
        """Moves partitions of ``topic`` among its subscribers until balanced; returns the moves."""
        subs = self.subscribers[topic]
        load = self.load
        if max(load[i] for i in subs) - min(load[i] for i in subs) <= 1:
            return 0
        owners = self.owner[topic]
        mine: dict[int, list[int]] = {i: [] for i in subs}
        for partition, i in enumerate(owners):
            mine[i].append(partition)
        moves = 0
        while True:
            receiver = min(subs, key=lambda i: (load[i], i))
            givers = [i for i in subs if mine[i]]
            if not givers:
                return moves
            donor = max(givers, key=lambda i: (load[i], i))
            if load[donor] - load[receiver] <= 1:
                return moves
            partition = mine[donor].pop()
            insort(mine[receiver], partition)
            owners[partition] = receiver
            load[donor] -= 1
            load[receiver] += 1
            moves += 1


class RangeAssignor(ConsumerGroupPartitionAssignor):
    """``range``: per topic, contiguous partition ranges over the topic's subscribers.

    Members are ordered once: static members (with an instance id) first, by instance id, then the
    others by member id. For each subscribed topic with P partitions and S subscribers, the
    subscribers in that order get ``P // S`` partitions each and the first ``P % S`` of them one
    more, as consecutive index ranges starting at partition 0: with members a, b and topics of 3
    partitions, a gets 0-1 and b gets 2 of every topic. When all members subscribe to the same
    topics and those have equal partition counts, every member gets the same partition indexes of
    every topic (co-partitioning, for joins).

    The result depends only on the members' order and the subscriptions, never on the current
    assignment: it is as sticky as that order is stable. A static member that restarts keeps its
    instance id and so its place and its ranges; a join or leave shifts the ranges after it.

    Complexity: O(M log M + sum of P over subscribed topics).
    """

    name = "range"

    def assign(self, group: GroupSpec, topics: SubscribedTopicDescriber) -> TargetAssignment:
        subscribed = _subscribed_existing(group, topics)
        ordered = sorted(group.subscriptions.values(), key=_range_order)
        result: TargetAssignment = {member: {} for member in group.member_ids()}
        for topic in sorted({t for sub in subscribed.values() for t in sub}):
            subscribers = [sub.member_id for sub in ordered if topic in subscribed[sub.member_id]]
            count = topics.num_partitions(topic) or 0
            base, extra = divmod(count, len(subscribers))
            start = 0
            for rank, member in enumerate(subscribers):
                size = base + (1 if rank < extra else 0)
                if size:
                    result[member][topic] = frozenset(range(start, start + size))
                start += size
        return {member: dict(sorted(per_topic.items())) for member, per_topic in result.items()}


def _range_order(sub: MemberSubscription) -> tuple[int, str, str]:
    if sub.instance_id is not None:
        return (0, sub.instance_id, sub.member_id)
    return (1, sub.member_id, "")


ASSIGNORS: Mapping[str, ConsumerGroupPartitionAssignor] = MappingProxyType(
    {UniformAssignor.name: UniformAssignor(), RangeAssignor.name: RangeAssignor()}
)
"""Assignor name -> the (stateless, shareable) assignor."""


def assignor_for(name: str | None, default: str = "uniform") -> ConsumerGroupPartitionAssignor:
    """The assignor a member asked for; ``default`` when it named none (None or empty string).

    Raises :class:`UnsupportedAssignorError` when the name (or the default) is not in
    :data:`ASSIGNORS`. Names are case-sensitive, as in Kafka.
    """
    chosen = name or default
    assignor = ASSIGNORS.get(chosen)
    if assignor is None:
        raise UnsupportedAssignorError(chosen, ASSIGNORS)
    return assignor
