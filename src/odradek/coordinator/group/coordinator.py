"""The group coordinator: the broker-side front door for consumer groups and committed offsets.

One per broker (``Broker.group_coordinator``), built by the broker's start-up from a
:class:`GroupCoordinatorDeps`. It coordinates the groups whose ``__consumer_offsets`` partition
(``abs(java_hash(group)) % partitions``) this broker leads. Each request is first checked
(Kafka's ``validateGroupStatus``):

1. the group id: INVALID_GROUP_ID if empty (allowed for OffsetCommit, OffsetFetch,
   DescribeGroups and DeleteGroups, as Kafka allows);
2. COORDINATOR_NOT_AVAILABLE before :meth:`startup` / after :meth:`shutdown`;
3. COORDINATOR_LOAD_IN_PROGRESS while the group's partition is being loaded;
4. NOT_COORDINATOR if this broker does not lead the partition.

Ownership, loading, writes, FindCoordinator (creating ``__consumer_offsets`` on first use,
``offsets.topic.*`` settings, compacted) and the background tasks are the
:class:`~odradek.coordinator.runtime.CoordinatorRuntime`'s; the broker tells it about leadership
through :meth:`on_become_leader` / :meth:`on_become_follower`. Loading replays the partition
(see :mod:`.manager`).

Membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) is :mod:`.membership`; the groups of
the next-generation protocol (KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe) are
:mod:`.consumer_membership`'s, beside the classic ones under the same ids. A consumer group also
serves classic members (:mod:`.consumer_classic`: their JoinGroup, SyncGroup, Heartbeat and
LeaveGroup), and a group converts between the kinds online (:mod:`.migration`, under
``group.consumer.migration.policy``); its committed offsets are kept the same way for both kinds.
Share groups (KIP-932) are
:attr:`GroupCoordinator.share_groups` (:mod:`.share_groups`): a share group id is no other kind
while it exists (JoinGroup: INCONSISTENT_GROUP_PROTOCOL; ConsumerGroupHeartbeat, OffsetCommit,
TxnOffsetCommit, OffsetDelete: GROUP_ID_NOT_FOUND; DescribeGroups: GROUP_ID_NOT_FOUND from v6, Dead
before), and has no committed offsets here. Offsets and the admin operations are here.

Runs on the broker's event loop; only that loop may call.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from odradek.coordinator.group.config import GroupCoordinatorConfig
from odradek.coordinator.group.consumer_classic import ClassicMembers
from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.consumer_membership import (
    ConsumerGroupConfig,
    ConsumerGroupMembership,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
)
from odradek.coordinator.group.consumer_persistence import load_groups
from odradek.coordinator.group.group import GroupMetadata, GroupOverview, GroupSummary
from odradek.coordinator.group.group_config import GroupConfigs
from odradek.coordinator.group.manager import GroupMetadataManager, LoadedPartition, OffsetFetchEntry
from odradek.coordinator.group.member import JoinGroupResult, JoinRequest, SyncGroupResult
from odradek.coordinator.group.membership import GroupMembership, LeavingMember
from odradek.coordinator.group.migration import GroupMigration
from odradek.coordinator.group.schemas import GROUP_METADATA_TOPIC, OffsetAndMetadata
from odradek.coordinator.group.share_groups import ShareGroups
from odradek.coordinator.group.share_membership import MemberRemoved, ShareGroupConfig
from odradek.coordinator.group.state import COMMIT_ANSWER, GroupState, parse_state
from odradek.coordinator.runtime import CoordinatorRuntime, InternalTopic, RuntimeDeps
from odradek.errors import ErrorCode
from odradek.share.state import Persister
from odradek.storage.topic_partition import TopicPartition

__all__ = ["GroupCoordinator", "GroupCoordinatorDeps"]

log = logging.getLogger(__name__)

_S = GroupState
_DEAD_SUMMARY = GroupSummary(_S.DEAD.value, "", "", ())
_NO_SUMMARY = GroupSummary("", "", "", ())


@dataclass(frozen=True, slots=True)
class GroupCoordinatorDeps:
    """What the group coordinator uses: its settings and its runtime's dependencies (the
    ``__consumer_offsets`` partitions on this broker, the metadata view, topic creation, clock)."""

    config: GroupCoordinatorConfig
    runtime: RuntimeDeps
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)
    """The ``group.consumer.*`` settings (KIP-848 groups)."""
    topic_ids: TopicIds | None = None
    """Topic names and ids (the metadata cache's): consumer groups are written to
    ``__consumer_offsets`` with them; None keeps consumer and share groups in memory only."""
    group_configs: GroupConfigs | None = None
    """Each group's configs (``consumer.session.timeout.ms``, ...); None: the broker's for every group."""
    share: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    """The ``group.share.*`` settings (KIP-932 groups)."""
    share_persister: Persister | None = None
    """Initializes and deletes share-partition state; None: share groups skip both."""
    share_member_removed: MemberRemoved | None = None
    """Told ``(group_id, member_id)`` when a share group's member left or expired."""


class TopicIds(Protocol):
    """Topic name <-> id, as the broker's metadata cache knows them."""

    def topic_id(self, name: str) -> uuid.UUID | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...


class GroupCoordinator:
    """See the module docstring."""

    def __init__(self, deps: GroupCoordinatorDeps) -> None:
        config = deps.config
        self.config = config
        self.runtime: CoordinatorRuntime[LoadedPartition] = CoordinatorRuntime(
            "group coordinator",
            InternalTopic(
                GROUP_METADATA_TOPIC,
                config.offsets_partitions,
                config.offsets_replication,
                lambda _live: config.offsets_topic_configs(),
            ),
            deps.runtime,
            self,
        )
        self.time_ms = self.runtime.time_ms
        self.manager = GroupMetadataManager(config, self.runtime)
        self.membership = GroupMembership(
            config, self.manager, self.runtime.call_later, self.time_ms, self.runtime.spawn
        )
        self.group_configs = deps.group_configs
        self.consumer_groups = ConsumerGroupMembership(
            deps.consumer,
            self.runtime.call_later,
            lambda group_id: self.migration.persist_later(group_id),
            None if deps.group_configs is None else deps.group_configs.get,
            self.time_ms,
        )
        self.topic_ids = deps.topic_ids
        count = self.runtime.metadata.partition_count
        topic_id = None if deps.topic_ids is None else deps.topic_ids.topic_id
        self.migration = GroupMigration(
            self.consumer_groups, self.manager, self.membership, config.max_size, topic_id, count, self.runtime.spawn
        )
        self._persist = self.migration.persist
        self.classic_members = ClassicMembers(self.consumer_groups, count, self._persist, self.migration.downgrade)
        self.share_groups = ShareGroups(
            deps.share,
            self.manager,
            self.runtime,
            self.validate_group_status,
            self._is_classic_or_consumer,
            deps.share_persister,
            deps.topic_ids.topic_id if deps.topic_ids is not None else None,
            deps.share_member_removed,
        )
        """The share groups (KIP-932) of this coordinator: see :mod:`.share_groups`."""

    @property
    def active(self) -> bool:
        return self.runtime.active

    # --- lifecycle and leadership --------------------------------------------------------------------

    async def startup(self) -> None:
        """Begin answering; load every ``__consumer_offsets`` partition this broker leads."""
        self.runtime.start()
        self.runtime.every(self.config.retention_check_ms, self.expire_offsets, "offset expiry")
        log.info("group coordinator started")

    async def shutdown(self) -> None:
        """Stop answering; parked requests get NOT_COORDINATOR; background tasks end."""
        await self.runtime.stop()

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        """This broker now leads ``tp``: load it if it is a ``__consumer_offsets`` partition."""
        self.runtime.on_become_leader(tp, leader_epoch)

    def on_become_follower(self, tp: TopicPartition) -> None:
        """This broker no longer leads ``tp``: unload its groups."""
        self.runtime.on_become_follower(tp)

    # the runtime's PartitionLoader

    async def replay(self, partition: int, epoch: int) -> LoadedPartition | None:
        return await self.manager.replay(partition, epoch)

    def install(self, partition: int, epoch: int, loaded: LoadedPartition) -> None:
        self.manager.install(partition, epoch, loaded, self.membership.on_group_loaded)
        if loaded.consumer and self.topic_ids is not None:
            groups = load_groups(
                loaded.consumer,
                self.topic_ids.topic_name,
                self.runtime.metadata.partition_count,
                self.consumer_groups.config.assignors[0],
            )
            for group_id, (group, written) in groups.items():
                self.migration.written[group_id] = written
                self.consumer_groups.install(group)
                if self.manager.get_group(group_id) is None:
                    self.manager.add_group(GroupMetadata(group_id, _S.EMPTY, self.time_ms()))
            log.info("loaded %d consumer groups from __consumer_offsets-%d", len(groups), partition)
        self.share_groups.install(loaded.share, partition)

    def unload(self, partition: int) -> None:
        self.manager.unload_partition(partition, self.membership.on_group_unloaded)
        for group_id in self.consumer_groups.unload(lambda g: self.manager.partition_for(g) == partition):
            self.migration.forget(group_id)
        self.share_groups.unload(lambda g: self.manager.partition_for(g) == partition)

    def _is_classic_or_consumer(self, group_id: str) -> bool:
        classic = self.manager.get_group(group_id)
        return self.consumer_groups.group(group_id) is not None or (classic is not None and not classic.is_(_S.DEAD))

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets now (as the periodic task does); returns how many were removed."""
        before = set(self.manager.groups)
        removed = await self.manager.expire_offsets(now_ms, keep=self.consumer_groups.has_members)
        for group_id in before - set(self.manager.groups):
            log.info("group %s expired and was removed", group_id)
        return removed

    def validate_group_status(self, group_id: str | None, allow_empty_id: bool = False) -> ErrorCode | None:
        if group_id is None or (group_id == "" and not allow_empty_id):
            return ErrorCode.invalid_group_id
        error = self.runtime.status(self.manager.partition_for(group_id))
        return None if error is ErrorCode.none else error

    # --- FindCoordinator -----------------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the coordinator of group ``key``; creates ``__consumer_offsets``
        if missing. COORDINATOR_NOT_AVAILABLE while it has no leader."""
        return await self.runtime.find_coordinator(key)

    # --- membership ----------------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinGroupResult:
        """JoinGroup; returns when the join is answered (possibly after a whole rebalance)."""
        error = self.validate_group_status(req.group_id)
        config = self.config
        if (
            error is None
            and not config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms
        ):
            error = ErrorCode.invalid_session_timeout
        if error is None and self.share_groups.group(req.group_id) is not None:
            error = ErrorCode.inconsistent_group_protocol
        elif error is None and self.consumer_groups.has_members(req.group_id):
            return await self.classic_members.join(req)  # a classic member of a consumer group
        elif error is None and self.consumer_groups.delete(req.group_id):
            # an empty consumer group becomes a classic one (its offsets stay): its records go
            await self._persist(req.group_id)
        group = None
        if error is None:
            group = self.manager.get_or_maybe_create_group(req.group_id, req.member_id == "")
        if group is None:
            return JoinGroupResult(req.member_id, error or ErrorCode.unknown_member_id)
        future: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        self.membership.join_group(group, req, lambda r: None if future.done() else future.set_result(r))
        return await future

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: Mapping[str, bytes],
    ) -> SyncGroupResult:
        """SyncGroup; returns when answered (followers wait for the leader's assignment)."""
        error = self.validate_group_status(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        if error is not None:
            return SyncGroupResult(error)
        if self.consumer_groups.group(group_id) is not None:
            return self.classic_members.sync(
                group_id, generation_id, member_id, protocol_type, protocol_name, group_instance_id
            )
        group = self.manager.get_group(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.unknown_member_id)
        future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        self.membership.sync_group(
            group,
            generation_id,
            member_id,
            protocol_type,
            protocol_name,
            group_instance_id,
            dict(assignments),
            lambda r: None if future.done() else future.set_result(r),
        )
        return await future

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self.validate_group_status(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none
        if error is not None:
            return error
        if self.consumer_groups.group(group_id) is not None:
            return self.classic_members.heartbeat(group_id, member_id, group_instance_id, generation_id)
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return self.membership.heartbeat(group, member_id, group_instance_id, generation_id)

    def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, per-member errors; empty when the top-level error is set)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, []
        if self.consumer_groups.group(group_id) is not None:
            answer = self.classic_members.leave(group_id, members)
            self.migration.persist_later(group_id)
            return answer
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in members]
        return self.membership.leave_group(group, members)

    # --- offsets -------------------------------------------------------------------------------------

    # --- KIP-848 consumer groups --------------------------------------------------------------------

    async def consumer_group_heartbeat(
        self, req: ConsumerHeartbeat, topics: Mapping[str, int]
    ) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat (see :mod:`.consumer_membership`); ``topics``: every topic's
        partition count (the metadata cache's). Answered once the change it made to the group is
        durable in ``__consumer_offsets`` (its error otherwise)."""
        error = self.validate_group_status(req.group_id)
        if error is not None:
            return ConsumerHeartbeatResult(error)
        classic = self.manager.get_group(req.group_id)
        if self.share_groups.group(req.group_id) is not None:
            return ConsumerHeartbeatResult(
                ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group."
            )
        if classic is not None and classic.members and (refused := self.migration.upgrade(req, classic)) is not None:
            return refused
        result = self.consumer_groups.heartbeat(req, topics)
        if classic is None and self.consumer_groups.group(req.group_id) is not None:
            # the committed offsets of a consumer group are kept as a classic group's
            self.manager.add_group(GroupMetadata(req.group_id, _S.EMPTY, self.time_ms()))
        error = await self._persist(req.group_id)
        return result if error is ErrorCode.none else ConsumerHeartbeatResult(error)

    def consumer_group(self, group_id: str) -> tuple[ErrorCode, ConsumerGroup | None]:
        """ConsumerGroupDescribe's view: (error, group). GROUP_ID_NOT_FOUND for an unknown group or
        a classic one."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, None
        group = self.consumer_groups.group(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, None
        return ErrorCode.none, group

    def _validate_consumer_commit(self, group: ConsumerGroup, member_epoch: int, member_id: str) -> ErrorCode | None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: a simple commit (epoch < 0) only while the
        group has no member; else the member's current epoch (STALE_MEMBER_EPOCH otherwise)."""
        if member_epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:  # a classic member's epoch is its generation
            return ErrorCode.stale_member_epoch if member.classic is None else ErrorCode.illegal_generation
        return None

    def _validate_offset_commit(
        self, group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        consumer = self.consumer_groups.group(group.group_id)
        if consumer is not None:
            return self._validate_consumer_commit(consumer, generation_id, member_id)
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_(_S.EMPTY):
            return None
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = self.membership.validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.illegal_generation
            return error
        if not group.is_(_S.EMPTY):
            return ErrorCode.unknown_member_id
        return None

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit to ``__consumer_offsets``: an error per partition, NONE once durable.
        Generation -1 with no member id is a "simple" commit, allowed while the group is Empty
        (creating it if needed)."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is None and self.share_groups.group(group_id) is not None:
            error = ErrorCode.group_id_not_found  # a share group keeps no offsets here
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, ErrorCode.illegal_generation)
            log.info("creating simple consumer group %s by an offset commit", group_id)
            group = self.manager.add_group(GroupMetadata(group_id, _S.EMPTY, self.time_ms()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is None and self.consumer_groups.group(group_id) is not None:
            return await self.manager.store_offsets(group, offsets)
        answer = COMMIT_ANSWER[group.state] if error is None else error
        if isinstance(answer, ErrorCode):
            return dict.fromkeys(offsets, answer)
        if group.has(member_id):
            member = group.get(member_id)
            self.membership.schedule_heartbeat(group, member, member.session_timeout_ms)
        return await self.manager.store_offsets(group, offsets)

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        member_id: str = "",
        generation_id: int = -1,
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets, written with the producer's transaction, become the
        group's when its COMMIT marker is written (:mod:`odradek.coordinator.group.txn_offsets`).
        The group is created (Empty) if needed, as for a simple commit. A consumer group's
        (KIP-848) member, named by v3+'s ``member_id`` and ``generation_id``, must be current
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), as Kafka's ``validateOffsetCommit``."""
        error = self.validate_group_status(group_id)
        if error is None and self.share_groups.group(group_id) is not None:
            error = ErrorCode.group_id_not_found
        if error is None:
            consumer = self.consumer_groups.group(group_id)
            if consumer is not None and generation_id >= 0:
                error = self._validate_consumer_commit(consumer, generation_id, member_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_or_maybe_create_group(group_id, create=True)
        assert group is not None
        return await self.manager.txn_offsets.store(group, producer_id, producer_epoch, offsets)

    async def handle_txn_completion(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        """WriteTxnMarkers wrote the producer's marker on these ``__consumer_offsets`` partitions."""
        self.manager.txn_offsets.complete(producer_id, partitions, commit)

    def fetch_offsets(
        self,
        group_id: str,
        require_stable: bool,
        partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchEntry]]:
        """(group error, offsets). ``partitions`` None: every committed partition. A member of a
        consumer group (OffsetFetch v9, ``member_epoch`` >= 0) must be one with that epoch
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), as Kafka's ``validateOffsetFetch``."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        consumer = self.consumer_groups.group(group_id)
        if consumer is not None and member_epoch >= 0:
            member = consumer.members.get(member_id or "")
            if member is None:
                return ErrorCode.unknown_member_id, {}
            if member.member_epoch != member_epoch:
                return ErrorCode.stale_member_epoch, {}
        return ErrorCode.none, self.manager.get_offsets(group_id, require_stable, partitions)

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: any partition of an Empty group; of an active consumer group only
        partitions of topics it does not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC otherwise)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(_S.DEAD):  # a share group too: it has no offsets here
            return ErrorCode.group_id_not_found, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_(_S.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp.topic)]
            results.update(
                (tp, ErrorCode.group_subscribed_to_topic) for tp in partitions if group.is_subscribed_to(tp.topic)
            )
        else:
            return ErrorCode.non_empty_group, {}
        if eligible:
            wanted = set(eligible)
            await self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(wanted))
            results.update((tp, ErrorCode.none) for tp in eligible)
        if group.is_(_S.DEAD):
            self.membership.on_group_deleted(group)
        return ErrorCode.none, results

    # --- admin ---------------------------------------------------------------------------------------

    def describe_group(self, group_id: str, api_version: int) -> tuple[ErrorCode, str | None, GroupSummary]:
        """(error, error message, summary). An unknown group is Dead with NONE before v6,
        GROUP_ID_NOT_FOUND from v6."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, None, _NO_SUMMARY
        group = self.manager.get_group(group_id)
        if self.consumer_groups.group(group_id) is not None:
            return ErrorCode.group_id_not_found, f"Group {group_id} is not a classic group.", _DEAD_SUMMARY
        if self.share_groups.group(group_id) is not None and api_version < 6:
            return ErrorCode.none, None, _DEAD_SUMMARY  # as Kafka answers a group of another kind
        if self.share_groups.group(group_id) is not None:
            return ErrorCode.group_id_not_found, f"Group {group_id} is not a classic group.", _DEAD_SUMMARY
        if group is None:
            if api_version >= 6:
                return ErrorCode.group_id_not_found, f"Group {group_id} not found.", _DEAD_SUMMARY
            return ErrorCode.none, None, _DEAD_SUMMARY
        return ErrorCode.none, None, group.summary()

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """Groups of this broker, filtered by state names and group types (case-insensitive;
        ``classic``, ``consumer`` or ``share``). COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if not self.runtime.active:
            return ErrorCode.coordinator_not_available, []
        state_names = {name.lower() for name in states}
        wanted_states = {s for s in (parse_state(name) for name in states)}
        wanted_types = {t.lower() for t in types}
        error = ErrorCode.coordinator_load_in_progress if self.manager.is_loading else ErrorCode.none
        consumer = self.consumer_groups.groups
        groups: list[GroupOverview] = []
        if not wanted_types or "classic" in wanted_types:
            groups += [
                g.overview()
                for g in self.manager.current_groups()
                if g.group_id not in consumer and (not wanted_states or g.state in wanted_states)
            ]
        if not wanted_types or "consumer" in wanted_types:
            groups += [
                GroupOverview(g.group_id, "consumer", g.state, "consumer")
                for g in consumer.values()
                if not state_names or g.state.lower() in state_names
            ]
        if not wanted_types or "share" in wanted_types:
            groups += self.share_groups.overviews(state_names)
        return error, groups

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: Empty groups go (NONE), others get NON_EMPTY_GROUP, unknown ones
        GROUP_ID_NOT_FOUND; share groups as :meth:`.ShareGroups.delete` answers."""
        results: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            if self.share_groups.group(group_id) is not None:
                results[group_id] = await self.share_groups.delete(group_id)
                continue
            group = self.manager.get_group(group_id)
            if self.consumer_groups.has_members(group_id):
                results[group_id] = ErrorCode.non_empty_group
            elif group is None or group.is_(_S.DEAD):
                results[group_id] = ErrorCode.group_id_not_found
            elif group.is_(_S.EMPTY):
                if self.consumer_groups.delete(group_id):
                    await self._persist(group_id)  # tombstones for the group's records
                group.transition_to(_S.DEAD, self.time_ms())
                self.membership.on_group_deleted(group)
                eligible.append(group)
            else:
                results[group_id] = ErrorCode.non_empty_group
        if eligible:
            removed = await self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
            log.info("deleted groups %s (%d offsets)", [g.group_id for g in eligible], removed)
            results.update((g.group_id, ErrorCode.none) for g in eligible)
        return results

    def group(self, group_id: str) -> GroupMetadata | None:
        """The cached group (tests and tools)."""
        return self.manager.get_group(group_id)
