"""KIP-848 consumer groups through the group coordinator (fakes: manual clock, in-memory
``__consumer_offsets``): commits and fetches checked by member epoch, the kinds a group id may
take, ListGroups types and states, DeleteGroups of a group with members."""

from __future__ import annotations

from odradek.coordinator.group.consumer_membership import ConsumerHeartbeat, ConsumerHeartbeatResult
from odradek.coordinator.group.consumer_schemas import (
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    decode_consumer_key,
    decode_consumer_value,
)
from odradek.coordinator.group.member import JoinRequest
from odradek.coordinator.group.schemas import OffsetAndMetadata
from odradek.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

from .group_fakes import Harness, run

T0 = TopicPartition("t", 0)
TOPICS = {"t": 2}


async def _join(h: Harness, member: str, group: str = "g") -> ConsumerHeartbeatResult:
    h.metadata.add_topic("t", 2)
    req = ConsumerHeartbeat(group, member, 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={})
    return await h.coordinator.consumer_group_heartbeat(req, TOPICS)


@run
async def test_commits_and_fetches_carry_the_members_current_epoch() -> None:
    h = await Harness().start()
    joined = await _join(h, "m1")
    assert joined.error is ErrorCode.none and joined.member_epoch == 1
    commit = h.coordinator.commit_offsets
    assert await commit("g", "m1", None, 1, {T0: OffsetAndMetadata(7)}) == {T0: ErrorCode.none}
    assert await commit("g", "m1", None, 0, {T0: OffsetAndMetadata(8)}) == {T0: ErrorCode.stale_member_epoch}
    assert await commit("g", "nobody", None, 1, {T0: OffsetAndMetadata(8)}) == {T0: ErrorCode.unknown_member_id}
    assert await commit("g", "", None, -1, {T0: OffsetAndMetadata(8)}) == {T0: ErrorCode.unknown_member_id}
    error, offsets = h.coordinator.fetch_offsets("g", False, [T0], "m1", 1)
    assert error is ErrorCode.none and offsets[T0].offset == 7
    assert h.coordinator.fetch_offsets("g", False, [T0], "m1", 3)[0] is ErrorCode.stale_member_epoch
    assert h.coordinator.fetch_offsets("g", False, [T0], "ghost", 1)[0] is ErrorCode.unknown_member_id
    assert h.coordinator.fetch_offsets("g", False, [T0])[0] is ErrorCode.none  # an admin's fetch (epoch -1)
    await h.coordinator.consumer_group_heartbeat(ConsumerHeartbeat("g", "m1", -1), TOPICS)
    simple = await commit("g", "", None, -1, {T0: OffsetAndMetadata(9)})  # no member left: a simple commit
    assert simple == {T0: ErrorCode.none}


@run
async def test_only_consumer_protocol_groups_mix_kinds() -> None:
    h = await Harness().start()
    await _join(h, "m1", "cg")
    connect = JoinRequest("cg", "", None, "c", "/h", 30000, 10000, "connect", (("v0", b"x"),))
    assert (await h.coordinator.join_group(connect)).error is ErrorCode.inconsistent_group_protocol
    classic = JoinRequest("classic", "", None, "c", "/h", 30000, 10000, "connect", (("v0", b"x"),), False)
    assert (await h.coordinator.join_group(classic)).error is ErrorCode.none
    refused = await _join(h, "m2", "classic")  # a "connect" group does not become a consumer group
    assert refused.error is ErrorCode.group_id_not_found and "not a consumer group" in (refused.message or "")
    error, message, _ = h.coordinator.describe_group("cg", 5)
    assert error is ErrorCode.group_id_not_found and "not a classic group" in (message or "")
    assert h.coordinator.consumer_group("classic")[0] is ErrorCode.group_id_not_found


@run
async def test_list_groups_shows_each_kind_and_delete_refuses_a_group_with_members() -> None:
    h = await Harness().start()
    await _join(h, "m1", "cg")
    await h.join_fully("classic")
    _, listed = h.coordinator.list_groups()
    kinds = {g.group_id: (g.group_type, g.state) for g in listed}
    assert kinds["cg"] == ("consumer", "Stable")
    assert kinds["classic"][0] == "classic"
    _, only = h.coordinator.list_groups(types=["consumer"])
    assert [g.group_id for g in only] == ["cg"]
    _, stable = h.coordinator.list_groups(states=["stable"], types=["consumer"])
    assert [g.group_id for g in stable] == ["cg"]
    assert (await h.coordinator.delete_groups(["cg"]))["cg"] is ErrorCode.non_empty_group
    await h.coordinator.consumer_group_heartbeat(ConsumerHeartbeat("cg", "m1", -1), TOPICS)
    assert (await h.coordinator.delete_groups(["cg"]))["cg"] is ErrorCode.none
    assert h.coordinator.consumer_group("cg")[0] is ErrorCode.group_id_not_found


@run
async def test_a_new_coordinator_loads_the_groups_epochs_and_assignments() -> None:
    h = await Harness().start()
    await _join(h, "m1")
    await _join(h, "m2")
    beat = h.coordinator.consumer_group_heartbeat
    first = await beat(ConsumerHeartbeat("g", "m1", 1, owned={"t": frozenset({0, 1})}), TOPICS)  # revokes one
    kept = first.assignment
    assert kept is not None and len(kept["t"]) == 1
    await beat(ConsumerHeartbeat("g", "m1", 1, owned=kept), TOPICS)  # revoked: epoch 2
    await _join(h, "gone")
    await beat(ConsumerHeartbeat("g", "gone", -1), TOPICS)  # its records get tombstones
    before = h.coordinator.consumer_group("g")[1]
    assert before is not None
    snapshot = {
        m.member_id: (m.member_epoch, m.state, m.assigned, m.pending_revocation) for m in before.members.values()
    }
    epochs = (before.group_epoch, before.assignment_epoch, dict(before.target))
    await h.coordinator.shutdown()

    h2 = Harness(log=h.log, clock=h.clock)
    h2.metadata.add_topic("t", 2)  # the new coordinator's metadata knows the topic (and its id)
    await h2.start()
    after = h2.coordinator.consumer_group("g")[1]
    assert after is not None
    assert {
        m.member_id: (m.member_epoch, m.state, m.assigned, m.pending_revocation) for m in after.members.values()
    } == snapshot
    assert (after.group_epoch, after.assignment_epoch, dict(after.target)) == epochs
    resumed = await h2.coordinator.consumer_group_heartbeat(ConsumerHeartbeat("g", "m1", 2), TOPICS)
    # no rejoin: it carries on to the group's latest assignment epoch ("gone" joined and left)
    assert resumed.error is ErrorCode.none and resumed.member_epoch == after.assignment_epoch == 4
    assert await h2.coordinator.commit_offsets("g", "m1", None, 4, {T0: OffsetAndMetadata(3)}) == {T0: ErrorCode.none}


@run
async def test_transactional_commits_from_a_consumer_member_carry_its_epoch() -> None:
    h = await Harness().start()
    await _join(h, "m1")
    txn = h.coordinator.txn_commit_offsets
    offsets = {T0: OffsetAndMetadata(4)}
    assert await txn("g", 7, 0, offsets, "m1", 1) == {T0: ErrorCode.none}
    assert await txn("g", 7, 0, offsets, "m1", 0) == {T0: ErrorCode.stale_member_epoch}
    assert await txn("g", 7, 0, offsets, "ghost", 1) == {T0: ErrorCode.unknown_member_id}
    assert await txn("g", 7, 0, offsets) == {T0: ErrorCode.none}  # a producer without group metadata


@run
async def test_an_empty_consumer_group_becomes_classic_and_keeps_its_offsets() -> None:
    h = await Harness().start()
    await _join(h, "m1", "g")
    assert await h.coordinator.commit_offsets("g", "m1", None, 1, {T0: OffsetAndMetadata(6)}) == {T0: ErrorCode.none}
    await h.coordinator.consumer_group_heartbeat(ConsumerHeartbeat("g", "m1", -1), TOPICS)
    joined = await h.join_fully("g")
    assert joined.error is ErrorCode.none
    assert h.coordinator.consumer_group("g")[0] is ErrorCode.group_id_not_found
    _, listed = h.coordinator.list_groups()
    assert [(g.group_id, g.group_type) for g in listed] == [("g", "classic")]
    assert h.coordinator.fetch_offsets("g", False, [T0])[1][T0].offset == 6


def _regex_records(h: Harness, group: str) -> dict[str, ConsumerGroupRegularExpressionValue]:
    """The group's ConsumerGroupRegularExpression records as last written (tombstoned ones gone)."""
    out = {}
    for raw_key, raw_value in h.coordinator.migration.written.get(group, {}).items():
        key = decode_consumer_key(raw_key)
        if isinstance(key, ConsumerGroupRegularExpressionKey):
            value = decode_consumer_value(key, raw_value)
            assert isinstance(value, ConsumerGroupRegularExpressionValue)
            out[key.regular_expression] = value
    return out


@run
async def test_resolved_regexes_are_written_loaded_and_tombstoned_once_unused() -> None:
    h = await Harness().start()
    topics = {"orders-eu": 2, "orders-us": 1, "t": 2}
    for name, count in topics.items():
        h.metadata.add_topic(name, count)
    beat = h.coordinator.consumer_group_heartbeat
    req = ConsumerHeartbeat("g", "m1", 0, rebalance_timeout_ms=30000, subscribed_topic_regex="orders-.*", owned={})
    joined = await beat(req, topics)
    assert joined.error is ErrorCode.none
    (written,) = _regex_records(h, "g").values()
    assert written.topics == ("orders-eu", "orders-us") and written.version == 0
    await h.coordinator.shutdown()

    h2 = Harness(log=h.log, clock=h.clock)
    for name, count in topics.items():
        h2.metadata.add_topic(name, count)
    await h2.start()
    group = h2.coordinator.consumer_group("g")[1]
    assert group is not None and group.resolved_regexes == {"orders-.*": frozenset({"orders-eu", "orders-us"})}
    epoch = group.group_epoch
    resumed = await h2.coordinator.consumer_group_heartbeat(ConsumerHeartbeat("g", "m1", joined.member_epoch), topics)
    assert resumed.error is ErrorCode.none and group.group_epoch == epoch  # loaded: nothing to resolve anew
    changed = ConsumerHeartbeat(
        "g", "m1", resumed.member_epoch, subscribed_topic_regex="", subscribed_topic_names=("t",)
    )
    assert (await h2.coordinator.consumer_group_heartbeat(changed, topics)).error is ErrorCode.none
    assert _regex_records(h2, "g") == {}  # tombstoned: no member subscribes with it
    assert group.resolved_regexes == {}
