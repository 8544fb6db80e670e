"""Share groups (KIP-932) on plain values: joining, the target assignment taken at once (no
revocation), sharing partitions, request checks, epochs and fencing, leaving, the group size
limit, session expiry (timers fired by hand), the member-removed hook, and assignments held back
until share-partition state is initialized."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from odradek.coordinator.group.share_group import InitTopic, ShareTopic
from odradek.coordinator.group.share_membership import (
    ShareGroupConfig,
    ShareGroupMembership,
    ShareHeartbeat,
    ShareHeartbeatResult,
)
from odradek.errors import ErrorCode

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
TOPICS = {"t": ShareTopic(T, 4), "u": ShareTopic(U, 2)}
CONFIG = ShareGroupConfig(session_timeout_ms=45000, heartbeat_interval_ms=5000, max_size=3)


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
        due = [t for t in self.scheduled if not t.cancelled and t.delay_ms == delay_ms]
        for t in due:
            t.cancelled = True
            t.fn()
        return len(due)


@dataclass
class Harness:
    membership: ShareGroupMembership
    timers: Timers
    removed: list[tuple[str, str]]
    changed: list[str]


def _harness(gated: bool = False, config: ShareGroupConfig = CONFIG) -> Harness:
    timers = Timers()
    removed: list[tuple[str, str]] = []
    changed: list[str] = []
    membership = ShareGroupMembership(config, timers, changed.append, lambda g, m: removed.append((g, m)), gated=gated)
    return Harness(membership, timers, removed, changed)


def _join(
    h: Harness, member: str, topics: tuple[str, ...] = ("t",), metadata: dict[str, ShareTopic] = TOPICS
) -> ShareHeartbeatResult:
    req = ShareHeartbeat("g", member, 0, subscribed_topic_names=topics, client_id="c", client_host="/h")
    return h.membership.heartbeat(req, metadata)


def _beat(
    h: Harness, member: str, epoch: int, metadata: dict[str, ShareTopic] = TOPICS, **kw: object
) -> ShareHeartbeatResult:
    return h.membership.heartbeat(ShareHeartbeat("g", member, epoch, **kw), metadata)  # type: ignore[arg-type]


def test_a_first_member_gets_every_partition_at_epoch_one() -> None:
    h = _harness()
    joined = _join(h, "m1")
    assert joined.error is ErrorCode.none
    assert (joined.member_id, joined.member_epoch, joined.heartbeat_interval_ms) == ("m1", 1, 5000)
    assert joined.assignment == {T: frozenset(range(4))}
    group = h.membership.group("g")
    assert group is not None and group.state == "Stable" and group.group_epoch == group.assignment_epoch == 1
    steady = _beat(h, "m1", 1)
    assert steady.member_epoch == 1 and steady.assignment is None  # nothing changed, nothing sent


def test_a_second_member_splits_the_partitions_and_the_first_takes_its_share_at_once() -> None:
    h = _harness()
    _join(h, "m1")
    second = _join(h, "m2")
    assert second.member_epoch == 2 and second.assignment is not None and len(second.assignment[T]) == 2
    first = _beat(h, "m1", 1)  # no revocation step: the new target is its assignment now
    assert first.member_epoch == 2 and first.assignment is not None
    assert first.assignment[T] | second.assignment[T] == frozenset(range(4))
    assert not first.assignment[T] & second.assignment[T]


def test_more_members_than_partitions_share_them() -> None:
    h = _harness(config=ShareGroupConfig(max_size=10))
    results = [_join(h, f"m{i}", ("u",)) for i in range(3)]
    group = h.membership.group("g")
    assert group is not None and results[-1].member_epoch == 3
    for mid in ("m0", "m1"):
        _beat(h, mid, group.members[mid].member_epoch)
    held = [group.members[m].assigned.get(U, frozenset()) for m in ("m0", "m1", "m2")]
    assert sorted(len(p) for p in held) == [1, 1, 2]
    assert all(sum(p in ps for ps in held) == 2 for p in (0, 1))  # each partition shared by two


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (ShareHeartbeat("g", "", 0, subscribed_topic_names=("t",)), "MemberId can't be empty."),
        (ShareHeartbeat("", "m", 0, subscribed_topic_names=("t",)), "GroupId can't be empty."),
        (ShareHeartbeat("g", "m", 0, rack_id=" ", subscribed_topic_names=("t",)), "RackId can't be empty."),
        (ShareHeartbeat("g", "m", 0), "SubscribedTopicNames must be set in first request."),
        (ShareHeartbeat("g", "m", 0, subscribed_topic_names=()), "SubscribedTopicNames must be set in first request."),
        (ShareHeartbeat("g", "m", -2), "MemberEpoch is invalid."),
    ],
)
def test_malformed_heartbeats_are_invalid_requests(req: ShareHeartbeat, message: str) -> None:
    result = _harness().membership.heartbeat(req, TOPICS)
    assert (result.error, result.message) == (ErrorCode.invalid_request, message)


def test_unknown_groups_members_and_wrong_epochs_are_refused() -> None:
    h = _harness()
    assert _beat(h, "m1", 3).error is ErrorCode.group_id_not_found
    assert _beat(h, "m1", -1).error is ErrorCode.group_id_not_found
    _join(h, "m1")
    assert _beat(h, "ghost", 1).error is ErrorCode.unknown_member_id
    assert _beat(h, "ghost", -1).error is ErrorCode.unknown_member_id
    assert _beat(h, "m1", 2).error is ErrorCode.fenced_member_epoch  # ahead of its epoch
    _join(h, "m2")
    assert _beat(h, "m1", 1).member_epoch == 2  # moved to epoch 2, previous 1
    assert _beat(h, "m1", 1).error is ErrorCode.none  # the previous epoch: the answer may have been lost
    assert _join(h, "m1").error is ErrorCode.fenced_member_epoch  # epoch 0 is not its previous epoch either
    assert _join(h, "m2").error is ErrorCode.none  # a repeated first join (previous epoch 0) passes


def test_a_full_group_refuses_new_members_but_not_its_own() -> None:
    h = _harness()
    for m in ("m1", "m2", "m3"):
        _join(h, m)
    full = _join(h, "m4")
    assert full.error is ErrorCode.group_max_size_reached and "3 members" in (full.message or "")
    assert _beat(h, "m1", 1).error is ErrorCode.none


def test_leaving_bumps_the_epoch_and_tells_the_hook() -> None:
    h = _harness()
    _join(h, "m1")
    _join(h, "m2")
    assert _beat(h, "m1", 1).member_epoch == 2  # it holds half now
    left = _beat(h, "m2", -1)
    assert (left.error, left.member_id, left.member_epoch) == (ErrorCode.none, "m2", -1)
    assert h.removed == [("g", "m2")]
    back = _beat(h, "m1", 2)
    assert back.member_epoch == 3 and back.assignment == {T: frozenset(range(4))}
    _beat(h, "m1", -1)
    group = h.membership.group("g")
    assert group is not None and group.state == "Empty" and group.group_epoch == 4  # the group stays


def test_a_member_without_heartbeats_expires() -> None:
    h = _harness()
    _join(h, "m1")
    _join(h, "m2")
    _beat(h, "m1", 1)  # reschedules m1's session; the old timer is cancelled
    assert h.timers.fire(45000) == 2
    assert sorted(h.removed) == [("g", "m1"), ("g", "m2")] and h.changed == ["g", "g"]
    assert _beat(h, "m1", 2).error is ErrorCode.unknown_member_id


def test_metadata_and_subscription_changes_bump_the_epoch() -> None:
    h = _harness()
    _join(h, "m1")
    grown = {**TOPICS, "t": ShareTopic(T, 6)}
    more = _beat(h, "m1", 1, grown)
    assert more.member_epoch == 2 and more.assignment == {T: frozenset(range(6))}
    switched = _beat(h, "m1", 2, grown, subscribed_topic_names=("u", "u"))
    assert switched.member_epoch == 3 and switched.assignment == {U: frozenset({0, 1})}
    full = _beat(h, "m1", 3, grown, subscribed_topic_names=("u",))  # a full request gets the assignment
    assert full.member_epoch == 3 and full.assignment == {U: frozenset({0, 1})}
    recreated = {**grown, "u": ShareTopic(uuid.UUID(int=9), 2)}  # deleted and created again: a new id
    again = _beat(h, "m1", 3, recreated)
    assert again.member_epoch == 4 and again.assignment == {uuid.UUID(int=9): frozenset({0, 1})}
    assert _beat(h, "m1", 4, recreated, subscribed_topic_names=("absent",)).assignment == {}


def test_gated_groups_assign_only_initialized_partitions() -> None:
    h = _harness(gated=True)
    joined = _join(h, "m1")
    assert joined.member_epoch == 1 and joined.assignment == {}
    group = h.membership.group("g")
    assert group is not None
    missing = group.uninitialized(TOPICS, now_ms=1000, retry_ms=30000)
    assert missing == {T: InitTopic("t", frozenset(range(4)), 1000)}
    group.mark_initializing(missing)
    assert group.uninitialized(TOPICS, now_ms=2000, retry_ms=30000) == {}  # being initialized
    assert group.uninitialized(TOPICS, now_ms=31000, retry_ms=30000)[T].partitions == frozenset(range(4))  # retry
    group.mark_initialized({T: InitTopic("t", frozenset({0, 1}))})
    assert group.initializing[T].partitions == frozenset({2, 3})
    partly = _beat(h, "m1", 1)
    assert partly.member_epoch == 2 and partly.assignment == {T: frozenset({0, 1})}
    assert _beat(h, "m1", 2).member_epoch == 2  # nothing newly initialized: no new epoch
    group.unmark_initializing({T: frozenset({2, 3})})
    assert not group.initializing
    group.mark_initialized({T: InitTopic("t", frozenset({2, 3}))})
    assert _beat(h, "m1", 2).assignment == {T: frozenset(range(4))}


def test_the_config_reads_kafkas_keys_with_defaults_and_checks_them() -> None:
    assert ShareGroupConfig.from_broker({}) == ShareGroupConfig()
    custom = ShareGroupConfig.from_broker(
        {"group.share.heartbeat.interval.ms": 300, "group.share.min.heartbeat.interval.ms": 100}
    )
    assert custom.heartbeat_interval_ms == 300 and custom.session_timeout_ms == 45000 and custom.max_size == 200
    with pytest.raises(ValueError, match=r"group\.share\.session\.timeout\.ms"):
        ShareGroupConfig.from_broker({"group.share.session.timeout.ms": 1000})
    with pytest.raises(ValueError, match="must be <"):
        ShareGroupConfig.from_broker(
            {
                "group.share.session.timeout.ms": 1000,
                "group.share.min.session.timeout.ms": 1000,
                "group.share.heartbeat.interval.ms": 5000,
            }
        )
