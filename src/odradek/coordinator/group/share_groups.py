"""The group coordinator's share groups (KIP-932): what :class:`~.coordinator.GroupCoordinator`
holds (``coordinator.share_groups``) and calls for them, and what other broker code reads.

- :meth:`ShareGroups.heartbeat` answers ShareGroupHeartbeat (:mod:`.share_membership`) once the
  change it made is durable in ``__consumer_offsets`` (:mod:`.share_persistence`), then, off the
  request path, has the persister initialize the share-partitions the group subscribes to and
  records them as initialized (so they become assignable at the members' next heartbeats).
- :meth:`ShareGroups.describe` is ShareGroupDescribe's view; :meth:`ShareGroups.overviews`
  ListGroups' (type ``share``, states ``Empty``/``Stable``); :meth:`ShareGroups.delete`
  DeleteGroups' (NON_EMPTY_GROUP while it has members; with a persister the share-partitions'
  state is deleted first, a failure being the group's error; then its records are tombstoned).
- Other broker code finds a group's members and assignments through :meth:`ShareGroups.group`
  and :meth:`ShareGroups.member_assignment`, and learns of every member that left or expired
  through :attr:`ShareGroups.on_member_removed` ``(group_id, member_id)``, settable at any time.

A group id is one kind at a time: a share heartbeat or describe for a classic or consumer group
is GROUP_ID_NOT_FOUND ("Group ... is not a share group."), as Kafka's coordinator answers; what
the other kinds' requests answer for a share group is the coordinator's.

Writes: each group's records as last submitted are kept; a write carries only the records whose
bytes changed and tombstones for those that went. Without a topic lookup (the coordinator built
without topic ids) share groups stay in memory only. Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping

from odradek.coordinator.group.group import GroupOverview
from odradek.coordinator.group.manager import GroupMetadataManager, LoadedPartition
from odradek.coordinator.group.share_assignor import ShareAssignment
from odradek.coordinator.group.share_group import InitTopic, ShareGroup, ShareTopic
from odradek.coordinator.group.share_membership import (
    MemberRemoved,
    ShareGroupConfig,
    ShareGroupMembership,
    ShareHeartbeat,
    ShareHeartbeatResult,
    validate_heartbeat,
)
from odradek.coordinator.group.share_persistence import group_records, load_groups
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode
from odradek.protocol.records import Record
from odradek.share.state import UNINITIALIZED_START_OFFSET, Persister, SharePartitionKey, ShareStateError

__all__ = ["ShareGroups"]

log = logging.getLogger(__name__)

SHARE_PROTOCOL_TYPE = "share"


class ShareGroups:
    """See the module docstring. ``validate(group_id)``: the coordinator's status check (None when
    it may answer for the group); ``other_kind(group_id)``: whether the id is a classic or
    consumer group; ``persister`` None: share-partition state is neither initialized nor deleted
    (every subscribed partition is assignable at once); ``topic_id``: a topic's id by name (the
    metadata cache's; None: nothing is written to ``__consumer_offsets``)."""

    def __init__(
        self,
        config: ShareGroupConfig,
        manager: GroupMetadataManager,
        runtime: CoordinatorRuntime[LoadedPartition],
        validate: Callable[[str], ErrorCode | None],
        other_kind: Callable[[str], bool],
        persister: Persister | None = None,
        topic_id: Callable[[str], uuid.UUID | None] | None = None,
        on_member_removed: MemberRemoved | None = None,
    ) -> None:
        self.manager = manager
        self.runtime = runtime
        self.validate = validate
        self.other_kind = other_kind
        self.persister = persister
        self.topic_id = topic_id
        self.on_member_removed = on_member_removed
        """Told ``(group_id, member_id)`` of every member that left or whose session expired."""
        self.membership = ShareGroupMembership(
            config, runtime.call_later, self._changed_by_timer, self._member_removed, gated=persister is not None
        )
        self._written: dict[str, dict[bytes, bytes]] = {}

    @property
    def config(self) -> ShareGroupConfig:
        return self.membership.config

    def topic(self, name: str) -> ShareTopic | None:
        """A topic's id and partition count as the metadata knows them now."""
        topic_id = self.topic_id(name) if self.topic_id is not None else None
        count = self.runtime.metadata.partition_count(name)
        return None if topic_id is None or count is None else ShareTopic(topic_id, count)

    # --- what other broker code reads ------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup | None:
        """The share group of this id coordinated here (None: none, or another broker's)."""
        return self.membership.group(group_id)

    def member_assignment(self, group_id: str, member_id: str) -> ShareAssignment | None:
        """Topic id -> partitions the member consumes now; None for an unknown group or member."""
        group = self.membership.group(group_id)
        member = group.members.get(member_id) if group is not None else None
        return None if member is None else dict(member.assigned)

    def has_members(self, group_id: str) -> bool:
        return self.membership.has_members(group_id)

    def _member_removed(self, group_id: str, member_id: str) -> None:
        if self.on_member_removed is not None:
            self.on_member_removed(group_id, member_id)

    # --- ShareGroupHeartbeat ----------------------------------------------------------------------

    async def heartbeat(self, req: ShareHeartbeat, topics: Mapping[str, ShareTopic]) -> ShareHeartbeatResult:
        """ShareGroupHeartbeat; ``topics``: every topic the metadata knows, by name."""
        invalid = validate_heartbeat(req)
        if invalid is not None:
            return ShareHeartbeatResult(*invalid)
        error = self.validate(req.group_id)
        if error is not None:
            return ShareHeartbeatResult(error)
        if self.other_kind(req.group_id):
            return ShareHeartbeatResult(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a share group.")
        result = self.membership.heartbeat(req, topics)
        plan = self._plan_initialization(req.group_id, topics) if result.error is ErrorCode.none else None
        error = await self._persist(req.group_id)
        if error is not ErrorCode.none:
            return ShareHeartbeatResult(error)
        if plan is not None:
            self.runtime.spawn(self._initialize(req.group_id, *plan))
        return result

    def _plan_initialization(
        self, group_id: str, topics: Mapping[str, ShareTopic]
    ) -> tuple[int, dict[uuid.UUID, InitTopic]] | None:
        """Mark the subscribed partitions without share state initializing; (state epoch, them)."""
        group = self.membership.group(group_id)
        if self.persister is None or group is None or not group.members:
            return None
        missing = group.uninitialized(topics, self.runtime.time_ms(), self.config.initialize_retry_interval_ms)
        if not missing:
            return None
        group.mark_initializing(missing)
        return group.group_epoch, missing

    async def _initialize(self, group_id: str, state_epoch: int, topics: dict[uuid.UUID, InitTopic]) -> None:
        """InitializeShareGroupState for each partition (start offset -1: placed by the first
        fetch); record what succeeded as initialized and drop what failed from initializing."""
        persister = self.persister
        assert persister is not None
        keys = [(tid, p) for tid, t in sorted(topics.items()) for p in sorted(t.partitions)]
        results = await asyncio.gather(
            *(
                persister.initialize_state(SharePartitionKey(group_id, tid, p), state_epoch, UNINITIALIZED_START_OFFSET)
                for tid, p in keys
            ),
            return_exceptions=True,
        )
        done: dict[uuid.UUID, set[int]] = {}
        failed: dict[uuid.UUID, set[int]] = {}
        for (tid, p), outcome in zip(keys, results, strict=True):
            if isinstance(outcome, BaseException):
                log.warning("share group %s: initializing the state of %s-%d failed: %r", group_id, tid, p, outcome)
                failed.setdefault(tid, set()).add(p)
            else:
                done.setdefault(tid, set()).add(p)
        group = self.membership.group(group_id)
        if group is None:
            return  # deleted or no longer coordinated here
        group.mark_initialized({tid: InitTopic(topics[tid].name, frozenset(ps)) for tid, ps in done.items()})
        group.unmark_initializing({tid: frozenset(ps) for tid, ps in failed.items()})
        await self._persist(group_id)

    def _changed_by_timer(self, group_id: str) -> None:
        self.runtime.spawn(self._persist_quietly(group_id))

    async def persist(self, group_id: str) -> ErrorCode:
        """Write the group's changes made outside a heartbeat (its offsets altered or deleted)."""
        return await self._persist(group_id)

    async def _persist_quietly(self, group_id: str) -> None:
        await self._persist(group_id)

    async def _persist(self, group_id: str) -> ErrorCode:
        """Write what changed in the group since its last write (tombstones for records that went;
        all of them once the group is gone). The records submitted become the new base at once."""
        if self.topic_id is None:
            return ErrorCode.none
        group = self.membership.group(group_id)
        new = group_records(group) if group is not None else {}
        old = self._written.get(group_id, {})
        changed = [Record(k, v) for k, v in new.items() if old.get(k) != v]
        changed += [Record(k, None) for k in old if k not in new]
        if not changed:
            return ErrorCode.none
        if new:
            self._written[group_id] = new
        else:
            self._written.pop(group_id, None)
        return await self.manager.write_records(group_id, changed)

    # --- describe, list, delete -------------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[ErrorCode, str | None, ShareGroup | None]:
        """ShareGroupDescribe's view of one group: (error, message, group)."""
        error = self.validate(group_id)
        if error is not None:
            return error, None, None
        group = self.membership.group(group_id)
        if group is not None:
            return ErrorCode.none, None, group
        if self.other_kind(group_id):
            return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.", None
        return ErrorCode.group_id_not_found, f"Group {group_id} not found.", None

    def overviews(self, states: Iterable[str] = ()) -> list[GroupOverview]:
        """ListGroups' entries, filtered by state names (lower case; empty: every state)."""
        wanted = set(states)
        return [
            GroupOverview(g.group_id, SHARE_PROTOCOL_TYPE, g.state, SHARE_PROTOCOL_TYPE)
            for g in self.membership.groups.values()
            if not wanted or g.state.lower() in wanted
        ]

    async def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group (the coordinator checked its status): NON_EMPTY_GROUP
        with members; the persister's error if deleting a share-partition's state failed (the
        group stays, its topics marked deleting); else NONE once the tombstones are durable."""
        group = self.membership.group(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        if self.persister is not None:
            doomed = group.mark_deleting()
            if doomed:
                error = await self._persist(group_id)
                if error is not ErrorCode.none:
                    return error
                error = await self._delete_state(group_id, doomed)
                if error is not ErrorCode.none:
                    return error
        self.membership.delete(group_id)
        log.info("share group %s deleted", group_id)
        return await self._persist(group_id)

    async def _delete_state(self, group_id: str, topics: Mapping[uuid.UUID, tuple[str, frozenset[int]]]) -> ErrorCode:
        """DeleteShareGroupState for every share-partition of ``topics`` (a topic known only as
        deleting: each partition the metadata gives it now); the first error, or NONE."""
        persister = self.persister
        assert persister is not None
        keys = []
        for tid, (name, partitions) in sorted(topics.items()):
            if not partitions:
                now = self.topic(name)
                partitions = frozenset(range(now.partitions)) if now is not None and now.topic_id == tid else partitions
            keys += [SharePartitionKey(group_id, tid, p) for p in sorted(partitions)]
        results = await asyncio.gather(*(persister.delete_state(k) for k in keys), return_exceptions=True)
        for key, outcome in zip(keys, results, strict=True):
            if isinstance(outcome, ShareStateError):
                log.warning("share group %s: deleting the state of %s failed: %s", group_id, key, outcome)
                return outcome.error_code
            if isinstance(outcome, BaseException):
                log.error("share group %s: deleting the state of %s failed", group_id, key, exc_info=outcome)
                return ErrorCode.unknown_server_error
        return ErrorCode.none

    # --- loading -------------------------------------------------------------------------------

    def install(self, raw: Mapping[bytes, bytes | None], partition: int) -> None:
        """Take over the share groups of a loaded ``__consumer_offsets`` partition."""
        if not raw or self.topic_id is None:
            return
        groups = load_groups(raw, self.topic, self.runtime.time_ms())
        for group_id, (group, written) in groups.items():
            self._written[group_id] = written
            self.membership.install(group)
        log.info("loaded %d share groups from __consumer_offsets-%d", len(groups), partition)

    def unload(self, owns: Callable[[str], bool]) -> None:
        """Forget the groups for which ``owns(group_id)`` (their partition was unloaded)."""
        for group_id in self.membership.unload(owns):
            self._written.pop(group_id, None)
