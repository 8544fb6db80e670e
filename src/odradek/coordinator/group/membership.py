"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance timers.

Kafka's ``GroupCoordinator`` membership half, with purgatories replaced by event-loop timers:

- **join**: members join; the group rebalances (PreparingRebalance) until every known member has
  rejoined, or the rebalance timeout passes (members that did not rejoin are removed, except
  static ones); then the generation is bumped, a protocol chosen and the parked JoinGroups are
  answered, the leader's with every member's metadata. An empty group's first rebalance waits
  ``group.initial.rebalance.delay.ms`` (0: completes as soon as everyone joined).
- **KIP-394**: a JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and a new id; the id
  is "pending" until it rejoins with it (or expires after the session timeout).
- **KIP-345 static members** (``group.instance.id``): a static member that rejoins with an unknown
  member id takes over its old identity; in a Stable group whose protocol stays the same this
  causes no rebalance (its assignment is kept); another member id with the same instance id is
  fenced (FENCED_INSTANCE_ID). Static members that miss a rebalance are kept.
- **sync**: in CompletingRebalance SyncGroups wait for the leader's; the leader's assignment is
  written to ``__consumer_offsets`` and, once durable, every member gets its part and the group
  is Stable. Members that do not sync within the rebalance timeout are removed.
- **session**: a member's session timer restarts on each heartbeat, commit and answered
  join/sync; when it fires the member is removed. A member waiting in a parked JoinGroup or
  SyncGroup is not expired (a new member only up to the new-member join timeout).

Only the event loop thread may call; timers run on it too. Each answer per state is in
:mod:`.state`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from odradek.coordinator.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupCoordinatorConfig
from odradek.coordinator.group.group import GroupMetadata
from odradek.coordinator.group.manager import GroupMetadataManager
from odradek.coordinator.group.member import (
    JoinCallback,
    JoinGroupResult,
    JoinRequest,
    MemberMetadata,
    SyncCallback,
    SyncGroupResult,
)
from odradek.coordinator.group.state import HEARTBEAT_ANSWER, SYNC_ANSWER, Answer, GroupState
from odradek.coordinator.runtime import CallLater, Timer
from odradek.errors import ErrorCode

__all__ = ["GroupMembership", "LeavingMember"]

log = logging.getLogger(__name__)

_S = GroupState


LeavingMember = tuple[str, str | None, str | None]
"""(member id, group instance id, reason) of one LeaveGroup entry."""


class GroupMembership:
    """Membership logic over ``manager``'s groups. ``call_later(ms, fn)`` schedules a timer,
    ``time_ms()`` is the wall clock, ``spawn(coro)`` runs a background write."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        manager: GroupMetadataManager,
        call_later: CallLater,
        time_ms: Callable[[], int],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.config = config
        self.manager = manager
        self.call_later = call_later
        self.time_ms = time_ms
        self.spawn = spawn

    # --- validation --------------------------------------------------------------------------------

    @staticmethod
    def validate_current_member(
        group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        """FENCED_INSTANCE_ID if the instance id maps to another member id, UNKNOWN_MEMBER_ID if
        the instance id or the member id is unknown, else None."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if not group.has(member_id):
            return ErrorCode.unknown_member_id
        return None

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        if group.is_(_S.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join < self.config.max_size
            )
        return group.has(member_id) or group.size < self.config.max_size

    # --- JoinGroup ---------------------------------------------------------------------------------

    def join_group(self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback) -> None:
        """Handle a JoinGroup for ``group`` (status and session timeout already validated)."""
        member_id = req.member_id
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                self._remove_member_and_update_group(group, group.get(member_id), "group is over capacity")
            else:
                group.pending_members.discard(member_id)
            callback(JoinGroupResult("", ErrorCode.group_max_size_reached))
        elif group.is_(_S.DEAD):
            callback(JoinGroupResult(member_id, ErrorCode.coordinator_not_available))
        elif not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            callback(JoinGroupResult(member_id, ErrorCode.inconsistent_group_protocol))
        elif member_id == "":
            new_id = group.generate_member_id(req.client_id, req.group_instance_id)
            old_id = None if req.group_instance_id is None else group.current_static_member_id(req.group_instance_id)
            if old_id is not None:
                log.info(
                    "static member %s of group %s rejoins as %s (was %s)",
                    req.group_instance_id,
                    group.group_id,
                    new_id,
                    old_id,
                )
                self._update_static_member_and_rebalance(group, old_id, new_id, req, callback)
            elif req.group_instance_id is None and req.require_known_member_id:
                group.pending_members.add(new_id)
                self._schedule_pending_expiration(group, new_id, req.session_timeout_ms)
                callback(JoinGroupResult(new_id, ErrorCode.member_id_required))
            else:
                self._add_member_and_rebalance(group, new_id, req, callback)
        elif member_id in group.pending_members and req.group_instance_id is None:
            self._cancel_pending_expiration(group, member_id)
            self._add_member_and_rebalance(group, member_id, req, callback)
        else:
            self._current_member_join(group, req, callback)
        if group.is_(_S.PREPARING_REBALANCE):
            self.maybe_complete_join(group)

    def _current_member_join(self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback) -> None:
        member_id = req.member_id
        error = self.validate_current_member(group, member_id, req.group_instance_id)
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        why = f"member {member_id} rejoins in state {state}; client reason: {req.reason or 'not provided'}"
        if state is _S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, callback, why)
        elif state is _S.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                callback(self._current_generation(group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, req, callback, why)
        elif state is _S.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, callback, why)
            else:
                callback(self._current_generation(group, member_id, with_members=False))
        else:
            log.warning("member %s rejoins group %s in unexpected state %s", member_id, group.group_id, state)
            callback(JoinGroupResult(member_id, ErrorCode.unknown_member_id))

    @staticmethod
    def _current_generation(
        group: GroupMetadata,
        member_id: str,
        with_members: bool,
        leader_id: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResult:
        return JoinGroupResult(
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=(leader_id if leader_id is not None else group.leader_id) or "",
            members=group.current_member_metadata() if with_members else (),
            skip_assignment=skip_assignment,
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member_id: str, req: JoinRequest, callback: JoinCallback
    ) -> None:
        member = MemberMetadata(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            is_new=True,
        )
        if group.is_(_S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        why = f"adding member {member_id} (instance {req.group_instance_id}); client reason: {req.reason}"
        self.maybe_prepare_rebalance(group, why)

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, req: JoinRequest, callback: JoinCallback, why: str
    ) -> None:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, callback)
        self.maybe_prepare_rebalance(group, why)

    def _update_static_member_and_rebalance(
        self, group: GroupMetadata, old_id: str, new_id: str, req: JoinRequest, callback: JoinCallback
    ) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        old = (list(member.supported_protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, callback)
        why = f"static member {instance_id} rejoins; client reason: {req.reason}"
        if group.is_(_S.STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self.spawn(
                    self._persist_static_member(
                        group,
                        member,
                        old,
                        old_id,
                        instance_id,
                        current_leader,
                        assignment,
                        req.support_skipping_assignment,
                    )
                )
            else:
                self.maybe_prepare_rebalance(group, why + " and changes the group's protocol")
        elif group.is_(_S.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, why + " during the sync")

    async def _persist_static_member(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        old: tuple[list[tuple[str, bytes]], int, int],
        old_id: str,
        instance_id: str,
        current_leader: str | None,
        assignment: dict[str, bytes],
        support_skipping_assignment: bool,
    ) -> None:
        error = await self.manager.store_group(group, assignment)
        new_id = member.member_id
        if group.current_static_member_id(instance_id) != new_id:
            return
        if error is not ErrorCode.none:
            log.warning("storing static member %s of group %s failed: %s", instance_id, group.group_id, error.name)
            callback = member.awaiting_join
            group.update_member(member, old[0], old[1], old[2], None)
            restored = group.replace_static_member(instance_id, new_id, old_id)
            self.schedule_heartbeat(group, restored, restored.session_timeout_ms)
            if callback is not None:
                callback(
                    JoinGroupResult(
                        "", error, group.generation_id, group.protocol_type, group.protocol_name, current_leader or ""
                    )
                )
        elif support_skipping_assignment and group.is_leader(new_id) and group.is_(_S.STABLE):
            member.answer_join(self._current_generation(group, new_id, with_members=True, skip_assignment=True))
        else:
            member.answer_join(self._current_generation(group, new_id, with_members=False, leader_id=current_leader))

    # --- rebalance ---------------------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Start a rebalance: parked SyncGroups are answered REBALANCE_IN_PROGRESS; an empty
        group waits the initial delay, others until everyone rejoined or the rebalance timeout."""
        if group.is_(_S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._clear_sync_expiration(group)
        was_empty = group.is_(_S.EMPTY)
        group.transition_to(_S.PREPARING_REBALANCE, self.time_ms())
        _cancel(group.join_timer)
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            group.initial_delay_active = True
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.join_timer = self.call_later(delay, lambda: self._on_initial_delay(group, delay, remaining))
        else:
            group.initial_delay_active = False
            group.join_timer = self.call_later(group.rebalance_timeout_ms, lambda: self._on_join_timeout(group))
        log.info(
            "preparing to rebalance group %s with old generation %d (reason: %s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        self.maybe_complete_join(group)

    def _on_initial_delay(self, group: GroupMetadata, delay: int, remaining: int) -> None:
        if not group.is_(_S.PREPARING_REBALANCE) or not group.initial_delay_active:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            group.join_timer = self.call_later(step, lambda: self._on_initial_delay(group, delay, remaining - step))
        else:
            group.initial_delay_active = False
            self.complete_join(group)

    def _on_join_timeout(self, group: GroupMetadata) -> None:
        if group.is_(_S.PREPARING_REBALANCE) and not group.initial_delay_active:
            self.complete_join(group)

    def maybe_complete_join(self, group: GroupMetadata) -> None:
        if group.is_(_S.PREPARING_REBALANCE) and not group.initial_delay_active and group.has_all_members_joined():
            self.complete_join(group)

    def complete_join(self, group: GroupMetadata) -> None:
        """End PreparingRebalance: drop dynamic members that did not rejoin, start the next
        generation and answer every parked JoinGroup."""
        _cancel(group.join_timer)
        group.join_timer = None
        group.initial_delay_active = False
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("removing member %s of group %s: it did not rejoin in time", member.member_id, group.group_id)
                group.remove(member.member_id)
        if group.is_(_S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete its rebalance: no member rejoined", group.group_id)
            group.join_timer = self.call_later(group.rebalance_timeout_ms, lambda: self._on_join_timeout(group))
            return
        group.init_next_generation(self.time_ms())
        if group.is_(_S.EMPTY):
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            self.spawn(self._store_empty_group(group))
            return
        log.info(
            "stabilized group %s generation %d with %d members (protocol %s)",
            group.group_id,
            group.generation_id,
            group.size,
            group.protocol_name,
        )
        for member in list(group.members.values()):
            result = self._current_generation(group, member.member_id, with_members=group.is_leader(member.member_id))
            member.answer_join(result)
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        group.sync_timer = self.call_later(group.rebalance_timeout_ms, lambda: self._on_sync_expired(group, generation))

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self.manager.store_group(group, {})
        if error is not ErrorCode.none:
            log.warning("writing the empty metadata of group %s failed: %s", group.group_id, error.name)

    def _clear_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        _cancel(group.sync_timer)
        group.sync_timer = None

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            _cancel(group.sync_timer)
            group.sync_timer = None

    def _on_sync_expired(self, group: GroupMetadata, generation: int) -> None:
        if generation != group.generation_id or group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE):
            return
        group.sync_timer = None
        if group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                removed = group.remove(member_id)
                if removed is not None:
                    removed.answer_sync(SyncGroupResult(ErrorCode.unknown_member_id))
            self.prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    # --- SyncGroup ---------------------------------------------------------------------------------

    def sync_group(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        """Handle a SyncGroup (status already validated). See SYNC_ANSWER for the per-state answer."""
        if group.is_(_S.DEAD):
            callback(SyncGroupResult(ErrorCode.coordinator_not_available))
            return
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is None and (
            (protocol_type is not None and group.protocol_type != protocol_type)
            or (protocol_name is not None and group.protocol_name != protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        answer = SYNC_ANSWER[group.state] if error is None else error
        if isinstance(answer, ErrorCode):
            callback(SyncGroupResult(answer))
            return
        member = group.get(member_id)
        if answer is Answer.PARK:
            member.awaiting_sync = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info(
                    "assignment received from leader %s of group %s for generation %d",
                    member_id,
                    group.group_id,
                    group.generation_id,
                )
                assignment = {m: assignments.get(m, b"") for m in group.members}
                self.spawn(self._persist_assignment(group, group.generation_id, assignment))
        else:
            self._remove_pending_sync_member(group, member_id)
            callback(SyncGroupResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name))
            self.schedule_heartbeat(group, member, member.session_timeout_ms)

    async def _persist_assignment(self, group: GroupMetadata, generation: int, assignment: dict[str, bytes]) -> None:
        error = await self.manager.store_group(group, assignment)
        if not (group.is_(_S.COMPLETING_REBALANCE) and generation == group.generation_id):
            return
        if error is not ErrorCode.none:
            self._reset_and_propagate_assignment_error(group, error)
            self.maybe_prepare_rebalance(group, f"error {error.name} storing the assignment")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.none)
        group.transition_to(_S.STABLE, self.time_ms())

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for member in list(group.members.values()):
            result = SyncGroupResult(
                error, member.assignment, group.protocol_type if ok else None, group.protocol_name if ok else None
            )
            if member.answer_sync(result):
                self.schedule_heartbeat(group, member, member.session_timeout_ms)

    # --- Heartbeat, LeaveGroup ----------------------------------------------------------------------

    def heartbeat(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is not None:
            return error
        answer = HEARTBEAT_ANSWER[group.state]
        if not group.is_(_S.EMPTY):
            self.schedule_heartbeat(group, group.get(member_id), group.get(member_id).session_timeout_ms)
        return ErrorCode.none if answer is Answer.ACCEPT else answer  # type: ignore[return-value]

    def leave_group(self, group: GroupMetadata, members: Sequence[LeavingMember]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, error per leaving member). A member may be named by instance id
        alone (empty member id: administrative removal)."""
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available, []
        errors: list[ErrorCode] = []
        for member_id, instance_id, reason in members:
            why = f"member {member_id or instance_id} left; client reason: {reason or 'not provided'}"
            if member_id == "":
                current = group.current_static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(ErrorCode.unknown_member_id)
                else:
                    self._remove_member_and_update_group(group, group.get(current), why)
                    errors.append(ErrorCode.none)
            elif member_id in group.pending_members:
                self.remove_pending_member(group, member_id)
                errors.append(ErrorCode.none)
            else:
                error = self.validate_current_member(group, member_id, instance_id)
                if error is None:
                    self._remove_member_and_update_group(group, group.get(member_id), why)
                    log.info("member %s left group %s", member_id, group.group_id)
                errors.append(error or ErrorCode.none)
        return ErrorCode.none, errors

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        member.answer_join(JoinGroupResult("", ErrorCode.unknown_member_id))
        member.answer_sync(SyncGroupResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(_S.PREPARING_REBALANCE):
            self.maybe_complete_join(group)

    def remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        self._cancel_pending_expiration(group, member_id)
        group.remove(member_id)
        if group.is_(_S.PREPARING_REBALANCE):
            self.maybe_complete_join(group)

    # --- timers ------------------------------------------------------------------------------------

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        """(Re)start ``member``'s session timer."""
        member.cancel_heartbeat()
        member.heartbeat_timer = self.call_later(timeout_ms, lambda: self._on_heartbeat_expired(group, member))

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_(_S.DEAD) or group.members.get(member.member_id) is not member:
            return
        if member.is_new or not (member.is_awaiting_join or member.is_awaiting_sync):
            log.info(
                "member %s of group %s has failed (session timeout), removing it", member.member_id, group.group_id
            )
            self._remove_member_and_update_group(group, member, f"member {member.member_id} session expired")

    def _schedule_pending_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        self._cancel_pending_expiration(group, member_id)
        group.pending_member_timers[member_id] = self.call_later(
            timeout_ms, lambda: self._on_pending_expired(group, member_id)
        )

    def _cancel_pending_expiration(self, group: GroupMetadata, member_id: str) -> None:
        _cancel(group.pending_member_timers.pop(member_id, None))

    def _on_pending_expired(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_member_timers.pop(member_id, None)
        if member_id in group.pending_members and not group.is_(_S.DEAD):
            log.info("pending member %s of group %s expired", member_id, group.group_id)
            self.remove_pending_member(group, member_id)

    # --- load / unload -----------------------------------------------------------------------------

    def on_group_loaded(self, group: GroupMetadata) -> None:
        """A group read from ``__consumer_offsets``: its members' sessions start now."""
        if group.size > self.config.max_size:
            self.prepare_rebalance(group, f"loaded group is over capacity ({self.config.max_size})")
        for member in list(group.members.values()):
            self.schedule_heartbeat(group, member, member.session_timeout_ms)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        """This broker no longer coordinates ``group``: it becomes Dead, parked requests get NOT_COORDINATOR."""
        previous = group.state
        group.transition_to(_S.DEAD, self.time_ms())
        _cancel(group.join_timer)
        _cancel(group.sync_timer)
        group.join_timer = group.sync_timer = None
        for timer in group.pending_member_timers.values():
            _cancel(timer)
        group.pending_member_timers.clear()
        for member in group.members.values():
            if previous is _S.PREPARING_REBALANCE:
                member.answer_join(JoinGroupResult(member.member_id, ErrorCode.not_coordinator))
            member.answer_sync(SyncGroupResult(ErrorCode.not_coordinator))
            member.cancel_heartbeat()
        group.pending_sync_members.clear()

    def on_group_deleted(self, group: GroupMetadata) -> None:
        """An Empty group was deleted (DeleteGroups) or expired: stop its timers."""
        _cancel(group.join_timer)
        _cancel(group.sync_timer)
        for timer in group.pending_member_timers.values():
            _cancel(timer)
        group.pending_member_timers.clear()


def _cancel(timer: Timer | None) -> None:
    if timer is not None:
        timer.cancel()
