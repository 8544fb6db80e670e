"""The consumer group protocol's server assignors: ``uniform`` and ``range``.

Property checks run as seeded random loops (a few hundred groups each) so that a failure replays.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from odradek.coordinator.group.consumer_assignors import (
    ASSIGNORS,
    GroupSpec,
    MemberSubscription,
    RangeAssignor,
    SubscribedTopicDescriber,
    TargetAssignment,
    UniformAssignor,
    UnsupportedAssignorError,
    assignor_for,
)
from odradek.errors import ErrorCode

UNIFORM = UniformAssignor()
RANGE = RangeAssignor()
CASES = 300

Current = dict[str, dict[str, set[int]]]


def sub(member: str, *topics: str, instance: str | None = None) -> MemberSubscription:
    return MemberSubscription(member, frozenset(topics), instance_id=instance)


def describer(**counts: int) -> SubscribedTopicDescriber:
    return SubscribedTopicDescriber(counts)


def random_case(rng: random.Random) -> tuple[GroupSpec, SubscribedTopicDescriber]:
    """A random group: up to 8 members, up to 5 topics of 0-12 partitions, a messy current
    assignment (stale topics, out-of-range indexes, partitions claimed twice)."""
    counts = {f"t{i}": rng.randint(0, 12) for i in range(rng.randint(1, 5))}
    names = [*counts, "gone"]
    members = [f"m{i:02d}" for i in rng.sample(range(40), rng.randint(0, 8))]
    common = frozenset(rng.sample(names, rng.randint(1, len(names))))
    homogeneous = rng.random() < 0.5
    subs = []
    for member in members:
        topics = common if homogeneous else frozenset(rng.sample(names, rng.randint(0, len(names))))
        subs.append(MemberSubscription(member, topics))
    current: Current = {}
    for member in members:
        if rng.random() < 0.7:
            for topic in rng.sample(names, rng.randint(0, len(names))):
                current.setdefault(member, {})[topic] = {rng.randint(0, 13) for _ in range(rng.randint(0, 6))}
    return GroupSpec.of(subs, current), SubscribedTopicDescriber(counts)


def respin(group: GroupSpec, result: TargetAssignment, subs: list[MemberSubscription]) -> GroupSpec:
    """The next round's spec: ``subs`` as members, each owning what ``result`` gave it."""
    owned = {s.member_id: dict(result.get(s.member_id, {})) for s in subs}
    return GroupSpec.of(subs, owned)


def loads(result: TargetAssignment) -> dict[str, int]:
    return {member: sum(len(p) for p in topics.values()) for member, topics in result.items()}


def check_valid(group: GroupSpec, topics: SubscribedTopicDescriber, result: TargetAssignment) -> None:
    assert sorted(result) == group.member_ids()
    owners: dict[tuple[str, int], str] = {}
    for member, per_topic in result.items():
        for topic, parts in per_topic.items():
            assert parts, "no empty partition sets"
            assert topic in group.subscriptions[member].topics
            count = topics.num_partitions(topic)
            assert count is not None
            for partition in parts:
                assert 0 <= partition < count
                assert (topic, partition) not in owners, "a partition has two owners"
                owners[(topic, partition)] = member
    wanted = {t for s in group.subscriptions.values() for t in s.topics if topics.num_partitions(t) is not None}
    expected = {(t, p) for t in wanted for p in range(topics.num_partitions(t) or 0)}
    assert set(owners) == expected


# ---------------------------------------------------------------- shared properties


@pytest.mark.parametrize("assignor", [UNIFORM, RANGE], ids=["uniform", "range"])
def test_random_groups_are_valid_and_deterministic(assignor: UniformAssignor | RangeAssignor) -> None:
    rng = random.Random(848)
    for _ in range(CASES):
        group, topics = random_case(rng)
        result = assignor.assign(group, topics)
        check_valid(group, topics, result)
        # Same content, other insertion orders: same answer.
        subs = list(group.subscriptions.values())
        rng.shuffle(subs)
        current = {
            m: {t: list(p)[::-1] for t, p in reversed(a.partitions.items())} for m, a in group.assignments.items()
        }
        shuffled_current = dict(reversed(list(current.items())))
        counts = dict(reversed(list(topics.partition_counts.items())))
        again = assignor.assign(GroupSpec.of(subs, shuffled_current), SubscribedTopicDescriber(counts))
        assert again == result


def test_empty_group_gets_nothing() -> None:
    for assignor in ASSIGNORS.values():
        assert assignor.assign(GroupSpec.of([]), describer(a=3)) == {}


def test_members_without_existing_topics_get_empty_assignments() -> None:
    group = GroupSpec.of([sub("a", "missing"), sub("b")], {"a": {"missing": {0, 1}}})
    for assignor in ASSIGNORS.values():
        assert assignor.assign(group, describer(other=4)) == {"a": {}, "b": {}}


def test_deleted_topic_is_dropped_from_assignments() -> None:
    group = GroupSpec.of(
        [sub("a", "keep", "gone"), sub("b", "keep", "gone")],
        {"a": {"keep": {0}, "gone": {0, 1}}, "b": {"keep": {1}, "gone": {2}}},
    )
    topics = describer(keep=2)
    for assignor in ASSIGNORS.values():
        result = assignor.assign(group, topics)
        check_valid(group, topics, result)
        assert all("gone" not in per_topic for per_topic in result.values())
    assert UNIFORM.assign(group, topics) == {"a": {"keep": frozenset({0})}, "b": {"keep": frozenset({1})}}


def test_more_members_than_partitions() -> None:
    members = [sub(f"m{i}", "t") for i in range(5)]
    topics = describer(t=3)
    for assignor in ASSIGNORS.values():
        result = assignor.assign(GroupSpec.of(members), topics)
        check_valid(GroupSpec.of(members), topics, result)
        assert sorted(loads(result).values()) == [0, 0, 1, 1, 1]
    assert RANGE.assign(GroupSpec.of(members), topics) == {
        "m0": {"t": frozenset({0})},
        "m1": {"t": frozenset({1})},
        "m2": {"t": frozenset({2})},
        "m3": {},
        "m4": {},
    }


def test_assignor_registry() -> None:
    assert set(ASSIGNORS) == {"uniform", "range"}
    assert assignor_for(None) is ASSIGNORS["uniform"]
    assert assignor_for("") is ASSIGNORS["uniform"]
    assert assignor_for(None, default="range") is ASSIGNORS["range"]
    assert assignor_for("range").name == "range"
    with pytest.raises(UnsupportedAssignorError) as caught:
        assignor_for("cooperative-sticky")
    assert caught.value.error_code == ErrorCode.unsupported_assignor
    assert caught.value.name == "cooperative-sticky"
    assert caught.value.available == ("range", "uniform")
    with pytest.raises(UnsupportedAssignorError):
        assignor_for(None, default="Uniform")


def test_group_spec_validates_and_computes_homogeneity() -> None:
    assert GroupSpec.of([sub("a", "x", "y"), sub("b", "y", "x")]).homogeneous
    assert not GroupSpec.of([sub("a", "x"), sub("b", "y")]).homogeneous
    assert GroupSpec.of([]).homogeneous
    with pytest.raises(ValueError):
        GroupSpec({"a": sub("b", "x")})
    with pytest.raises(ValueError):
        GroupSpec.of([sub("a", "x")], {"z": {"x": {0}}})
    with pytest.raises(ValueError):
        SubscribedTopicDescriber({"x": -1})


# ---------------------------------------------------------------- uniform


def test_uniform_homogeneous_is_balanced() -> None:
    rng = random.Random(1)
    checked = 0
    while checked < CASES:
        group, topics = random_case(rng)
        if not group.homogeneous or not group.subscriptions:
            continue
        checked += 1
        sizes = loads(UNIFORM.assign(group, topics)).values()
        assert max(sizes) - min(sizes) <= 1


def test_uniform_heterogeneous_balances_each_topics_subscribers() -> None:
    rng = random.Random(2)
    checked = 0
    while checked < CASES:
        group, topics = random_case(rng)
        if group.homogeneous:
            continue
        checked += 1
        result = UNIFORM.assign(group, topics)
        size = loads(result)
        for topic, count in topics.partition_counts.items():
            subscribers = [m for m, s in group.subscriptions.items() if topic in s.topics]
            if len(subscribers) < 2 or count == 0:
                continue
            givers = [m for m in subscribers if result[m].get(topic)]
            # No partition of the topic could move to a subscriber two or more below its owner.
            assert max(size[m] for m in givers) - min(size[m] for m in subscribers) <= 1
            same = {group.subscriptions[m].topics for m in subscribers}
            if len(same) == 1:
                assert max(size[m] for m in subscribers) - min(size[m] for m in subscribers) <= 1


def test_uniform_fresh_homogeneous_group_in_member_order() -> None:
    group = GroupSpec.of([sub("b", "x", "y"), sub("a", "x", "y"), sub("c", "x", "y")])
    result = UNIFORM.assign(group, describer(x=4, y=3))
    assert result == {
        "a": {"x": frozenset({0, 1, 2})},
        "b": {"x": frozenset({3}), "y": frozenset({0})},
        "c": {"y": frozenset({1, 2})},
    }


def test_uniform_output_is_a_fixed_point() -> None:
    rng = random.Random(3)
    for _ in range(CASES):
        group, topics = random_case(rng)
        first = UNIFORM.assign(group, topics)
        subs = list(group.subscriptions.values())
        assert UNIFORM.assign(respin(group, first, subs), topics) == first


def test_uniform_homogeneous_join_and_leave_move_the_fewest_partitions() -> None:
    rng = random.Random(4)
    for _ in range(CASES):
        counts = {f"t{i}": rng.randint(0, 10) for i in range(rng.randint(1, 4))}
        topics = SubscribedTopicDescriber(counts)
        names = frozenset(counts)
        members = [MemberSubscription(f"m{i}", names) for i in range(rng.randint(1, 7))]
        before = UNIFORM.assign(GroupSpec.of(members), topics)
        after_members = list(members)
        if rng.random() < 0.5 or len(members) == 1:
            after_members.append(MemberSubscription("new", names))
        else:
            after_members.remove(rng.choice(members))
        after = UNIFORM.assign(respin(GroupSpec.of(members), before, after_members), topics)
        total = sum(counts.values())
        base, extra = divmod(total, len(after_members))
        old_sizes = sorted((loads(before).get(s.member_id, 0) for s in after_members), reverse=True)
        best_kept = sum(min(size, base + (1 if i < extra else 0)) for i, size in enumerate(old_sizes))
        kept = 0
        for s in after_members:
            old = {(t, p) for t, ps in before.get(s.member_id, {}).items() for p in ps}
            new = {(t, p) for t, ps in after[s.member_id].items() for p in ps}
            # A survivor keeps all it can: a partition only leaves a member that shrinks.
            assert len(old & new) == min(len(old), len(new))
            kept += len(old & new)
        assert kept == best_kept


def test_uniform_heterogeneous_leave_keeps_survivors_partitions() -> None:
    # x is shared by a, b, c; y only by c. y goes first (same partitions per subscriber, fewer
    # subscribers), so c gets fewer x. When b leaves, its x partitions go to a and c; nothing a or c
    # owned moves.
    topics = describer(x=6, y=2)
    members = [sub("a", "x"), sub("b", "x"), sub("c", "x", "y")]
    before = UNIFORM.assign(GroupSpec.of(members), topics)
    assert loads(before) == {"a": 3, "b": 3, "c": 2}
    assert before["c"] == {"y": frozenset({0, 1})}
    after = UNIFORM.assign(respin(GroupSpec.of(members), before, [members[0], members[2]]), topics)
    for member in ("a", "c"):
        for topic, parts in before[member].items():
            assert parts <= after[member][topic]
    assert loads(after) == {"a": 4, "c": 4}


def test_uniform_heterogeneous_topic_order_and_balancing() -> None:
    # big: 8 partitions over a, b; small: 2 partitions only for c; mixed: 3 over all three.
    group = GroupSpec.of([sub("a", "big", "mixed"), sub("b", "big", "mixed"), sub("c", "small", "mixed")])
    topics = describer(big=8, small=2, mixed=3)
    result = UNIFORM.assign(group, topics)
    check_valid(group, topics, result)
    # Order big (4 per subscriber), small (2), mixed (1): big alternates over a and b, small goes to
    # c, then mixed to the least loaded: c, c, then a (ties to the smaller member id).
    assert result == {
        "a": {"big": frozenset({0, 2, 4, 6}), "mixed": frozenset({2})},
        "b": {"big": frozenset({1, 3, 5, 7})},
        "c": {"mixed": frozenset({0, 1}), "small": frozenset({0, 1})},
    }


def test_uniform_revokes_unsubscribed_and_duplicate_claims() -> None:
    group = GroupSpec.of(
        [sub("a", "x"), sub("b", "x", "y")],
        {"a": {"x": {0, 1}, "y": {0}}, "b": {"x": {1, 7}, "y": {1}}},
    )
    topics = describer(x=2, y=2)
    result = UNIFORM.assign(group, topics)
    check_valid(group, topics, result)
    assert result["a"] == {"x": frozenset({0, 1})}
    assert result["b"] == {"y": frozenset({0, 1})}


# ---------------------------------------------------------------- range


def test_range_kafka_example_two_members_three_topics() -> None:
    group = GroupSpec.of([sub("m1", "t1", "t2", "t3"), sub("m0", "t1", "t2", "t3")])
    result = RANGE.assign(group, describer(t1=3, t2=3, t3=3))
    first, last = frozenset({0, 1}), frozenset({2})
    assert result == {"m0": {"t1": first, "t2": first, "t3": first}, "m1": {"t1": last, "t2": last, "t3": last}}


def test_range_fresh_groups_get_contiguous_ranges_in_member_order() -> None:
    rng = random.Random(5)
    for _ in range(CASES):
        group, topics = random_case(rng)
        result = RANGE.assign(group, topics)
        for topic, count in topics.partition_counts.items():
            subscribers = sorted(m for m, s in group.subscriptions.items() if topic in s.topics)
            if not subscribers:
                continue
            base, extra = divmod(count, len(subscribers))
            start = 0
            for rank, member in enumerate(subscribers):
                size = base + (1 if rank < extra else 0)
                assert result[member].get(topic, frozenset()) == frozenset(range(start, start + size))
                start += size


def test_range_ignores_current_assignment_and_orders_static_members_first() -> None:
    topics = describer(t=5)
    group = GroupSpec.of(
        [sub("a", "t"), sub("z", "t", instance="i2"), sub("y", "t", instance="i1")],
        {"a": {"t": {0, 1}}},
    )
    assert RANGE.assign(group, topics) == {
        "y": {"t": frozenset({0, 1})},
        "z": {"t": frozenset({2, 3})},
        "a": {"t": frozenset({4})},
    }
    # A static member rejoining under a new member id keeps its ranges.
    rejoined = GroupSpec.of([sub("a", "t"), sub("b", "t", instance="i2"), sub("y", "t", instance="i1")])
    assert RANGE.assign(rejoined, topics)["b"] == {"t": frozenset({2, 3})}


def test_range_heterogeneous_splits_each_topic_over_its_subscribers() -> None:
    group = GroupSpec.of([sub("a", "x", "y"), sub("b", "y"), sub("c", "x", "y")])
    result = RANGE.assign(group, describer(x=3, y=4))
    assert result == {
        "a": {"x": frozenset({0, 1}), "y": frozenset({0, 1})},
        "b": {"y": frozenset({2})},
        "c": {"x": frozenset({2}), "y": frozenset({3})},
    }


def test_results_are_fresh_dicts() -> None:
    group = GroupSpec.of([sub("a", "x")])
    for assignor in ASSIGNORS.values():
        result: Mapping[str, Mapping[str, frozenset[int]]] = assignor.assign(group, describer(x=1))
        assert isinstance(result, dict) and isinstance(result["a"], dict)


def test_uniform_heterogeneous_balancing_moves_highest_partitions_of_the_most_loaded() -> None:
    group = GroupSpec.of([sub("a", "x"), sub("b", "x", "y")], {"a": {"x": set(range(6))}})
    result = UNIFORM.assign(group, describer(x=6, y=1))
    assert result == {"a": {"x": frozenset({0, 1, 2, 3})}, "b": {"x": frozenset({4, 5}), "y": frozenset({0})}}
