"""The share groups' ``simple`` assignor (Kafka's SimpleAssignor): every assignable partition
assigned, counts balanced, a partition shared only when there are more members than partitions,
stickiness, per-topic balance when subscriptions differ, and a pure, order-free result."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.group.share_assignor import ShareAssignment, assign_shares, desired_counts

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))
TOPICS = (T1, T2, T3)


def _count(a: ShareAssignment) -> int:
    return sum(len(ps) for ps in a.values())


def _holders(result: dict[str, ShareAssignment]) -> dict[tuple[uuid.UUID, int], list[str]]:
    out: dict[tuple[uuid.UUID, int], list[str]] = {}
    for member, a in result.items():
        for t, ps in a.items():
            for p in ps:
                out.setdefault((t, p), []).append(member)
    return out


def test_the_desired_counts_spread_the_shared_partitions() -> None:
    assert desired_counts(3, 2) == (2, [2, 1, 1])  # each partition twice, 4 assignments over 3 members
    assert desired_counts(2, 5) == (1, [3, 2])
    assert desired_counts(4, 4) == (1, [1, 1, 1, 1])
    assert desired_counts(3, 0) == (0, [0, 0, 0])


def test_fewer_members_than_partitions_split_them_without_sharing() -> None:
    result = assign_shares({"a": [T1], "b": [T1]}, {T1: range(4)}, {})
    assert result == {"a": {T1: frozenset({0, 2})}, "b": {T1: frozenset({1, 3})}}  # handed out round robin


def test_more_members_than_partitions_share_each_partition() -> None:
    result = assign_shares({m: [T1] for m in "abc"}, {T1: range(2)}, {})
    assert sorted(len(h) for h in _holders(result).values()) == [2, 2]
    assert sorted(_count(a) for a in result.values()) == [1, 1, 2]


def test_a_member_keeps_what_it_had_when_another_joins() -> None:
    first = assign_shares({"a": [T1], "b": [T1]}, {T1: range(6)}, {})
    second = assign_shares({m: [T1] for m in "abc"}, {T1: range(6)}, first)
    assert all(second[m][T1] <= first[m][T1] for m in "ab")
    assert [_count(second[m]) for m in "abc"] == [2, 2, 2]


def test_only_assignable_partitions_and_subscribed_topics_are_given() -> None:
    result = assign_shares({"a": [T1, T2]}, {T1: {1, 3}}, {"a": {T1: frozenset({0, 1}), T3: frozenset({0})}})
    assert result == {"a": {T1: frozenset({1, 3})}}
    assert assign_shares({"a": []}, {T1: range(3)}, {}) == {"a": {}}
    assert assign_shares({}, {T1: range(3)}, {}) == {}


def test_different_subscriptions_balance_each_topic_among_its_subscribers() -> None:
    result = assign_shares({"a": [T1], "b": [T2], "c": [T1, T2]}, {T1: range(4), T2: range(2)}, {})
    assert set(result["a"]) == {T1} and set(result["b"]) == {T2}
    assert len(result["a"][T1]) == len(result["c"][T1]) == 2
    assert len(result["b"][T2]) == len(result["c"][T2]) == 1


# --- properties -------------------------------------------------------------------------------------

members_st = st.lists(st.sampled_from([f"m{i:02d}" for i in range(12)]), min_size=1, max_size=12, unique=True)
counts_st = st.lists(st.integers(0, 7), min_size=1, max_size=3)
previous_st = st.dictionaries(
    st.sampled_from([f"m{i:02d}" for i in range(12)]),
    st.dictionaries(st.sampled_from(TOPICS), st.frozensets(st.integers(0, 9), max_size=6), max_size=3),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(members_st, counts_st, previous_st)
def test_homogeneous_assignments_cover_balance_and_share_only_when_needed(
    members: list[str], counts: list[int], previous: dict[str, ShareAssignment]
) -> None:
    topics = TOPICS[: len(counts)]
    assignable = {t: range(n) for t, n in zip(topics, counts, strict=False)}
    result = assign_shares({m: topics for m in members}, assignable, previous)
    partitions = {(t, p) for t, n in zip(topics, counts, strict=False) for p in range(n)}
    holders = _holders(result)
    assert set(result) == set(members)
    assert set(holders) == partitions  # every assignable partition, nothing else
    if partitions:
        sizes = [_count(a) for a in result.values()]
        assert max(sizes) - min(sizes) <= 1
        sharing = -(-len(members) // len(partitions))
        assert all(len(h) <= sharing for h in holders.values())
        if len(members) <= len(partitions):
            assert all(len(h) == 1 for h in holders.values())  # shared only when members > partitions
    # deterministic, whatever the order the mappings come in
    again = assign_shares({m: topics for m in reversed(members)}, dict(reversed(assignable.items())), previous)
    assert again == result


@settings(max_examples=200, deadline=None)
@given(members_st, st.integers(1, 12), st.data())
def test_reassignment_keeps_what_still_fits(members: list[str], partitions: int, data: st.DataObject) -> None:
    before = assign_shares({m: [T1] for m in members}, {T1: range(partitions)}, {})
    stay = data.draw(st.lists(st.sampled_from(members), min_size=1, unique=True))
    after = assign_shares({m: [T1] for m in stay}, {T1: range(partitions)}, before)
    if len(members) <= partitions:  # no sharing before: a member keeps min(what it had, what it wants)
        _, wanted = desired_counts(len(stay), partitions)
        for m, want in zip(sorted(stay), wanted, strict=True):
            kept = before[m].get(T1, frozenset()) & after[m].get(T1, frozenset())
            assert len(kept) == min(len(before[m].get(T1, frozenset())), want)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), st.sets(st.sampled_from(TOPICS)), min_size=1))
def test_heterogeneous_assignments_cover_and_balance_each_topic(subscriptions: dict[str, set[uuid.UUID]]) -> None:
    assignable = {T1: range(5), T2: range(2), T3: range(1)}
    result = assign_shares(subscriptions, assignable, {})
    for topic, count in ((T1, 5), (T2, 2), (T3, 1)):
        subscribers = [m for m, s in subscriptions.items() if topic in s]
        for m in set(subscriptions) - set(subscribers):
            assert topic not in result[m]
        if not subscribers:
            continue
        held = [len(result[m].get(topic, frozenset())) for m in subscribers]
        assert set().union(*(result[m].get(topic, frozenset()) for m in subscribers)) == set(range(count))
        assert max(held) - min(held) <= 1
