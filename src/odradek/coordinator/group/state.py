"""The classic group protocol's states, the moves between them, and each request's answer per state.

A group managed by the broker (Kafka's "classic" protocol: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) is always in one :class:`GroupState`. :data:`VALID_PREVIOUS_STATES` is the
transition table (target state -> states it may be entered from);
:func:`check_transition` raises :class:`~odradek.errors.IllegalStateTransition` for any other move.

What each state means and how the coordinator answers in it (``join`` = JoinGroup, ``sync`` =
SyncGroup, ``hb`` = Heartbeat, ``commit`` = OffsetCommit from a member; OffsetFetch, DescribeGroups
and ListGroups are answered in every state):

``Empty``
    No members. Either every member left (the group lingers until its offsets expire), or the
    group only stores offsets (a "simple" consumer that commits with generation -1).
    join: accepted, moves to PreparingRebalance. sync, hb, leave: UNKNOWN_MEMBER_ID.
    commit: accepted from generation -1 / empty member id ("simple" commit), else
    UNKNOWN_MEMBER_ID (or ILLEGAL_GENERATION for a member id with a generation).
    Moves to: PreparingRebalance (first join), Dead (deleted, offsets expired, partition unloaded).

``PreparingRebalance``
    A rebalance began; the coordinator parks JoinGroup requests until every known member has
    rejoined, or the rebalance timeout (the largest ``rebalance_timeout_ms`` of the members)
    passes; members that did not rejoin are then removed. An empty group's first rebalance also
    waits ``group.initial.rebalance.delay.ms`` (extended while new members keep arriving, never
    past the rebalance timeout).
    join: parked. sync: REBALANCE_IN_PROGRESS. hb: REBALANCE_IN_PROGRESS (members learn of the
    rebalance this way). leave: the member is removed. commit: accepted from members of the
    generation being rebalanced (still the current one: an eager consumer commits in its revoke
    callback before it rejoins), and their session timer restarts.
    Moves to: CompletingRebalance (members joined), Empty (nobody joined), Dead.

``CompletingRebalance``
    Joins answered; the new generation waits for the leader's SyncGroup with the assignment.
    join: a member with unchanged metadata gets the current generation again; changed metadata
    or a new member restarts the rebalance. sync: parked until the leader's assignment is
    stored; the leader's triggers the write. hb: NONE. leave / member failure: rebalance.
    commit: REBALANCE_IN_PROGRESS.
    Moves to: Stable (assignment stored), PreparingRebalance, Dead.

``Stable``
    Every member has its assignment. join: from the leader or with changed metadata starts a
    rebalance; from a follower with unchanged metadata returns the current generation. sync: the
    member's current assignment. hb: NONE. commit: accepted from the current generation only.
    Moves to: PreparingRebalance (join, leave, failure), Dead.

``Dead``
    The group's metadata is being removed (deleted, expired, or its ``__consumer_offsets``
    partition moved to another broker). Every request: COORDINATOR_NOT_AVAILABLE (the client
    looks the coordinator up again) except ListGroups/DescribeGroups, which show it as Dead.
    Moves to: nothing but Dead.

Module data is immutable: safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from odradek.errors import ErrorCode, IllegalStateTransition

__all__ = [
    "COMMIT_ANSWER",
    "HEARTBEAT_ANSWER",
    "SYNC_ANSWER",
    "VALID_PREVIOUS_STATES",
    "Answer",
    "GroupState",
    "check_transition",
    "parse_state",
]


class GroupState(enum.Enum):
    """A classic group's state; ``value`` is Kafka's display name (ListGroups, DescribeGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_S = GroupState

VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = MappingProxyType(
    {
        _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
        _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
        _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
        _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
        _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    }
)
"""Target state -> the states a group may move to it from (Kafka's ``validPreviousStates``)."""


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raise IllegalStateTransition unless ``current -> target`` is in the table."""
    if current not in VALID_PREVIOUS_STATES[target]:
        allowed = ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        raise IllegalStateTransition(
            f"group {group_id!r} must be in one of [{allowed}] to move to {target.value}, but it is {current.value}"
        )


def can_rebalance(state: GroupState) -> bool:
    """Whether a rebalance may start from ``state``."""
    return state in VALID_PREVIOUS_STATES[_S.PREPARING_REBALANCE]


def parse_state(name: str) -> GroupState | None:
    """The state named ``name`` (case-insensitive, as ListGroups' filter), or None."""
    lowered = name.lower()
    for state in GroupState:
        if state.value.lower() == lowered:
            return state
    return None


class Answer(enum.Enum):
    """What the coordinator does with a request once the member and generation are valid."""

    ACCEPT = "accept"
    """Handle it normally (store the commit, reset the session timer, ...)."""
    PARK = "park"
    """Keep the request until the state changes (SyncGroup during CompletingRebalance)."""
    CURRENT_ASSIGNMENT = "current-assignment"
    """Answer at once with the member's current assignment (SyncGroup when Stable)."""


_AnswerOrError = Answer | ErrorCode

HEARTBEAT_ANSWER: Mapping[GroupState, _AnswerOrError] = MappingProxyType(
    {
        _S.EMPTY: ErrorCode.unknown_member_id,
        _S.PREPARING_REBALANCE: ErrorCode.rebalance_in_progress,
        _S.COMPLETING_REBALANCE: Answer.ACCEPT,
        _S.STABLE: Answer.ACCEPT,
        _S.DEAD: ErrorCode.coordinator_not_available,
    }
)
"""Heartbeat from a valid member of the current generation, per state. The session timer is
reset in PreparingRebalance too (the answer still tells the member to rejoin)."""

SYNC_ANSWER: Mapping[GroupState, _AnswerOrError] = MappingProxyType(
    {
        _S.EMPTY: ErrorCode.unknown_member_id,
        _S.PREPARING_REBALANCE: ErrorCode.rebalance_in_progress,
        _S.COMPLETING_REBALANCE: Answer.PARK,
        _S.STABLE: Answer.CURRENT_ASSIGNMENT,
        _S.DEAD: ErrorCode.coordinator_not_available,
    }
)
"""SyncGroup from a valid member of the current generation, per state."""

COMMIT_ANSWER: Mapping[GroupState, _AnswerOrError] = MappingProxyType(
    {
        _S.EMPTY: Answer.ACCEPT,
        _S.PREPARING_REBALANCE: Answer.ACCEPT,
        _S.COMPLETING_REBALANCE: ErrorCode.rebalance_in_progress,
        _S.STABLE: Answer.ACCEPT,
        _S.DEAD: ErrorCode.coordinator_not_available,
    }
)
"""OffsetCommit that passed member/generation validation, per state (Kafka's
``doCommitOffsets``). The validation before it: Dead -> COORDINATOR_NOT_AVAILABLE; generation
< 0 while Empty -> accepted ("simple" commit); a generation, member id or instance id -> the
member must be current (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and of the current generation
(ILLEGAL_GENERATION); nothing named while the group has members -> UNKNOWN_MEMBER_ID."""
