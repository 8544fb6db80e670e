"""The group metadata manager: the groups of the ``__consumer_offsets`` partitions this broker leads.

Kafka's ``GroupMetadataManager``. It owns the in-memory groups (and their offset caches) and is the
only writer of ``__consumer_offsets``; which partitions are loaded or loading is the coordinator
runtime's (:mod:`odradek.coordinator.runtime`), which calls :meth:`replay`, :meth:`install` and
:meth:`unload_partition` through the coordinator:

- :meth:`store_group` writes a group's GroupMetadata record (after SyncGroup from the leader,
  when a group becomes Empty, when a static member is replaced);
- :meth:`store_offsets` writes one batch with a record per committed partition, and makes the
  offsets visible only once the batch is durable (the acks rule of the topic);
- :meth:`cleanup_group_metadata` writes tombstones for deleted or expired offsets and groups;
- :meth:`replay` reads a partition when this broker becomes its leader: the last
  record per key wins, a null value deletes; transactional offset commits count only once their
  COMMIT marker is read, and those of a transaction still open at the end of the log stay
  pending (its marker, written later, completes them). A partition the cleaner compacted loads
  to the same groups and offsets: gaps between offsets, empty batches (a producer's last batch
  kept without records) and removed tombstones or markers change nothing the load keeps.
  While a partition loads, requests for its groups are answered
  COORDINATOR_LOAD_IN_PROGRESS by the coordinator.

A group's partition is :func:`~odradek.coordinator.group.schemas.partition_for` over the topic's
partition count. Unreadable records are logged and skipped, never fatal. Event loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from odradek.coordinator.group.config import LOAD_BUFFER_BYTES, GroupCoordinatorConfig
from odradek.coordinator.group.consumer_schemas import CONSUMER_RECORD_TYPES
from odradek.coordinator.group.group import GroupMetadata
from odradek.coordinator.group.schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    SchemaError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from odradek.coordinator.group.share_schemas import SHARE_RECORD_TYPES
from odradek.coordinator.group.state import GroupState
from odradek.coordinator.group.txn_offsets import TxnOffsetCommits
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchHeader, Record, build_batch, decode_records, iter_batches
from odradek.storage.topic_partition import TopicPartition

__all__ = ["GroupMetadataManager", "LoadedPartition", "OffsetFetchEntry"]

log = logging.getLogger(__name__)

_CONTROL_KEY = struct.Struct(">hh")
_COMMIT_MARKER = 1

_COMMIT_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}
_GROUP_ERRORS = {
    **_COMMIT_ERRORS,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


@dataclass(frozen=True, slots=True)
class OffsetFetchEntry:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


RawOffset = tuple[bytes | None, int]
"""An offset commit as read at load time: its value's bytes (None: a tombstone) and its record's
offset in ``__consumer_offsets``. Values are decoded once, for the record that wins its key."""


@dataclass
class LoadedPartition:
    """What replaying one partition found, keyed by group."""

    started_ms: int
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, RawOffset]] = field(default_factory=dict)
    pending_txn: dict[int, dict[tuple[str, TopicPartition], RawOffset]] = field(default_factory=dict)
    keys: dict[bytes, OffsetCommitKey | GroupMetadataKey | None] = field(default_factory=dict)
    """Decoded record keys by their bytes (None: unreadable); a partition holds few distinct keys."""
    consumer: dict[bytes, bytes | None] = field(default_factory=dict)
    """The consumer-protocol (KIP-848) records, raw: key -> the last value (None: tombstone)."""
    share: dict[bytes, bytes | None] = field(default_factory=dict)
    """The share-group (KIP-932) records, raw, likewise."""

    def apply_offset(self, group: str, tp: TopicPartition, value: bytes | None, at: int) -> None:
        self.offsets.setdefault(group, {})[tp] = (value, at)


class GroupMetadataManager:
    """See the module docstring. Partition ownership, loading and writes go through ``runtime``
    (:class:`~odradek.coordinator.runtime.CoordinatorRuntime`), which also gives the partition
    count of ``__consumer_offsets`` (the topic's, once it exists) and the clock."""

    def __init__(self, config: GroupCoordinatorConfig, runtime: CoordinatorRuntime[LoadedPartition]) -> None:
        self.config = config
        self.runtime = runtime
        self.log = runtime.log
        self.time_ms = runtime.time_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.txn_offsets = TxnOffsetCommits(self)

    # --- ownership ---------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def is_group_local(self, group_id: str) -> bool:
        return self.runtime.epoch(self.partition_for(group_id)) is not None

    def is_group_loading(self, group_id: str) -> bool:
        return self.runtime.is_loading(self.partition_for(group_id))

    @property
    def is_loading(self) -> bool:
        return self.runtime.any_loading

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        """Add ``group`` unless one with its id exists; return the one in the cache."""
        return self.groups.setdefault(group.group_id, group)

    def get_or_maybe_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.time_ms()))
        return group

    def group_not_exists(self, group_id: str) -> bool:
        """True if this broker coordinates ``group_id`` and has no live group by that id."""
        if not self.is_group_local(group_id):
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_(GroupState.DEAD)

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # --- writes ------------------------------------------------------------------------------------

    async def write_transactional(
        self, group_id: str, records: list[Record], producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, int]:
        """Append ``records`` as one batch of the producer's transaction (TxnOffsetCommit), durable;
        (error mapped as for commits, base offset)."""
        error, base = await self._write(group_id, records, True, (producer_id, producer_epoch))
        return _COMMIT_ERRORS.get(error, error), base

    async def _write(
        self, group_id: str, records: list[Record], wait: bool, producer: tuple[int, int] | None = None
    ) -> tuple[ErrorCode, int]:
        """Append ``records`` as one batch to the group's partition; (error, base offset)."""
        partition = self.partition_for(group_id)
        if self.runtime.epoch(partition) is None:
            return ErrorCode.not_coordinator, -1
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        try:
            batch = build_batch(
                records,
                timestamp_ms=self.time_ms(),
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                is_transactional=producer is not None,
            )
        except (ValueError, OverflowError, struct.error) as exc:
            log.warning("cannot encode records of group %s: %s", group_id, exc)
            return ErrorCode.unknown_server_error, -1
        error, last_offset = await self.runtime.write(partition, batch, self.config.commit_timeout_ms, wait=wait)
        return error, last_offset - len(records) + 1

    async def write_records(self, group_id: str, records: list[Record]) -> ErrorCode:
        """Append ``records`` (a consumer group's state) as one batch to the group's partition;
        NONE once durable, else the error mapped as for group metadata."""
        if not records:
            return ErrorCode.none
        error, _ = await self._write(group_id, records, wait=True)
        if error is not ErrorCode.none:
            log.warning("writing the state of consumer group %s failed: %s", group_id, error.name)
        return _GROUP_ERRORS.get(error, error)

    async def store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> ErrorCode:
        """Write the group's metadata with ``assignment``; NONE once durable, else the error to
        return to the members (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_SERVER_ERROR)."""
        try:
            value = encode_group_metadata_value(group.to_record(assignment))
        except (SchemaError, KeyError) as exc:
            log.warning("cannot encode metadata of group %s: %s", group.group_id, exc)
            return ErrorCode.unknown_server_error
        record = Record(encode_group_metadata_key(group.group_id), value)
        error, _ = await self._write(group.group_id, [record], wait=True)
        if error is not ErrorCode.none:
            log.warning("writing metadata of group %s failed: %s", group.group_id, error.name)
        return _GROUP_ERRORS.get(error, error)

    async def store_offsets(
        self, group: GroupMetadata, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, ErrorCode]:
        """Write committed offsets; per partition NONE once durable, OFFSET_METADATA_TOO_LARGE for
        metadata longer than ``offset.metadata.max.bytes`` (nothing of it is written), or the
        write's error mapped as Kafka maps it."""
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode("utf-8")) > self.config.metadata_max_bytes:
                results[tp] = ErrorCode.offset_metadata_too_large
            else:
                valid[tp] = value
        if not valid:
            return results
        records = [
            Record(encode_offset_commit_key(group.group_id, tp.topic, tp.partition), encode_offset_commit_value(v))
            for tp, v in valid.items()
        ]
        group.prepare_offset_commit(valid)
        error, base_offset = await self._write(group.group_id, records, wait=True)
        if error is ErrorCode.none:
            if not group.is_(GroupState.DEAD):
                for i, (tp, value) in enumerate(valid.items()):
                    group.on_offset_commit_append(tp, value, base_offset + i)
        else:
            for tp, value in valid.items():
                group.fail_pending_offset_write(tp, value)
            error = _COMMIT_ERRORS.get(error, error)
            log.warning("offset commit of group %s failed: %s", group.group_id, error.name)
        results.update((tp, error) for tp in valid)
        return results

    async def cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata],
        selector: Callable[[GroupMetadata], Mapping[TopicPartition, OffsetAndMetadata]],
    ) -> int:
        """Remove the offsets ``selector`` picks from each group; an Empty group left without
        offsets becomes Dead and leaves the cache. Tombstones are written for both. Returns the
        number of offsets removed."""
        removed_total = 0
        for group in groups:
            removed = selector(group)
            removed_total += len(removed)
            pending_txn = self.txn_offsets.has_group(group.group_id)
            if group.is_(GroupState.EMPTY) and not group.has_offsets() and not pending_txn:
                group.transition_to(GroupState.DEAD, self.time_ms())
            records = [Record(encode_offset_commit_key(group.group_id, tp.topic, tp.partition), None) for tp in removed]
            if group.is_(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation_id > 0:
                    records.append(Record(encode_group_metadata_key(group.group_id), None))
            if records:
                error, _ = await self._write(group.group_id, records, wait=False)
                if error is not ErrorCode.none:
                    log.warning(
                        "writing %d tombstones for group %s failed: %s", len(records), group.group_id, error.name
                    )
        return removed_total

    async def expire_offsets(self, now_ms: int | None = None, keep: Callable[[str], bool] = lambda _g: False) -> int:
        """Run offset expiry once (``offsets.retention.minutes``); returns offsets removed. Groups
        for which ``keep(group_id)`` (consumer groups with members) keep theirs."""
        now = self.time_ms() if now_ms is None else now_ms
        retention = self.config.retention_ms
        removed = await self.cleanup_group_metadata(
            [g for g in self.groups.values() if not keep(g.group_id)],
            lambda g: g.remove_expired_offsets(now, retention),
        )
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    # --- reads -------------------------------------------------------------------------------------

    def get_offsets(
        self, group_id: str, require_stable: bool, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetFetchEntry]:
        """Committed offsets of ``partitions`` (None: every partition with an offset). Unknown
        partitions get offset -1; with ``require_stable`` a partition whose commit is still being
        written gets UNSTABLE_OFFSET_COMMIT."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return {tp: OffsetFetchEntry() for tp in partitions or ()}
        wanted = list(group.offsets) if partitions is None else list(partitions)
        out: dict[TopicPartition, OffsetFetchEntry] = {}
        for tp in wanted:
            if require_stable and (group.has_pending_commit(tp) or self.txn_offsets.is_pending(group_id, tp)):
                out[tp] = OffsetFetchEntry(error=ErrorCode.unstable_offset_commit)
                continue
            value = group.offset(tp)
            out[tp] = (
                OffsetFetchEntry()
                if value is None
                else OffsetFetchEntry(value.offset, value.leader_epoch, value.metadata)
            )
        return out

    # --- loading -----------------------------------------------------------------------------------

    async def replay(self, partition: int, epoch: int) -> LoadedPartition | None:
        """Read ``partition`` (the runtime's load at ``epoch``); None when it cannot be read or
        the load was superseded meanwhile."""
        loaded = LoadedPartition(started_ms=self.time_ms())
        try:
            offset, end = self.log.bounds(partition)
        except KafkaError as exc:
            log.warning("cannot load __consumer_offsets-%d: %s", partition, exc)
            return None
        while offset < end:
            if not self.runtime.is_loading(partition, epoch):
                return None
            data = self.log.read(partition, offset, LOAD_BUFFER_BYTES)
            next_offset = offset
            for pos, header in iter_batches(data):
                next_offset = header.next_offset
                if header.last_offset < offset:
                    continue
                self._replay_batch(loaded, memoryview(data)[pos : pos + header.size_in_bytes], header)
            if next_offset <= offset:
                log.warning(
                    "__consumer_offsets-%d: no readable batch at offset %d; stopping the load", partition, offset
                )
                break
            offset = next_offset
            await asyncio.sleep(0)
        return loaded

    def install(
        self, partition: int, epoch: int, loaded: LoadedPartition, on_group_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        """Take the groups :meth:`replay` read over (the partition is owned at ``epoch`` now); the
        consumer-protocol and share-group records stay in ``loaded.consumer`` and ``loaded.share``
        for the coordinator."""
        groups = self._build_groups(loaded)
        self.txn_offsets.restore(
            {
                producer_id: {
                    (group_id, tp): (value, at)
                    for (group_id, tp), (raw, at) in by_key.items()
                    if (value := self._offset_value(group_id, tp, raw, at)) is not None
                }
                for producer_id, by_key in loaded.pending_txn.items()
            }
        )
        for group in groups:
            current = self.add_group(group)
            if current is group:
                on_group_loaded(group)
            else:
                log.warning(
                    "group %s loaded from __consumer_offsets-%d was already in the cache", group.group_id, partition
                )
        log.info(
            "loaded %d groups from __consumer_offsets-%d (epoch %d) in %d ms",
            len(groups),
            partition,
            epoch,
            self.time_ms() - loaded.started_ms,
        )

    def _replay_batch(self, loaded: LoadedPartition, batch: memoryview, header: BatchHeader) -> None:
        try:
            records = decode_records(batch)
        except KafkaError as exc:
            log.warning("skipping unreadable batch at offset %d of __consumer_offsets: %s", header.base_offset, exc)
            return
        if header.is_control:
            for rec in records:
                if rec.key is None or len(rec.key) < _CONTROL_KEY.size:
                    continue
                _version, marker = _CONTROL_KEY.unpack_from(rec.key)
                pending = loaded.pending_txn.pop(header.producer_id, {})
                if marker == _COMMIT_MARKER:
                    for (group, tp), (value, at) in pending.items():
                        loaded.apply_offset(group, tp, value, at)
            return
        for rec in records:
            if rec.key is None:
                continue
            if len(rec.key) >= 2 and rec.key[0] == 0 and rec.key[1] in CONSUMER_RECORD_TYPES:
                loaded.consumer[bytes(rec.key)] = None if rec.value is None else bytes(rec.value)
                continue
            if len(rec.key) >= 2 and rec.key[0] == 0 and rec.key[1] in SHARE_RECORD_TYPES:
                loaded.share[bytes(rec.key)] = None if rec.value is None else bytes(rec.value)
                continue
            key = self._record_key(loaded, rec.key, rec.offset)
            if isinstance(key, OffsetCommitKey):
                tp = TopicPartition(key.topic, key.partition)
                if header.is_transactional:
                    loaded.pending_txn.setdefault(header.producer_id, {})[(key.group, tp)] = (rec.value, rec.offset)
                else:
                    loaded.apply_offset(key.group, tp, rec.value, rec.offset)
            elif isinstance(key, GroupMetadataKey):
                try:
                    metadata = None if rec.value is None else decode_group_metadata_value(rec.value)
                except SchemaError as exc:
                    log.warning("skipping unreadable record at offset %d of __consumer_offsets: %s", rec.offset, exc)
                    continue
                loaded.groups[key.group] = metadata

    @staticmethod
    def _record_key(loaded: LoadedPartition, raw: bytes, at: int) -> OffsetCommitKey | GroupMetadataKey | None:
        try:
            return loaded.keys[raw]
        except KeyError:
            pass
        try:
            key: OffsetCommitKey | GroupMetadataKey | None = decode_key(raw)
        except SchemaError as exc:
            log.warning("skipping unreadable record at offset %d of __consumer_offsets: %s", at, exc)
            key = None
        loaded.keys[raw] = key
        return key

    @staticmethod
    def _offset_value(group_id: str, tp: TopicPartition, raw: bytes | None, at: int) -> OffsetAndMetadata | None:
        """The decoded value of the record at ``at``; None for a tombstone or an unreadable value
        (logged: the key then loads without an offset)."""
        if raw is None:
            return None
        try:
            return decode_offset_commit_value(raw)
        except SchemaError as exc:
            log.warning(
                "skipping unreadable offset of group %s for %s at offset %d of __consumer_offsets: %s",
                group_id,
                tp,
                at,
                exc,
            )
            return None

    def _build_groups(self, loaded: LoadedPartition) -> list[GroupMetadata]:
        now = self.time_ms()
        out: list[GroupMetadata] = []
        pending_groups = {group_id for by_key in loaded.pending_txn.values() for group_id, _tp in by_key}
        for group_id in loaded.groups.keys() | loaded.offsets.keys() | pending_groups:
            value = loaded.groups.get(group_id)
            group = (
                GroupMetadata.from_record(group_id, value, now)
                if value is not None
                else GroupMetadata(group_id, GroupState.EMPTY, now)
            )
            for tp, (raw, at) in loaded.offsets.get(group_id, {}).items():
                group.load_offset(tp, self._offset_value(group_id, tp, raw, at), at)
            if value is None and not group.offsets and group_id not in pending_groups:
                continue
            out.append(group)
        return out

    def unload_partition(self, partition: int, on_group_unloaded: Callable[[GroupMetadata], None]) -> int:
        """Drop ``partition``'s groups (another broker coordinates them now). Returns the number
        of groups unloaded."""
        count = 0
        self.txn_offsets.forget(lambda group_id: self.partition_for(group_id) == partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            on_group_unloaded(group)
            count += 1
        log.info("unloaded %d groups of __consumer_offsets-%d", count, partition)
        return count
