"""KIP-848 consumer groups on plain values: joining, the target assignment, revocation before
assignment (never two owners), epochs and fencing, leaving, static members, and the session and
rebalance timers (fired by hand)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.coordinator.group.consumer_group import Assignment, MemberState
from odradek.coordinator.group.consumer_membership import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    TopicFilter,
)
from odradek.coordinator.group.group_config import GroupConfig
from odradek.errors import ErrorCode

TOPICS = {"t": 4, "u": 2}


@dataclass
class FakeTimer:
    delay_ms: int
    fn: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class Timers:
    scheduled: list[FakeTimer] = field(default_factory=list)

    def __call__(self, delay_ms: int, fn: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(delay_ms, fn)
        self.scheduled.append(timer)
        return timer

    def fire(self, delay_ms: int) -> int:
        """Fire every live timer of ``delay_ms``; how many fired."""
        due = [t for t in self.scheduled if not t.cancelled and t.delay_ms == delay_ms]
        for t in due:
            t.cancelled = True
            t.fn()
        return len(due)


CONFIG = ConsumerGroupConfig(session_timeout_ms=45000, heartbeat_interval_ms=5000)


def _membership() -> tuple[ConsumerGroupMembership, Timers]:
    timers = Timers()
    return ConsumerGroupMembership(CONFIG, timers), timers


def _join(
    m: ConsumerGroupMembership, member: str, topics: tuple[str, ...] = ("t",), **kw: object
) -> ConsumerHeartbeatResult:
    req = ConsumerHeartbeat(
        "g",
        member,
        0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=topics,
        owned={},
        **kw,  # type: ignore[arg-type]
    )
    return m.heartbeat(req, TOPICS)


def _beat(
    m: ConsumerGroupMembership, member: str, epoch: int, owned: Assignment | None = None
) -> ConsumerHeartbeatResult:
    return m.heartbeat(ConsumerHeartbeat("g", member, epoch, owned=owned), TOPICS)


def _owners_are_unique(m: ConsumerGroupMembership) -> bool:
    seen: set[tuple[str, int]] = set()
    for member in m.groups["g"].members.values():
        for tp in member.owns():
            if tp in seen:
                return False
            seen.add(tp)
    return True


def test_a_second_member_gets_partitions_only_once_the_first_revoked_them() -> None:
    m, _ = _membership()
    a = _join(m, "a")
    assert (a.error, a.member_epoch, a.assignment) == (ErrorCode.none, 1, {"t": frozenset({0, 1, 2, 3})})
    b = _join(m, "b")
    assert b.member_epoch == 2 and b.assignment == {}  # its partitions are still a's
    assert m.groups["g"].members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert _owners_are_unique(m)
    a = _beat(m, "a", 1, owned={"t": frozenset({0, 1, 2, 3})})
    kept = a.assignment
    assert a.member_epoch == 1 and kept is not None and len(kept["t"]) == 2  # revoke first, same epoch
    assert m.groups["g"].members["a"].state is MemberState.UNREVOKED_PARTITIONS
    b = _beat(m, "b", 2, owned={})
    assert b.assignment is None or b.assignment == {}  # still held by a (revoking)
    assert _owners_are_unique(m)
    a = _beat(m, "a", 1, owned=kept)  # revoked: moves to the new epoch
    assert (a.member_epoch, m.groups["g"].members["a"].state) == (2, MemberState.STABLE)
    b = _beat(m, "b", 2, owned={})
    assert b.assignment is not None and b.assignment["t"] == frozenset({0, 1, 2, 3}) - kept["t"]
    assert m.groups["g"].state == "Stable" and _owners_are_unique(m)


def test_epochs_ahead_or_behind_are_fenced_but_the_previous_epoch_is_accepted() -> None:
    m, _ = _membership()
    _join(m, "a")
    _join(m, "b")
    assert _beat(m, "a", 5).error is ErrorCode.fenced_member_epoch
    a = _beat(m, "a", 1, owned={"t": frozenset({0, 1, 2, 3})})
    _beat(m, "a", 1, owned=a.assignment)  # now at epoch 2, previous 1
    assert m.groups["g"].members["a"].member_epoch == 2
    late = _beat(m, "a", 1, owned=a.assignment)  # a retried heartbeat of the previous epoch
    assert late.error is ErrorCode.none and late.member_epoch == 2
    assert _beat(m, "a", 0 + 1, owned={"t": frozenset({0, 1, 2, 3})}).error is ErrorCode.fenced_member_epoch
    assert _beat(m, "nobody", 3).error is ErrorCode.unknown_member_id


def test_bad_joins_are_refused_with_kafkas_errors() -> None:
    m, _ = _membership()
    no_timeout = m.heartbeat(ConsumerHeartbeat("g", "a", 0, subscribed_topic_names=("t",), owned={}), TOPICS)
    assert no_timeout.error is ErrorCode.invalid_request and "RebalanceTimeoutMs" in (no_timeout.message or "")
    assert _join(m, "").error is ErrorCode.invalid_request  # v1: the client names itself
    assert _join(m, "a", server_assignor="sticky").error is ErrorCode.unsupported_assignor
    owned = m.heartbeat(
        ConsumerHeartbeat(
            "g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), owned={"t": frozenset({1})}
        ),
        TOPICS,
    )
    assert owned.error is ErrorCode.invalid_request
    assert m.groups == {}


def test_leaving_and_expiring_free_the_partitions_for_the_others() -> None:
    m, timers = _membership()
    _join(m, "a", topics=("t", "u"))
    _join(m, "b", topics=("t", "u"))
    left = m.heartbeat(ConsumerHeartbeat("g", "b", -1), TOPICS)
    assert left.member_epoch == -1 and "b" not in m.groups["g"].members
    a = _beat(m, "a", 1, owned={"t": frozenset(range(4)), "u": frozenset(range(2))})
    assert a.member_epoch == 3 and a.assignment is None  # nothing to revoke: straight to epoch 3
    assert m.groups["g"].members["a"].assigned == {"t": frozenset(range(4)), "u": frozenset(range(2))}
    assert timers.fire(CONFIG.session_timeout_ms) == 1  # a's session
    assert m.groups["g"].members == {} and m.groups["g"].state == "Empty"


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    m, timers = _membership()
    _join(m, "a")
    _join(m, "b")
    _beat(m, "a", 1, owned={"t": frozenset(range(4))})  # told to revoke two
    assert m.groups["g"].members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert timers.fire(30000) == 1
    assert "a" not in m.groups["g"].members
    b = _beat(m, "b", 2, owned={})
    assert b.assignment is not None and b.assignment["t"] == frozenset(range(4))


def test_a_static_member_that_comes_back_keeps_its_partitions() -> None:
    m, _ = _membership()
    _join(m, "a", instance_id="i-1")
    epoch = m.groups["g"].group_epoch
    gone = m.heartbeat(ConsumerHeartbeat("g", "a", -2, instance_id="i-1"), TOPICS)
    assert gone.member_epoch == -2
    clash = _join(m, "c", instance_id="i-2")
    assert clash.error is ErrorCode.none
    back = _join(m, "a2", instance_id="i-1")
    assert back.error is ErrorCode.none and back.assignment is not None
    assert "a" not in m.groups["g"].members and "a2" in m.groups["g"].members
    assert m.groups["g"].group_epoch > epoch  # c's join moved it; a2's return did not add a member
    in_use = _join(m, "a3", instance_id="i-1")
    assert in_use.error is ErrorCode.unreleased_instance_id


def test_a_regex_subscription_takes_every_matching_topic_and_follows_new_ones() -> None:
    m, _ = _membership()
    topics = {"orders-eu": 2, "orders-us": 2, "payments": 1, "__consumer_offsets": 3}
    joined = m.heartbeat(
        ConsumerHeartbeat("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex="orders-.*", owned={}), topics
    )
    assert joined.error is ErrorCode.none
    assert joined.assignment == {"orders-eu": frozenset({0, 1}), "orders-us": frozenset({0, 1})}
    epoch = m.groups["g"].group_epoch
    topics["orders-asia"] = 1  # a new matching topic: a new epoch, and its partition
    later = m.heartbeat(ConsumerHeartbeat("g", "a", joined.member_epoch), topics)
    assert m.groups["g"].group_epoch == epoch + 1
    assert later.assignment is not None and later.assignment["orders-asia"] == frozenset({0})
    assert "payments" not in later.assignment and "__consumer_offsets" not in later.assignment
    bad = m.heartbeat(
        ConsumerHeartbeat("g", "b", 0, rebalance_timeout_ms=1, subscribed_topic_regex="orders-(", owned={}), topics
    )
    assert bad.error is ErrorCode.invalid_regular_expression


def test_a_groups_configs_set_its_heartbeat_interval_and_session_timeout() -> None:
    configs = {"slow": GroupConfig(consumer_session_timeout_ms=60000, consumer_heartbeat_interval_ms=12000)}
    timers = Timers()
    m = ConsumerGroupMembership(CONFIG, timers, group_config=lambda g: configs.get(g, GroupConfig()))
    slow = m.heartbeat(
        ConsumerHeartbeat("slow", "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), owned={}), TOPICS
    )
    assert slow.heartbeat_interval_ms == 12000
    assert _join(m, "b").heartbeat_interval_ms == 5000  # group "g": the broker's
    assert sorted(t.delay_ms for t in timers.scheduled if not t.cancelled) == [45000, 60000]
    configs["g"] = GroupConfig(consumer_session_timeout_ms=50000, consumer_heartbeat_interval_ms=7000)
    again = _beat(m, "b", 1)  # read at every heartbeat
    assert again.error is ErrorCode.none and again.heartbeat_interval_ms == 7000
    assert timers.fire(45000) == 0 and timers.fire(50000) == 1  # the session timer restarted with the group's
    assert "b" not in m.groups["g"].members


def test_with_an_authorizer_a_regex_takes_only_the_topics_its_members_principal_may_describe() -> None:
    m, _ = _membership()
    topics = {"orders-eu": 2, "orders-us": 2, "orders-secret": 1}
    visible = {"alice": {"orders-eu", "orders-us"}, "bob": {"orders-eu"}}

    def describable(principal: str) -> TopicFilter:
        return lambda names: {t for t in names if t in visible[principal]}

    def join(member: str, principal: str) -> ConsumerHeartbeatResult:
        req = ConsumerHeartbeat(
            "g", member, 0, rebalance_timeout_ms=1, subscribed_topic_regex="orders-.*", owned={},
            authorized_topics=describable(principal),
        )  # fmt: skip
        return m.heartbeat(req, topics)

    joined = join("a", "alice")
    assert joined.assignment == {"orders-eu": frozenset({0, 1}), "orders-us": frozenset({0, 1})}
    group = m.groups["g"]
    assert group.resolved_regexes == {"orders-.*": frozenset({"orders-eu", "orders-us"})}
    visible["alice"].add("orders-secret")  # an ACL granted: the next heartbeat of its member sees it
    later = m.heartbeat(
        ConsumerHeartbeat("g", "a", joined.member_epoch, authorized_topics=describable("alice")), topics
    )
    assert later.assignment is not None and "orders-secret" in later.assignment
    # a member of another principal with another regex: each regex resolved with its own member's principal
    req = ConsumerHeartbeat(
        "g", "b", 0, rebalance_timeout_ms=1, subscribed_topic_regex="orders-(eu|secret)", owned={},
        authorized_topics=describable("bob"),
    )  # fmt: skip
    b = m.heartbeat(req, topics)
    assert group.resolved_regexes == {
        "orders-.*": frozenset({"orders-eu", "orders-us", "orders-secret"}),
        "orders-(eu|secret)": frozenset({"orders-eu"}),
    }
    version = group.regex_versions["orders-(eu|secret)"]
    again = m.heartbeat(ConsumerHeartbeat("g", "b", b.member_epoch, authorized_topics=describable("bob")), topics)
    assert again.error is ErrorCode.none
    assert group.regex_versions["orders-(eu|secret)"] == version  # unchanged topics: resolved, not rewritten
    m.heartbeat(ConsumerHeartbeat("g", "b", -1), topics)  # it leaves: its regex is forgotten
    assert set(group.resolved_regexes) == {"orders-.*"} and set(group.regex_versions) == {"orders-.*"}
