"""OffsetCommit's answer for every group state and kind of committer (Kafka's handleCommitOffsets).

The group has a dynamic member ``d`` and a static member ``s`` (``group.instance.id`` "inst-s")
and is driven into each state; every kind of commit is then sent and its per-partition answer
compared with the table below. A refused commit must write nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from odradek.coordinator.group.schemas import OffsetAndMetadata
from odradek.coordinator.group.state import GroupState
from odradek.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

from .group_fakes import Harness, assignment_for, run, settle

E = ErrorCode
TP = TopicPartition("t", 0)
INSTANCE = "inst-s"


@dataclass
class Scene:
    """A group ``g`` in some state; ``generation`` is what the members were last told."""

    h: Harness
    state: GroupState
    dynamic: str
    static: str
    generation: int
    parked: list[asyncio.Task[object]]


async def _stable() -> Scene:
    h = await Harness().start()
    d = await h.join_fully("g")
    await h.sync("g", 1, d.member_id, assignment_for([d.member_id]))
    s_task = h.join("g", instance=INSTANCE, client_id="static")
    await settle()
    d_task = h.join("g", d.member_id)
    d2, s2 = await d_task, await s_task
    assert d2.generation_id == s2.generation_id == 2
    await asyncio.gather(
        h.sync("g", 2, d2.member_id, assignment_for([d2.member_id, s2.member_id])),
        h.sync("g", 2, s2.member_id, instance=INSTANCE),
    )
    return Scene(h, GroupState.STABLE, d2.member_id, s2.member_id, 2, [])


async def _preparing() -> Scene:
    scene = await _stable()
    newcomer = await scene.h.join("g")
    assert newcomer.error == E.member_id_required
    scene.parked.append(scene.h.join("g", newcomer.member_id))
    await settle()
    scene.state = GroupState.PREPARING_REBALANCE
    return scene


async def _completing() -> Scene:
    scene = await _preparing()
    h = scene.h
    results = await asyncio.gather(h.join("g", scene.dynamic), h.join("g", scene.static, instance=INSTANCE))
    assert {r.generation_id for r in results} == {3}
    await asyncio.gather(*scene.parked)
    scene.parked.clear()
    scene.state = GroupState.COMPLETING_REBALANCE
    scene.generation = 3
    return scene


async def _empty() -> Scene:
    scene = await _stable()
    error, errors = scene.h.coordinator.leave_group("g", [(scene.dynamic, None, None), (scene.static, INSTANCE, None)])
    assert (error, errors) == (E.none, [E.none, E.none])
    await settle()
    scene.state = GroupState.EMPTY
    return scene


async def _dead() -> Scene:
    scene = await _empty()
    group = scene.h.coordinator.group("g")
    assert group is not None
    group.transition_to(GroupState.DEAD, scene.h.clock.time_ms())  # as while a deletion is written
    scene.state = GroupState.DEAD
    return scene


BUILD = {
    GroupState.EMPTY: _empty,
    GroupState.PREPARING_REBALANCE: _preparing,
    GroupState.COMPLETING_REBALANCE: _completing,
    GroupState.STABLE: _stable,
    GroupState.DEAD: _dead,
}

# kind of commit -> (generation, member id, instance id) built from the scene
KINDS = {
    "simple": lambda s: (-1, "", None),
    "no-generation-with-member-id": lambda s: (-1, "someone", None),
    "instance-only": lambda s: (-1, "", INSTANCE),
    "member-current-generation": lambda s: (s.generation, s.dynamic, None),
    "member-stale-generation": lambda s: (s.generation - 1, s.dynamic, None),
    "unknown-member": lambda s: (s.generation, "someone", None),
    "static-member": lambda s: (s.generation, s.static, INSTANCE),
    "fenced-instance": lambda s: (s.generation, s.dynamic, INSTANCE),
    "unknown-instance": lambda s: (s.generation, s.static, "inst-unknown"),
}

_ = None  # accepted (the commit is stored)
UNK, GEN, RIP, FEN, CNA = (
    E.unknown_member_id,
    E.illegal_generation,
    E.rebalance_in_progress,
    E.fenced_instance_id,
    E.coordinator_not_available,
)
STATES = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)
ROWS: dict[str, tuple[ErrorCode | None, ...]] = {
    #                               Empty  Preparing Completing Stable Dead
    "simple":                       (_,    UNK,      UNK,       UNK,   CNA),
    "no-generation-with-member-id": (_,    UNK,      UNK,       UNK,   CNA),
    "instance-only":                (_,    FEN,      FEN,       FEN,   CNA),
    "member-current-generation":    (UNK,  _,        RIP,       _,     CNA),
    "member-stale-generation":      (UNK,  GEN,      GEN,       GEN,   CNA),
    "unknown-member":               (UNK,  UNK,      UNK,       UNK,   CNA),
    "static-member":                (UNK,  _,        RIP,       _,     CNA),
    "fenced-instance":              (UNK,  FEN,      FEN,       FEN,   CNA),
    "unknown-instance":             (UNK,  UNK,      UNK,       UNK,   CNA),
}  # fmt: skip
EXPECTED = {kind: dict(zip(STATES, row, strict=True)) for kind, row in ROWS.items()}
"""Kafka's rules: Dead refuses everything; generation -1 commits are accepted while the group is
Empty ("simple" commits: admin tools, consumers without group management); otherwise a commit
naming a member (or an instance, or a generation) must come from a current member of the
current generation (FENCED_INSTANCE_ID when the instance belongs to another member id); a
committer that names nothing gets UNKNOWN_MEMBER_ID from a group with members. A valid
member's commit is stored in Stable and in PreparingRebalance (members of the generation being
rebalanced keep committing until the heartbeat tells them to rejoin, e.g. from an eager
consumer's revoke callback) and refused with REBALANCE_IN_PROGRESS in CompletingRebalance."""


@pytest.mark.parametrize("state", list(BUILD), ids=lambda s: s.value)
@pytest.mark.parametrize("kind", list(KINDS))
def test_commit_answer_per_state(state: GroupState, kind: str) -> None:
    @run
    async def scenario() -> None:
        scene = await BUILD[state]()
        group = scene.h.coordinator.group("g")
        assert group is not None and group.state is state
        generation, member_id, instance_id = KINDS[kind](scene)
        result = await scene.h.coordinator.commit_offsets(
            "g", member_id, instance_id, generation, {TP: OffsetAndMetadata(42)}
        )
        expected = EXPECTED[kind][state]
        assert result == {TP: expected or E.none}, (state, kind, generation, member_id, instance_id)
        committed = group.offset(TP)
        assert (committed is not None and committed.offset == 42) is (expected is None)
        assert group.state is state
        for task in scene.parked:
            task.cancel()

    scenario()


@run
async def test_commit_during_preparing_rebalance_keeps_the_member_alive() -> None:
    """Kafka restarts the session timer on a commit in Stable and PreparingRebalance."""
    scene = await _preparing()
    h = scene.h
    for _ in range(4):
        h.clock.advance(4000)  # session timeout is 10 s; only the commits keep ``d`` alive
        res = await h.coordinator.commit_offsets("g", scene.dynamic, None, 2, {TP: OffsetAndMetadata(1)})
        assert res == {TP: E.none}
    group = h.coordinator.group("g")
    assert group is not None and group.has(scene.dynamic)


@run
async def test_commit_after_leaving_is_refused() -> None:
    """A member that sent LeaveGroup is gone: its commits get UNKNOWN_MEMBER_ID and change nothing."""
    scene = await _stable()
    h = scene.h
    assert h.coordinator.leave_group("g", [(scene.dynamic, None, "closing")]) == (E.none, [E.none])
    res = await h.coordinator.commit_offsets("g", scene.dynamic, None, 2, {TP: OffsetAndMetadata(5)})
    assert res == {TP: E.unknown_member_id}
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE and group.offset(TP) is None
