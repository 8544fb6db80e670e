"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup against the coordinator, with a manual clock."""

from __future__ import annotations

import asyncio

from odradek.coordinator.group.schemas import decode_assignment
from odradek.coordinator.group.state import GroupState
from odradek.errors import ErrorCode

from .group_fakes import Harness, assignment_for, run, settle


@run
async def test_single_member_joins_and_is_stable_at_once() -> None:
    h = await Harness().start()
    first = await h.join("g")
    assert first.error == ErrorCode.member_id_required and first.member_id.startswith("client-")
    joined = await h.join("g", first.member_id)
    assert joined.error == ErrorCode.none
    assert joined.generation_id == 1 and joined.leader_id == first.member_id
    assert joined.protocol_name == "range" and [m[0] for m in joined.members] == [first.member_id]
    synced = await h.sync("g", 1, first.member_id, assignment_for([first.member_id]))
    assert synced.error == ErrorCode.none
    assert decode_assignment(synced.assignment) == {"t": [0, 1, 2, 3, 4, 5]}
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    assert h.coordinator.heartbeat("g", first.member_id, None, 1) == ErrorCode.none


@run
async def test_second_member_triggers_rebalance_and_both_get_disjoint_assignments() -> None:
    h = await Harness().start()
    a = await h.join_fully("g")
    await h.sync("g", 1, a.member_id, assignment_for([a.member_id]))
    b_first = await h.join("g")
    b_task = h.join("g", b_first.member_id)
    await settle()
    assert not b_task.done()
    assert h.coordinator.heartbeat("g", a.member_id, None, 1) == ErrorCode.rebalance_in_progress
    a_task = h.join("g", a.member_id)
    a2, b2 = await a_task, await b_task
    assert a2.generation_id == b2.generation_id == 2
    leader, follower = (a2, b2) if a2.members else (b2, a2)
    assert len(leader.members) == 2 and follower.members == ()
    ids = [leader.member_id, follower.member_id]
    f_sync = h.sync("g", 2, follower.member_id)
    await settle()
    assert not f_sync.done()
    l_sync = await h.sync("g", 2, leader.member_id, assignment_for(ids))
    f_res = await f_sync
    parts = decode_assignment(l_sync.assignment)["t"] + decode_assignment(f_res.assignment)["t"]
    assert sorted(parts) == [0, 1, 2, 3, 4, 5]
    assert h.coordinator.heartbeat("g", a.member_id, None, 1) == ErrorCode.illegal_generation


@run
async def test_join_errors() -> None:
    h = await Harness(min_session_timeout_ms=6000, max_session_timeout_ms=30000).start()
    assert (await h.join("g", session_ms=100)).error == ErrorCode.invalid_session_timeout
    assert (await h.join("", session_ms=10000)).error == ErrorCode.invalid_group_id
    assert (await h.join("g", "not-a-member")).error == ErrorCode.unknown_member_id
    a = await h.join_fully("g")
    other = await h.join("g", "bogus")
    assert other.error == ErrorCode.unknown_member_id
    mismatch = await h.join("g", protocols=("roundrobin",))
    assert mismatch.error == ErrorCode.inconsistent_group_protocol
    assert a.error == ErrorCode.none


@run
async def test_old_join_versions_add_members_without_member_id_round() -> None:
    h = await Harness().start()
    res = await h.join("g", require_known=False)
    assert res.error == ErrorCode.none and res.generation_id == 1


@run
async def test_group_max_size_rejects_extra_member() -> None:
    h = await Harness(max_size=2).start()
    a = await h.join_fully("g")
    await h.sync("g", 1, a.member_id, assignment_for([a.member_id]))
    b_first = await h.join("g")
    b_task = h.join("g", b_first.member_id)
    a_task = h.join("g", a.member_id)
    await asyncio.gather(a_task, b_task)
    third = await h.join("g")
    assert third.error == ErrorCode.group_max_size_reached
    group = h.coordinator.group("g")
    assert group is not None and group.size == 2


@run
async def test_session_timeout_removes_member_and_rebalances() -> None:
    h = await Harness().start()
    a = await h.join_fully("g", session_ms=6000)
    b_first = await h.join("g", session_ms=6000)
    b_task = h.join("g", b_first.member_id, session_ms=6000)
    a_task = h.join("g", a.member_id, session_ms=6000)
    a2, b2 = await a_task, await b_task
    leader = a2 if a2.members else b2
    follower = b2 if leader is a2 else a2
    await asyncio.gather(
        h.sync("g", 2, leader.member_id, assignment_for([a2.member_id, b2.member_id])),
        h.sync("g", 2, follower.member_id),
    )
    for _ in range(4):
        h.clock.advance(2000)
        assert h.coordinator.heartbeat("g", a.member_id, None, 2) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    group = h.coordinator.group("g")
    assert group is not None and not group.has(b2.member_id)
    assert group.state is GroupState.PREPARING_REBALANCE
    again = await h.join("g", a.member_id, session_ms=6000)
    assert again.generation_id == 3 and [m[0] for m in again.members] == [a.member_id]


@run
async def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = await Harness().start()
    a = await h.join_fully("g", rebalance_ms=20000)
    b_first = await h.join("g", rebalance_ms=20000)
    b_task = h.join("g", b_first.member_id, rebalance_ms=20000)
    a_task = h.join("g", a.member_id, rebalance_ms=20000)
    a2, b2 = await a_task, await b_task
    await asyncio.gather(
        h.sync("g", 2, (a2 if a2.members else b2).member_id, assignment_for([a2.member_id, b2.member_id])),
        h.sync("g", 2, (b2 if a2.members else a2).member_id),
    )
    rejoin = h.join("g", a.member_id, rebalance_ms=20000)  # leader rejoin -> rebalance; b never rejoins
    await settle()
    for _ in range(10):
        assert h.coordinator.heartbeat("g", b2.member_id, None, 2) in (
            ErrorCode.rebalance_in_progress,
            ErrorCode.unknown_member_id,
        )
        h.clock.advance(2500)
        await settle()
        if rejoin.done():
            break
    res = await rejoin
    assert res.generation_id == 3 and [m[0] for m in res.members] == [a.member_id]


@run
async def test_leave_group_single_and_batch() -> None:
    h = await Harness().start()
    a = await h.join_fully("g")
    await h.sync("g", 1, a.member_id, assignment_for([a.member_id]))
    error, members = h.coordinator.leave_group("g", [(a.member_id, None, "bye"), ("ghost", None, None)])
    assert error == ErrorCode.none and members == [ErrorCode.none, ErrorCode.unknown_member_id]
    await settle()
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY and group.generation_id == 2
    assert h.coordinator.leave_group("missing", [("x", None, None)]) == (ErrorCode.none, [ErrorCode.unknown_member_id])


@run
async def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = await Harness().start()
    a = await h.join("g", instance="i-a", client_id="ca")
    assert a.error == ErrorCode.none  # static members skip MEMBER_ID_REQUIRED
    b_task = h.join("g", instance="i-b", client_id="cb")
    await settle()
    a_task = h.join("g", a.member_id, instance="i-a", client_id="ca")
    a2, b2 = await a_task, await b_task
    assign = assignment_for([a2.member_id, b2.member_id])
    leader = a2 if a2.members else b2
    follower = b2 if leader is a2 else a2
    res = await asyncio.gather(
        h.sync("g", 2, leader.member_id, assign, instance="i-a" if leader is a2 else "i-b"),
        h.sync("g", 2, follower.member_id, instance="i-b" if leader is a2 else "i-a"),
    )
    b_assignment = res[1].assignment if follower is b2 else res[0].assignment
    # b restarts (no LeaveGroup, as static members do) and rejoins with an unknown member id
    again = await h.join("g", instance="i-b", client_id="cb")
    assert again.error == ErrorCode.none
    assert again.generation_id == 2 and again.member_id != b2.member_id
    assert again.leader_id == leader.member_id and again.members == ()
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    synced = await h.sync("g", 2, again.member_id, instance="i-b")
    assert synced.error == ErrorCode.none and synced.assignment == b_assignment
    # the old incarnation is fenced
    assert h.coordinator.heartbeat("g", b2.member_id, "i-b", 2) == ErrorCode.fenced_instance_id
    assert h.coordinator.heartbeat("g", a2.member_id, "i-a", 2) == ErrorCode.none


@run
async def test_initial_rebalance_delay_waits_for_more_members() -> None:
    h = await Harness(initial_rebalance_delay_ms=3000).start()
    first = await h.join("g")
    a_task = h.join("g", first.member_id)
    await settle()
    h.clock.advance(1000)
    second = await h.join("g")
    b_task = h.join("g", second.member_id)
    await settle()
    assert not a_task.done() and not b_task.done()
    h.clock.advance(2100)  # first window ends; a member arrived during it, so it is extended
    await settle()
    assert not a_task.done()
    h.clock.advance(3000)
    a, b = await a_task, await b_task
    assert a.generation_id == b.generation_id == 1


@run
async def test_unsynced_member_is_removed_after_rebalance_timeout() -> None:
    h = await Harness().start()
    a = await h.join_fully("g", rebalance_ms=10000)
    b_first = await h.join("g", rebalance_ms=10000)
    b_task = h.join("g", b_first.member_id, rebalance_ms=10000)
    a_task = h.join("g", a.member_id, rebalance_ms=10000)
    a2, b2 = await a_task, await b_task
    leader = a2 if a2.members else b2
    follower = b2 if leader is a2 else a2
    await h.sync("g", 2, leader.member_id, assignment_for([a2.member_id, b2.member_id]))
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    h.clock.advance(5000)
    assert h.coordinator.heartbeat("g", leader.member_id, None, 2) == ErrorCode.none
    h.clock.advance(5001)
    assert group.has(leader.member_id) and not group.has(follower.member_id)
    assert group.state is GroupState.PREPARING_REBALANCE


@run
async def test_sync_errors() -> None:
    h = await Harness().start()
    a = await h.join_fully("g")
    assert (await h.sync("g", 7, a.member_id)).error == ErrorCode.illegal_generation
    assert (await h.sync("g", 1, "nobody")).error == ErrorCode.unknown_member_id
    assert (await h.sync("other", 1, a.member_id)).error == ErrorCode.unknown_member_id
    res = await h.coordinator.sync_group("g", 1, a.member_id, "connect", "range", None, {})
    assert res.error == ErrorCode.inconsistent_group_protocol


@run
async def test_load_in_progress_and_not_coordinator() -> None:
    h = Harness()
    h.epochs[0] = h.epochs[1] = h.epochs[2] = None
    await h.start()
    assert (await h.join("g")).error == ErrorCode.not_coordinator
    h.epochs[0] = h.epochs[1] = h.epochs[2] = 0
    h.log.hold = asyncio.Event()
    assert h.coordinator.heartbeat("g", "m", None, 1) == ErrorCode.none  # loading: answered blindly
    res = await h.join("g")
    assert res.error in (ErrorCode.coordinator_load_in_progress, ErrorCode.member_id_required)
    await settle()
    assert (await h.join("g")).error == ErrorCode.member_id_required
    await h.coordinator.shutdown()
    assert (await h.join("g")).error == ErrorCode.coordinator_not_available


@run
async def test_batch_leave_answers_each_member() -> None:
    """LeaveGroup v3+: by instance id alone, by member id, a pending member, a stale member id of
    a static member (FENCED_INSTANCE_ID) and unknown identities (UNKNOWN_MEMBER_ID), each
    answered on its own; the group rebalances once for the removed members."""
    h = await Harness().start()
    s = await h.join("g", instance="inst-s")
    d_task = h.join("g", require_known=False)
    await settle()
    s_task = h.join("g", s.member_id, instance="inst-s")
    d, s2 = await d_task, await s_task
    assert d.generation_id == s2.generation_id == 2
    await asyncio.gather(
        h.sync("g", 2, s2.member_id, assignment_for([d.member_id, s2.member_id]), instance="inst-s"),
        h.sync("g", 2, d.member_id),
    )
    pending = await h.join("g")
    assert pending.error == ErrorCode.member_id_required
    error, errors = h.coordinator.leave_group(
        "g",
        [
            (d.member_id, "inst-s", None),
            ("", "inst-s", "admin"),
            (pending.member_id, None, None),
            ("", "inst-unknown", None),
            ("ghost", None, None),
            (d.member_id, None, "bye"),
        ],
    )
    assert error == ErrorCode.none
    assert errors == [
        ErrorCode.fenced_instance_id,
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.unknown_member_id,
        ErrorCode.unknown_member_id,
        ErrorCode.none,
    ]
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY and group.generation_id == 3
    assert not group.members and not group.static_members and not group.pending_members
