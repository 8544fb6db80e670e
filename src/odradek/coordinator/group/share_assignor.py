"""The share groups' server-side assignor (KIP-932), as Kafka 4.2's ``SimpleAssignor``.

A share group's members consume a partition *together* (the share-partition hands each record to
one of them), so the assignor does not give each partition one owner as a consumer group's does:

- **Every assignable partition is assigned** (to at least one member) while any member subscribes
  to its topic.
- **Sharing only when needed**: with ``M`` members and ``P`` partitions, a partition goes to
  ``S = ceil(M / P)`` members (so to exactly one while ``M <= P``).
- **Balance**: the ``S * P`` assignments are spread so that member ``i`` (of the members in id
  order) wants ``ceil(S*P*(i+1)/M) - ceil(S*P*i/M)`` of them: counts differ by at most one.
- **Stickiness**: a member keeps what it had (in its subscribed topics, within its wanted count,
  within ``S`` members per partition) before the rest is handed out. Balance wins over stickiness.

Kafka's steps, on one set of partitions: (1) drop from each member's previous assignment what is
no longer assignable to it; (2) trim members holding more than they want; (3) trim partitions
held by more than ``S`` members; (4) walk the partitions once, giving each partition that has fewer
than ``S`` members to the next members (round robin) still below their wanted count and not
holding it already. When every member still wanting more already holds the partition, that
partition stays less shared (Kafka accepts this slight imbalance; it only happens with ``S > 1``).

When every member subscribes to the same topics (*homogeneous*), this runs once over all their
partitions; otherwise (*heterogeneous*) once per topic over the members subscribing to it, so a
member subscribing to two topics takes its share of each. Subscriptions here are topic ids of
topics that exist (Kafka compares subscribed names; a member naming a topic that does not exist
makes Kafka's group heterogeneous, not this one).

Kafka iterates hash sets; this module orders members by id and partitions by (topic id, index),
so the result is a pure function of its arguments. Pure; any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

__all__ = ["SIMPLE_ASSIGNOR", "ShareAssignment", "assign_shares", "desired_counts"]

SIMPLE_ASSIGNOR = "simple"
"""The assignor's name (ShareGroupDescribe's ``assignor_name``)."""

ShareAssignment = dict[uuid.UUID, frozenset[int]]
"""Topic id -> partition indexes."""

K = TypeVar("K", bound=Hashable)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def desired_counts(members: int, partitions: int) -> tuple[int, list[int]]:
    """(members per partition, assignments wanted by each member in order) for ``members``
    sharing ``partitions``; ``(0, [0, ...])`` without partitions."""
    if partitions == 0 or members == 0:
        return 0, [0] * members
    sharing = _ceil_div(members, partitions)
    total = sharing * partitions
    return sharing, [_ceil_div(total * (i + 1), members) - _ceil_div(total * i, members) for i in range(members)]


def _share_out(keys: Sequence[K], members: Sequence[str], current: Mapping[str, Iterable[K]]) -> dict[str, list[K]]:
    """The four steps of the module docstring over ``keys`` (in order) and ``members`` (in order)."""
    sharing, wanted = desired_counts(len(members), len(keys))
    want = dict(zip(members, wanted, strict=True))
    position = {k: i for i, k in enumerate(keys)}
    by_member: dict[str, list[K]] = {}
    for m in members:  # (1) assignable only, (2) at most what the member wants
        kept = sorted((k for k in set(current.get(m, ())) if k in position), key=position.__getitem__)
        by_member[m] = kept[: want[m]]
    holders: dict[K, list[str]] = {k: [] for k in keys}
    for m in members:
        for k in by_member[m]:
            holders[k].append(m)
    for k in keys:  # (3) at most ``sharing`` members per partition: the last ones in id order go
        while len(holders[k]) > sharing:
            by_member[holders[k].pop()].remove(k)
    unfilled = [m for m in members if len(by_member[m]) < want[m]]
    i = 0
    progressed = False
    for k in keys:  # (4)
        if not unfilled:
            break
        need = sharing - len(holders[k])
        while need > 0:
            if i >= len(unfilled):
                if not progressed:
                    break  # every member still wanting more holds ``k`` already
                i, progressed = 0, False
                continue
            m = unfilled[i]
            if m in holders[k]:
                i += 1
                continue
            holders[k].append(m)
            by_member[m].append(k)
            need -= 1
            progressed = True
            if len(by_member[m]) >= want[m]:
                unfilled.pop(i)
            else:
                i += 1
    return by_member


def assign_shares(
    subscriptions: Mapping[str, Iterable[uuid.UUID]],
    assignable: Mapping[uuid.UUID, Iterable[int]],
    current: Mapping[str, Mapping[uuid.UUID, Iterable[int]]],
) -> dict[str, ShareAssignment]:
    """Member -> topic id -> partitions. ``subscriptions``: each member's subscribed topic ids
    (of topics that exist); ``assignable``: each topic's partitions that may be assigned (a topic
    missing here has none); ``current``: each member's previous target (stickiness). Every member
    of ``subscriptions`` is in the result (an empty assignment when it gets nothing)."""
    members = sorted(subscriptions)
    subs = {m: frozenset(subscriptions[m]) for m in members}
    previous = {m: [(t, p) for t, ps in current.get(m, {}).items() if t in subs[m] for p in ps] for m in members}
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}

    def add(shares: Mapping[str, list[tuple[uuid.UUID, int]]]) -> None:
        for m, keys in shares.items():
            for t, p in keys:
                result[m].setdefault(t, set()).add(p)

    def partitions_of(topics: Iterable[uuid.UUID]) -> list[tuple[uuid.UUID, int]]:
        return [(t, p) for t in sorted(topics) for p in sorted(set(assignable.get(t, ())))]

    if members and len(set(subs.values())) == 1:  # homogeneous
        add(_share_out(partitions_of(subs[members[0]]), members, previous))
    else:
        for topic in sorted({t for s in subs.values() for t in s}):
            subscribers = [m for m in members if topic in subs[m]]
            keys = partitions_of((topic,))
            add(_share_out(keys, subscribers, {m: [k for k in previous[m] if k[0] == topic] for m in subscribers}))
    return {m: {t: frozenset(ps) for t, ps in sorted(a.items()) if ps} for m, a in result.items()}
