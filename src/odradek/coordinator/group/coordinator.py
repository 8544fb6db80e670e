"""The group coordinator: the broker-side front door for consumer groups and committed offsets.

One per broker, registered as ``broker.extensions["group_coordinator"]``. It coordinates the
groups whose ``__consumer_offsets`` partition (``abs(java_hash(group)) % partitions``) this broker
leads. Each request is first checked (Kafka's ``validateGroupStatus``):

1. the group id: INVALID_GROUP_ID if empty (allowed for OffsetCommit, OffsetFetch,
   DescribeGroups and DeleteGroups, as Kafka allows);
2. COORDINATOR_NOT_AVAILABLE before :meth:`startup` / after :meth:`shutdown`;
3. COORDINATOR_LOAD_IN_PROGRESS while the group's partition is being loaded;
4. NOT_COORDINATOR if this broker does not lead the partition.

Ownership follows the partition leadership the replica manager reports: the broker calls
:meth:`on_become_leader` / :meth:`on_become_follower` on LeaderAndIsr and StopReplica, and
every request re-checks it, so a partition whose leadership arrived without the hook is loaded
on first use. Loading replays the partition (see :mod:`.manager`).

Membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) is :mod:`.membership`; offsets and the
admin operations are here. ``find_coordinator(key)`` answers FindCoordinator for groups,
creating ``__consumer_offsets`` on first use (``offsets.topic.*`` settings, compacted).

Runs on the broker's event loop; only that loop may call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

from odradek.coordinator.group.config import GroupCoordinatorConfig
from odradek.coordinator.group.group import GroupMetadata, GroupOverview, GroupSummary
from odradek.coordinator.group.log_io import GROUP_METADATA_TOPIC, OffsetsLog, ReplicaOffsetsLog
from odradek.coordinator.group.manager import GroupMetadataManager, OffsetFetchEntry
from odradek.coordinator.group.member import JoinGroupResult, JoinRequest, SyncGroupResult
from odradek.coordinator.group.membership import GroupMembership, LeavingMember, Timer
from odradek.coordinator.group.schemas import OffsetAndMetadata
from odradek.coordinator.group.state import COMMIT_ANSWER, GroupState, parse_state
from odradek.errors import ErrorCode, KafkaError
from odradek.storage.topic_partition import TopicPartition

__all__ = ["GroupCoordinator"]

log = logging.getLogger(__name__)

_S = GroupState
_DEAD_SUMMARY = GroupSummary(_S.DEAD.value, "", "", ())
_NO_SUMMARY = GroupSummary("", "", "", ())


class GroupCoordinator:
    """See the module docstring. With a ``broker`` everything is taken from it; unit tests pass
    ``config``, ``offsets_log``, ``leader_epoch`` (partition -> leader epoch, None if not led),
    ``time_ms`` and ``call_later`` instead."""

    def __init__(
        self,
        broker: Any = None,
        *,
        config: GroupCoordinatorConfig | None = None,
        offsets_log: OffsetsLog | None = None,
        leader_epoch: Callable[[int], int | None] | None = None,
        time_ms: Callable[[], int] | None = None,
        call_later: Callable[[int, Callable[[], None]], Timer] | None = None,
    ) -> None:
        self.broker = broker
        if config is None:
            config = (
                GroupCoordinatorConfig.from_broker(broker.config) if broker is not None else GroupCoordinatorConfig()
            )
        self.config = config
        if offsets_log is None:
            offsets_log = ReplicaOffsetsLog(lambda: broker.replica_manager)
        self._leader_epoch = leader_epoch or self._replica_leader_epoch
        self.time_ms = time_ms or (lambda: int(time.time() * 1000))
        self._call_later = call_later
        self.manager = GroupMetadataManager(config, offsets_log, self.time_ms, self._partition_count)
        self.membership = GroupMembership(config, self.manager, self.call_later, self.time_ms, self._spawn)
        self.active = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._create_lock = asyncio.Lock()

    EXTENSION_NAME = "group_coordinator"
    """The key in ``broker.extensions``."""

    @classmethod
    def of(cls, broker: Any) -> GroupCoordinator | None:
        """The coordinator registered on ``broker``, or None."""
        found = broker.extensions.get(cls.EXTENSION_NAME)
        return found if isinstance(found, cls) else None

    # --- plumbing ----------------------------------------------------------------------------------

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> Timer:
        if self._call_later is not None:
            return self._call_later(delay_ms, fn)
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, fn)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", exc_info=task.exception())

    def _partition_count(self) -> int:
        if self.broker is not None:
            meta = self.broker.metadata_cache.topic(GROUP_METADATA_TOPIC)
            if meta is not None and meta.partitions:
                return len(meta.partitions)
        return self.config.offsets_partitions

    def _replica_leader_epoch(self, partition: int) -> int | None:
        replica_manager = getattr(self.broker, "replica_manager", None)
        if replica_manager is None:
            return None
        p = replica_manager.partitions.get(TopicPartition(GROUP_METADATA_TOPIC, partition))
        return int(p.leader_epoch) if p is not None and p.is_leader else None

    # --- lifecycle and leadership --------------------------------------------------------------------

    async def startup(self) -> None:
        """Begin answering; load every ``__consumer_offsets`` partition this broker leads."""
        self.active = True
        self._spawn(self._expiry_loop())
        for partition in range(self._partition_count()):
            self._check_ownership(partition)
        log.info("group coordinator started")

    async def shutdown(self) -> None:
        """Stop answering; parked requests get NOT_COORDINATOR; background tasks end."""
        self.active = False
        for partition in list(self.manager.owned) + list(self.manager.loading):
            self.manager.unload_partition(partition, self.membership.on_group_unloaded)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    def on_become_leader(self, tp: TopicPartition) -> None:
        """This broker now leads ``tp``: load it if it is a ``__consumer_offsets`` partition."""
        if tp.topic == GROUP_METADATA_TOPIC and self.active:
            self._check_ownership(tp.partition)

    def on_become_follower(self, tp: TopicPartition) -> None:
        """This broker no longer leads ``tp``: unload its groups."""
        if tp.topic == GROUP_METADATA_TOPIC:
            self.manager.unload_partition(tp.partition, self.membership.on_group_unloaded)

    def _check_ownership(self, partition: int) -> ErrorCode | None:
        """Reconcile ``partition`` with its leadership; the status error for its groups, if any."""
        epoch = self._leader_epoch(partition)
        manager = self.manager
        if epoch is None:
            if partition in manager.owned or partition in manager.loading:
                manager.unload_partition(partition, self.membership.on_group_unloaded)
            return ErrorCode.not_coordinator
        if manager.owned.get(partition) == epoch:
            return None
        if manager.loading.get(partition) != epoch:
            if partition in manager.owned:
                manager.unload_partition(partition, self.membership.on_group_unloaded)
            if manager.begin_load(partition, epoch):
                self._spawn(manager.load_partition(partition, epoch, self.membership.on_group_loaded))
        return ErrorCode.coordinator_load_in_progress

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.retention_check_ms / 1000.0)
            try:
                await self.expire_offsets()
            except Exception:
                log.exception("offset expiry failed")

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets now (as the periodic task does); returns how many were removed."""
        before = set(self.manager.groups)
        removed = await self.manager.expire_offsets(now_ms)
        for group_id in before - set(self.manager.groups):
            log.info("group %s expired and was removed", group_id)
        return removed

    def validate_group_status(self, group_id: str | None, allow_empty_id: bool = False) -> ErrorCode | None:
        if group_id is None or (group_id == "" and not allow_empty_id):
            return ErrorCode.invalid_group_id
        if not self.active:
            return ErrorCode.coordinator_not_available
        return self._check_ownership(self.manager.partition_for(group_id))

    # --- FindCoordinator -----------------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the coordinator of group ``key``; creates ``__consumer_offsets``
        if missing. COORDINATOR_NOT_AVAILABLE while it has no leader."""
        if not self.active or self.broker is None:
            return ErrorCode.coordinator_not_available, -1
        cache = self.broker.metadata_cache
        meta = cache.topic(GROUP_METADATA_TOPIC)
        if meta is None:
            async with self._create_lock:
                if cache.topic(GROUP_METADATA_TOPIC) is None:
                    try:
                        await self.broker.admin.create_internal_topic(
                            GROUP_METADATA_TOPIC,
                            self.config.offsets_partitions,
                            self.config.offsets_replication,
                            self.config.offsets_topic_configs(),
                        )
                    except KafkaError as exc:
                        log.warning("cannot create %s: %s", GROUP_METADATA_TOPIC, exc)
                        return ErrorCode.coordinator_not_available, -1
            meta = cache.topic(GROUP_METADATA_TOPIC)
            if meta is None:
                return ErrorCode.coordinator_not_available, -1
            for partition in range(len(meta.partitions)):
                self._check_ownership(partition)
        state = meta.partitions.get(self.manager.partition_for(key))
        if state is None or state.leader < 0 or state.leader not in cache.brokers:
            return ErrorCode.coordinator_not_available, -1
        return ErrorCode.none, int(state.leader)

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
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return self.membership.heartbeat(group, member_id, group_instance_id, generation_id)

    def leave_group(self, group_id: str, members: Sequence[LeavingMember]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, per-member errors; empty when the top-level error is set)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in members]
        return self.membership.leave_group(group, members)

    # --- offsets -------------------------------------------------------------------------------------

    def _validate_offset_commit(
        self, group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
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
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, ErrorCode.illegal_generation)
            log.info("creating simple consumer group %s by an offset commit", group_id)
            group = self.manager.add_group(GroupMetadata(group_id, _S.EMPTY, self.time_ms()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
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
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets, written with the producer's transaction, become the
        group's when its COMMIT marker is written (:mod:`odradek.coordinator.group.txn_offsets`).
        The group is created (Empty) if needed, as for a simple commit."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_or_maybe_create_group(group_id, create=True)
        assert group is not None
        return await self.manager.txn_offsets.store(group, producer_id, producer_epoch, offsets)

    async def handle_txn_completion(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        """WriteTxnMarkers wrote the producer's marker on these ``__consumer_offsets`` partitions."""
        self.manager.txn_offsets.complete(producer_id, partitions, commit)

    def fetch_offsets(
        self, group_id: str, require_stable: bool, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchEntry]]:
        """(group error, offsets). ``partitions`` None: every committed partition."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
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
        if group is None or group.is_(_S.DEAD):
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
        if group is None:
            if api_version >= 6:
                return ErrorCode.group_id_not_found, f"Group {group_id} not found.", _DEAD_SUMMARY
            return ErrorCode.none, None, _DEAD_SUMMARY
        return ErrorCode.none, None, group.summary()

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """Groups of this broker, filtered by state names and group types (case-insensitive;
        every group here is ``classic``). COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if not self.active:
            return ErrorCode.coordinator_not_available, []
        wanted_states = {s for s in (parse_state(name) for name in states)}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return ErrorCode.none, []
        error = ErrorCode.coordinator_load_in_progress if self.manager.is_loading else ErrorCode.none
        groups = [g.overview() for g in self.manager.current_groups() if not wanted_states or g.state in wanted_states]
        return error, groups

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: Empty groups go (NONE), others get NON_EMPTY_GROUP, unknown ones
        GROUP_ID_NOT_FOUND."""
        results: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(_S.DEAD):
                results[group_id] = ErrorCode.group_id_not_found
            elif group.is_(_S.EMPTY):
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
