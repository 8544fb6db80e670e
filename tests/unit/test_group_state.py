"""The classic group state machine: transition table, illegal moves, per-state answers."""

from __future__ import annotations

import pytest

from odradek.coordinator.group.state import (
    COMMIT_ANSWER,
    HEARTBEAT_ANSWER,
    SYNC_ANSWER,
    VALID_PREVIOUS_STATES,
    Answer,
    GroupState,
    can_rebalance,
    check_transition,
    parse_state,
)
from odradek.errors import ErrorCode, IllegalStateTransition

S = GroupState

ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
    *((s, S.DEAD) for s in GroupState),
}


@pytest.mark.parametrize("current", list(GroupState))
@pytest.mark.parametrize("target", list(GroupState))
def test_transition_table_matches_kafka(current: GroupState, target: GroupState) -> None:
    if (current, target) in ALLOWED:
        check_transition("g", current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=target.value):
            check_transition("g", current, target)


def test_every_state_has_a_row_and_an_answer() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(GroupState)
    for table in (HEARTBEAT_ANSWER, SYNC_ANSWER, COMMIT_ANSWER):
        assert set(table) == set(GroupState)
    assert SYNC_ANSWER[S.COMPLETING_REBALANCE] is Answer.PARK
    assert SYNC_ANSWER[S.STABLE] is Answer.CURRENT_ASSIGNMENT
    assert HEARTBEAT_ANSWER[S.PREPARING_REBALANCE] == ErrorCode.rebalance_in_progress
    assert COMMIT_ANSWER[S.COMPLETING_REBALANCE] == ErrorCode.rebalance_in_progress
    assert COMMIT_ANSWER[S.DEAD] == ErrorCode.coordinator_not_available


def test_can_rebalance_and_parse() -> None:
    assert {s for s in GroupState if can_rebalance(s)} == {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}
    assert parse_state("stable") is S.STABLE
    assert parse_state("PREPARINGREBALANCE") is S.PREPARING_REBALANCE
    assert parse_state("nope") is None
    assert str(S.COMPLETING_REBALANCE) == "CompletingRebalance"
