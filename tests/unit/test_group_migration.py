"""Online migration between classic and consumer groups (KIP-848's ``group.consumer.migration.policy``)
through the group coordinator over fakes (manual clock, in-memory ``__consumer_offsets``): a
consumer-protocol member upgrading a classic group, classic members reconciling inside the consumer
group (never two owners of a partition), the group going back to classic when the last
consumer-protocol member leaves or expires, each conversion surviving a new coordinator, classic
members joining a consumer group, their errors and timers, and the policy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence

import pytest

from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.consumer_membership import ConsumerGroupConfig, ConsumerHeartbeat
from odradek.coordinator.group.consumer_membership import ConsumerHeartbeatResult as Beat
from odradek.coordinator.group.group_config import ConsumerGroupMigrationPolicy as Policy
from odradek.coordinator.group.member import JoinGroupResult, JoinRequest, SyncGroupResult
from odradek.coordinator.group.schemas import (
    OffsetAndMetadata,
    SchemaError,
    consumer_protocol_version,
    decode_assignment,
    decode_consumer_subscription,
    encode_assignment,
    encode_subscription,
)
from odradek.coordinator.group.state import GroupState
from odradek.errors import ErrorCode, InvalidConfigError
from odradek.server.config import KafkaConfig
from odradek.storage.topic_partition import TopicPartition

from .group_fakes import Harness, run, settle

E = ErrorCode
TOPICS = {"t": 6}
T0 = TopicPartition("t", 0)


def _request(
    member_id: str = "",
    owned: Mapping[str, Sequence[int]] | None = None,
    protocols: Iterable[str] = ("cooperative-sticky",),
    instance: str | None = None,
) -> JoinRequest:
    metadata = encode_subscription(["t"], version=3, owned=owned or {}, rack_id="r1")
    return JoinRequest("g", member_id, instance, "classic", "/10.0.0.1", 30000, 10000, "consumer",
                       tuple((p, metadata) for p in protocols))  # fmt: skip


async def _join(h: Harness, member_id: str = "", **kw: object) -> JoinGroupResult:
    return await h.coordinator.join_group(_request(member_id, **kw))  # type: ignore[arg-type]


async def _sync(h: Harness, generation: int, member_id: str, assignments: Mapping[str, bytes] | None = None,
                protocol: str | None = "cooperative-sticky") -> SyncGroupResult:  # fmt: skip
    return await h.coordinator.sync_group("g", generation, member_id, "consumer", protocol, None, assignments or {})


def _partitions(result: SyncGroupResult) -> set[int]:
    assert result.error is E.none, result
    return set(decode_assignment(result.assignment).get("t", []))


async def _beat(h: Harness, member_id: str, epoch: int, owned: set[int] | None = None) -> Beat:
    if epoch == 0:
        req = ConsumerHeartbeat("g", member_id, 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={})
    else:
        req = ConsumerHeartbeat("g", member_id, epoch, owned=None if owned is None else {"t": frozenset(owned)})
    return await h.coordinator.consumer_group_heartbeat(req, TOPICS)


def _group(h: Harness) -> ConsumerGroup:
    error, group = h.coordinator.consumer_group("g")
    assert error is E.none and group is not None
    return group


def _assert_one_owner(group: ConsumerGroup) -> None:
    seen: set[tuple[str, int]] = set()
    for member in group.members.values():
        for tp in member.owns():
            assert tp not in seen, f"{tp} has two owners in {group.members}"
            seen.add(tp)


async def _classic_group(h: Harness) -> tuple[str, str]:
    """A Stable classic group "g" of members a (partitions 0-2) and b (3-5) at generation 2."""
    h.metadata.add_topic("t", 6)
    a = (await _join(h)).member_id
    assert (await _join(h, a)).generation_id == 1
    await _sync(h, 1, a, {a: encode_assignment({"t": [0, 1, 2, 3, 4, 5]})})
    b = (await _join(h)).member_id
    b_join = h.coordinator.join_group(_request(b))
    a_join = h.coordinator.join_group(_request(a, owned={"t": [0, 1, 2, 3, 4, 5]}))
    ja, jb = await asyncio.gather(a_join, b_join)
    assert ja.generation_id == jb.generation_id == 2
    leader = a if ja.members else b
    assignments = {a: encode_assignment({"t": [0, 1, 2]}), b: encode_assignment({"t": [3, 4, 5]})}
    follower = h.coordinator.sync_group("g", 2, b if leader == a else a, "consumer", None, None, {})
    await _sync(h, 2, leader, assignments, None)
    assert (await follower).error is E.none
    classic = h.coordinator.group("g")
    assert classic is not None and classic.is_(GroupState.STABLE)
    return a, b


async def _reconcile_classic(h: Harness, member_id: str, owned: set[int]) -> set[int]:
    """A cooperative classic member told to rejoin: rejoin, sync, revoke and rejoin until its
    heartbeat is NONE; the partitions it then owns."""
    for _ in range(4):
        joined = await _join(h, member_id, owned={"t": sorted(owned)})
        assert joined.error is E.none and joined.leader_id == "" and joined.members == (), joined
        owned = _partitions(await _sync(h, joined.generation_id, member_id))
        _assert_one_owner(_group(h))
        if h.coordinator.heartbeat("g", member_id, None, joined.generation_id) is E.none:
            return owned
    raise AssertionError(f"member {member_id} did not settle")


async def _upgraded(h: Harness) -> tuple[str, str]:
    """The classic group upgraded by consumer member c, everyone reconciled (2 partitions each)."""
    a, b = await _classic_group(h)
    joined = await _beat(h, "c", 0)
    assert joined.error is E.none and joined.member_epoch == 3 and joined.assignment == {}
    owned = {a: await _reconcile_classic(h, a, {0, 1, 2}), b: await _reconcile_classic(h, b, {3, 4, 5})}
    got = await _beat(h, "c", 3, set())
    mine = set(got.assignment["t"]) if got.assignment else set()
    assert sorted(owned[a] | owned[b] | mine) == [0, 1, 2, 3, 4, 5]
    assert [len(owned[a]), len(owned[b]), len(mine)] == [2, 2, 2]
    return a, b


# --- upgrade -------------------------------------------------------------------------------------


@run
async def test_a_consumer_member_upgrades_a_classic_group_whose_members_keep_their_partitions() -> None:
    h = await Harness().start()
    a, b = await _classic_group(h)
    assert await h.coordinator.commit_offsets("g", a, None, 2, {T0: OffsetAndMetadata(11)}) == {T0: E.none}
    joined = await _beat(h, "c", 0)
    assert joined.error is E.none and joined.member_epoch == 3
    assert joined.assignment == {}  # every partition is still a classic member's
    group = _group(h)
    assert group.group_epoch == group.assignment_epoch == 3
    assert {m: (group.members[m].member_epoch, dict(group.members[m].assigned)) for m in (a, b)} == {
        a: (2, {"t": frozenset({0, 1, 2})}),
        b: (2, {"t": frozenset({3, 4, 5})}),
    }
    classic = group.members[a].classic
    assert classic is not None and classic.session_timeout_ms == 10000
    assert [p.name for p in classic.supported_protocols] == ["cooperative-sticky"]
    assert group.members[a].rack_id == "r1" and group.members[a].subscribed_topic_names == ("t",)
    holder = h.coordinator.group("g")
    assert holder is not None and holder.is_(GroupState.EMPTY) and not holder.members
    assert h.coordinator.fetch_offsets("g", False, [T0])[1][T0].offset == 11
    _, listed = h.coordinator.list_groups()
    assert [(g.group_id, g.group_type) for g in listed] == [("g", "consumer")]
    # the classic members learn of the new assignment at their next heartbeat
    assert h.coordinator.heartbeat("g", a, None, 2) is E.rebalance_in_progress
    first = await _join(h, a, owned={"t": [0, 1, 2]})
    assert (first.generation_id, first.protocol_type, first.protocol_name) == (2, "consumer", "cooperative-sticky")
    kept = _partitions(await _sync(h, 2, a))
    assert len(kept) == 2 and kept < {0, 1, 2}  # one to give up first, at the old generation
    assert await h.coordinator.commit_offsets("g", a, None, 2, {T0: OffsetAndMetadata(12)}) == {T0: E.none}
    assert await h.coordinator.commit_offsets("g", a, None, 3, {T0: OffsetAndMetadata(12)}) == {
        T0: E.illegal_generation
    }
    _assert_one_owner(_group(h))
    assert await _reconcile_classic(h, a, kept) == kept
    assert _group(h).members[a].member_epoch == 3
    assert len(await _reconcile_classic(h, b, {3, 4, 5})) == 2
    got = await _beat(h, "c", 3, set())
    assert got.assignment is not None and len(got.assignment["t"]) == 2
    assert _group(h).state == "Stable"


@run
async def test_an_upgraded_group_and_its_classic_members_survive_a_new_coordinator() -> None:
    h = await Harness().start()
    a, _b = await _upgraded(h)
    before = _group(h)
    snapshot = {m.member_id: (m.member_epoch, m.assigned, m.classic) for m in before.members.values()}
    await h.coordinator.shutdown()
    h2 = Harness(log=h.log, clock=h.clock)
    h2.metadata.add_topic("t", 6)
    await h2.start()
    after = _group(h2)
    assert {m.member_id: (m.member_epoch, m.assigned, m.classic) for m in after.members.values()} == snapshot
    holder = h2.coordinator.group("g")
    assert holder is not None and not holder.members
    assert h2.coordinator.heartbeat("g", a, None, 3) is E.none


@run
async def test_partitions_a_cooperative_member_still_revokes_stay_its_own_after_the_upgrade() -> None:
    h = await Harness().start()
    a, b = await _classic_group(h)
    classic = h.coordinator.group("g")
    assert classic is not None
    # as after a cooperative first round: b is not given 3-5 until a, which still owns them, rejoins
    classic.members[b].assignment = encode_assignment({"t": []})
    await _beat(h, "c", 0)
    group = _group(h)
    assert group.members[a].assigned == {"t": frozenset(range(6))} and group.members[b].assigned == {}
    _assert_one_owner(group)


@run
async def test_a_classic_group_that_cannot_be_upgraded_stays_classic() -> None:
    h = await Harness(consumer=ConsumerGroupConfig(migration_policy=Policy.DISABLED)).start()
    await _classic_group(h)
    refused = await _beat(h, "c", 0)
    assert refused.error is E.group_id_not_found and "not a consumer group" in (refused.message or "")
    assert (await _beat(h, "c", 5)).error is E.group_id_not_found
    for size, error in ((2, E.group_max_size_reached), (1, E.group_id_not_found)):
        small = Harness(consumer=ConsumerGroupConfig(max_size=size))
        await small.start()
        await _classic_group(small)
        assert (await _beat(small, "c", 0)).error is error
        assert small.coordinator.consumer_group("g")[0] is E.group_id_not_found
    holder = h.coordinator.group("g")
    assert holder is not None and holder.is_(GroupState.STABLE) and holder.size == 2


# --- downgrade -----------------------------------------------------------------------------------


@run
async def test_the_last_consumer_member_leaving_makes_the_group_classic_again() -> None:
    h = await Harness().start()
    a, b = await _upgraded(h)
    targets = {m: set(_group(h).target[m]["t"]) for m in (a, b)}
    assert (await _beat(h, "c", -1)).error is E.none
    assert h.coordinator.consumer_group("g")[0] is E.group_id_not_found
    classic = h.coordinator.group("g")
    assert classic is not None and classic.is_(GroupState.PREPARING_REBALANCE)
    assert classic.generation_id == 3 and set(classic.members) == {a, b}
    assert classic.protocol_type == "consumer" and classic.protocol_name == "cooperative-sticky"
    assert {m: set(decode_assignment(classic.members[m].assignment)["t"]) for m in (a, b)} == targets
    assert consumer_protocol_version(classic.members[a].metadata("cooperative-sticky")) == 3
    assert h.coordinator.heartbeat("g", a, None, 3) is E.rebalance_in_progress
    # the classic rebalance runs as usual
    ja, jb = await asyncio.gather(_join(h, a, owned={"t": sorted(targets[a])}), _join(h, b))
    assert ja.generation_id == jb.generation_id == 4 and (ja.members or jb.members)
    leader = a if ja.members else b
    follower = h.coordinator.sync_group("g", 4, b if leader == a else a, "consumer", None, None, {})
    done = {a: encode_assignment({"t": [0, 1, 2]}), b: encode_assignment({"t": [3, 4, 5]})}
    assert _partitions(await _sync(h, 4, leader, done)) and (await follower).error is E.none
    assert classic.is_(GroupState.STABLE)
    _, listed = h.coordinator.list_groups()
    assert [(g.group_id, g.group_type) for g in listed] == [("g", "classic")]


@run
async def test_a_downgraded_group_is_loaded_as_a_classic_group() -> None:
    h = await Harness().start()
    a, b = await _upgraded(h)
    await _beat(h, "c", -1)
    await h.coordinator.shutdown()
    h2 = Harness(log=h.log, clock=h.clock)
    h2.metadata.add_topic("t", 6)
    await h2.start()
    assert h2.coordinator.consumer_group("g")[0] is E.group_id_not_found
    classic = h2.coordinator.group("g")
    assert classic is not None and set(classic.members) == {a, b} and classic.generation_id == 3


@run
async def test_the_last_consumer_member_expiring_downgrades_and_the_policy_can_forbid_it() -> None:
    h = await Harness().start()
    a, b = await _upgraded(h)
    for _ in range(9):  # 45 s: the classic members heartbeat, the consumer member does not
        h.clock.advance(5000)
        for member in (a, b):
            h.coordinator.heartbeat("g", member, None, 3)
    await settle()
    assert h.coordinator.consumer_group("g")[0] is E.group_id_not_found
    classic = h.coordinator.group("g")
    assert classic is not None and set(classic.members) == {a, b}

    kept = await Harness(consumer=ConsumerGroupConfig(migration_policy=Policy.UPGRADE)).start()
    a, b = await _upgraded(kept)
    await _beat(kept, "c", -1)
    group = _group(kept)  # still a consumer group, of classic members
    assert set(group.members) == {a, b} and group.group_epoch == 4
    assert kept.coordinator.heartbeat("g", a, None, 3) is E.rebalance_in_progress


@run
async def test_a_static_classic_member_taking_the_last_consumer_members_place_downgrades_at_once() -> None:
    h = await Harness().start()
    h.metadata.add_topic("t", 6)
    static = ConsumerHeartbeat(
        "g", "c", 0, instance_id="i-1", rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={}
    )
    await h.coordinator.consumer_group_heartbeat(static, TOPICS)
    x = (await _join(h, (await _join(h)).member_id)).member_id
    await _beat(h, "c", 1, set(range(6)))  # c revokes what x is to get
    target = set(_group(h).target["c"]["t"])
    joined = await _join(h, instance="i-1")  # the instance comes back speaking the classic protocol
    assert joined.error is E.none and joined.generation_id == 2
    assert h.coordinator.consumer_group("g")[0] is E.group_id_not_found
    classic = h.coordinator.group("g")
    assert classic is not None and classic.is_(GroupState.STABLE) and classic.generation_id == 2
    assert set(classic.members) == {x, joined.member_id}
    assert _partitions(await _sync(h, 2, joined.member_id)) == target  # no rebalance: it has c's place


# --- classic members of a consumer group ---------------------------------------------------------


@run
async def test_a_classic_member_joins_a_consumer_group_and_shares_its_partitions() -> None:
    h = await Harness().start()
    h.metadata.add_topic("t", 6)
    assert (await _beat(h, "c", 0)).assignment == {"t": frozenset(range(6))}
    first = await _join(h, protocols=("range", "roundrobin"))
    assert first.error is E.member_id_required
    x = first.member_id
    joined = await _join(h, x, protocols=("range", "roundrobin"))
    assert (joined.error, joined.generation_id, joined.protocol_name, joined.leader_id) == (E.none, 2, "range", "")
    assert _partitions(await _sync(h, 2, x, protocol="range")) == set()  # c still owns them all
    assert h.coordinator.heartbeat("g", x, None, 2) is E.none  # waiting for c to release
    c = await _beat(h, "c", 1, set(range(6)))
    assert c.assignment is not None and len(c.assignment["t"]) == 3
    kept = set(c.assignment["t"])
    c = await _beat(h, "c", 1, kept)
    assert c.member_epoch == 2
    assert h.coordinator.heartbeat("g", x, None, 2) is E.rebalance_in_progress  # released: come and get them
    again = await _join(h, x, protocols=("range", "roundrobin"))
    mine = _partitions(await _sync(h, again.generation_id, x, protocol="range"))
    assert len(mine) == 3 and not mine & kept
    assert h.coordinator.heartbeat("g", x, None, 2) is E.none
    described = _group(h).members[x]
    assert described.classic is not None and described.client_id == "classic"
    # errors, as Kafka answers them
    assert (await _sync(h, 9, x, protocol="range")).error is E.illegal_generation
    assert (await _sync(h, 2, x, protocol="roundrobin")).error is E.inconsistent_group_protocol
    assert h.coordinator.heartbeat("g", x, None, 1) is E.illegal_generation
    assert h.coordinator.heartbeat("g", "c", None, 2) is E.unknown_member_id  # not a classic member
    assert (await _join(h, protocols=("cooperative-sticky",))).error is E.inconsistent_group_protocol
    commit = h.coordinator.commit_offsets
    assert await commit("g", x, None, 2, {T0: OffsetAndMetadata(5)}) == {T0: E.none}
    assert await commit("g", x, None, 1, {T0: OffsetAndMetadata(5)}) == {T0: E.illegal_generation}
    # LeaveGroup: the classic member goes (one new epoch); a consumer-protocol member is not its to remove
    assert h.coordinator.leave_group("g", [(x, None, "bye"), ("c", None, None)]) == (
        E.none,
        [E.none, E.unknown_member_id],
    )
    await settle()
    assert set(_group(h).members) == {"c"} and _group(h).group_epoch == 3


@run
async def test_a_static_classic_member_rejoining_takes_its_place_and_fences_the_old_id() -> None:
    h = await Harness().start()
    h.metadata.add_topic("t", 6)
    await _beat(h, "c", 0)
    old = await _join(h, instance="i-1")
    assert old.error is E.none  # a static member needs no member id round
    new = await _join(h, instance="i-1")
    assert new.error is E.none and new.member_id != old.member_id
    assert set(_group(h).members) == {"c", new.member_id}
    assert h.coordinator.heartbeat("g", old.member_id, "i-1", new.generation_id) is E.fenced_instance_id
    assert h.coordinator.heartbeat("g", old.member_id, None, new.generation_id) is E.unknown_member_id
    assert (await _join(h, old.member_id, instance="i-1")).error is E.fenced_instance_id
    assert h.coordinator.leave_group("g", [("", "i-1", None)]) == (E.none, [E.none])  # an admin's removal


@run
async def test_a_classic_member_is_removed_after_its_session_or_when_it_does_not_rejoin() -> None:
    h = await Harness().start()
    h.metadata.add_topic("t", 6)
    await _beat(h, "c", 0)
    first = await _join(h)
    x = (await _join(h, first.member_id)).member_id
    assert x in _group(h).members
    h.clock.advance(9000)
    await _beat(h, "c", 2, None)
    h.clock.advance(2000)  # 11 s without a heartbeat from x: its own 10 s session ran out
    await settle()
    assert set(_group(h).members) == {"c"}

    y = (await _join(h, (await _join(h)).member_id)).member_id
    epoch = _group(h).members[y].member_epoch
    await _beat(h, "d", 0)  # the group epoch moves on
    assert h.coordinator.heartbeat("g", y, None, epoch) is E.rebalance_in_progress
    for _ in range(6):  # it keeps heartbeating but never rejoins within its 30 s rebalance timeout
        h.clock.advance(5000)
        h.coordinator.heartbeat("g", y, None, epoch)
    await settle()
    assert y not in _group(h).members


# --- the policy key and the consumer protocol's encodings ----------------------------------------


def test_the_policy_key_is_kafkas_case_insensitive_and_bidirectional_by_default() -> None:
    assert ConsumerGroupConfig.from_broker(KafkaConfig({})).migration_policy is Policy.BIDIRECTIONAL
    config = KafkaConfig({"group.consumer.migration.policy": "Upgrade"})
    assert ConsumerGroupConfig.from_broker(config).migration_policy is Policy.UPGRADE
    with pytest.raises(InvalidConfigError, match=r"group\.consumer\.migration\.policy"):
        KafkaConfig({"group.consumer.migration.policy": "sideways"})
    assert [p.upgrade_enabled for p in Policy] == [True, True, False, False]
    assert [p.downgrade_enabled for p in Policy] == [True, False, True, False]
    assert Policy.parse(None) is Policy.DISABLED and Policy.parse("DOWNGRADE") is Policy.DOWNGRADE


def test_consumer_protocol_subscriptions_of_every_version() -> None:
    v3 = encode_subscription(["a", "b"], b"u", version=3, owned={"a": [1, 2]}, generation_id=7, rack_id="r")
    sub = decode_consumer_subscription(v3)
    assert (sub.version, sub.topics, sub.user_data, dict(sub.owned_partitions), sub.generation_id, sub.rack_id) == (
        3,
        ("a", "b"),
        b"u",
        {"a": (1, 2)},
        7,
        "r",
    )
    v0 = decode_consumer_subscription(encode_subscription(["a"]))
    assert (v0.version, v0.owned_partitions, v0.generation_id, v0.rack_id) == (0, {}, -1, None)
    future = b"\x00\x09" + v3[2:] + b"more fields"  # a later version reads as 3
    assert decode_consumer_subscription(future).rack_id == "r" and consumer_protocol_version(future) == 3
    with pytest.raises(SchemaError):
        decode_consumer_subscription(b"\xff\xff" + v3[2:])
    with pytest.raises(SchemaError):
        decode_consumer_subscription(v3[:-2])
    assert encode_assignment({"t": [1]}, version=2)[:2] == b"\x00\x02"
    assert decode_assignment(encode_assignment({"t": [1]}, version=2)) == {"t": [1]}
