"""The share coordinator (Kafka's ``ShareCoordinatorService`` over its shards, KIP-932).

It keeps the durable state of share-partitions in ``__share_group_state``: a share-partition
``(group, topic id, partition)`` lives in the partition :func:`~.records.partition_for` picks for
its coordinator key, and the broker leading that partition is its coordinator. Ownership, loading
and writes are the :class:`~odradek.coordinator.runtime.CoordinatorRuntime`'s (one load per leader
epoch; a partition is replayed into a fresh :class:`~.shard.ShareCoordinatorShard`, unreadable
records logged and skipped); the topic is created on first use (FindCoordinator with key type
SHARE, or the persister's first look-up), its replication factor capped at the live brokers.

Each operation (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState, ReadShareGroupStateSummary; the rules are the shard's) runs under a lock of
its share-partition, so one key's records are generated, written and applied in order:

1. the key's partition must be loaded here (else ShareStateError NOT_COORDINATOR,
   COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE, from the runtime's status);
2. the shard checks the request and makes the record to write (or raises ShareStateError);
3. the record is appended (acks=-1) and awaited until durable (``share.coordinator.write.timeout.ms``);
   only then is it applied to the shard and the request answered. A failed write is mapped as
   Kafka's service maps it (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR;
   UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT ->
   COORDINATOR_NOT_AVAILABLE). A record appended whose durability wait failed may still commit:
   the partition is then unloaded, to be loaded again from the log, which decides.

After a ShareSnapshot is applied, the records of its partition below the lowest offset any key
still needs (:meth:`~.shard.ShareCoordinatorShard.last_redundant_offset`) are deleted through
``delete_records`` (DeleteRecords on the local leader replica, as Kafka's ``deleteRecords``).
Every ``share.coordinator.cold.partition.snapshot.interval.ms`` keys not snapshotted for that long
get a new snapshot, so an idle key does not hold back the pruning.

The coordinator is built by the broker's start-up from a :class:`ShareCoordinatorDeps`; it is the
broker's ``share_coordinator``. Event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from odradek.coordinator.runtime import CoordinatorRuntime, InternalTopic, RuntimeDeps
from odradek.coordinator.share.config import ShareCoordinatorConfig
from odradek.coordinator.share.records import (
    SHARE_GROUP_STATE_TOPIC,
    SHARE_SNAPSHOT_TYPE,
    SchemaError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    share_coordinator_key,
)
from odradek.coordinator.share.shard import ShareCoordinatorShard, ShareRecord, ShareSummary
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record, build_batch, iter_all_records, iter_batches
from odradek.share.state import SharePartitionKey, ShareState, ShareStateError, StateBatch
from odradek.storage.topic_partition import TopicPartition

__all__ = ["ShareCoordinator", "ShareCoordinatorDeps", "TopicLookup"]

log = logging.getLogger(__name__)

_WRITE_ERRORS = {
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
}


class TopicLookup(Protocol):
    """What the coordinator reads of the metadata cache to know a topic partition exists."""

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def partition_count(self, topic: str) -> int | None: ...


@dataclass(frozen=True, slots=True)
class ShareCoordinatorDeps:
    """The coordinator's settings, its runtime's dependencies (the ``__share_group_state``
    partitions here, the metadata view, topic creation, clock), the topics it checks requests
    against (None: every topic exists) and how it deletes records below an offset of one of its
    partitions (None: it never deletes)."""

    config: ShareCoordinatorConfig
    runtime: RuntimeDeps
    topics: TopicLookup | None = None
    delete_records: Callable[[int, int], object] | None = None


class _KeyLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class ShareCoordinator:
    """See the module docstring."""

    def __init__(self, deps: ShareCoordinatorDeps) -> None:
        config = deps.config
        self.config = config
        self.runtime: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            "share coordinator",
            InternalTopic(
                SHARE_GROUP_STATE_TOPIC, config.num_partitions, config.replication_factor, config.topic_configs
            ),
            deps.runtime,
            self,
        )
        self.log = self.runtime.log
        self._topics = deps.topics
        self._delete_records = deps.delete_records
        self.shards: dict[int, ShareCoordinatorShard] = {}
        """Loaded partitions of ``__share_group_state`` -> their state."""
        self.pruned: dict[int, int] = {}
        """Partition -> the offset records were last deleted below."""
        self._locks: dict[SharePartitionKey, _KeyLock] = {}

    @property
    def active(self) -> bool:
        return self.runtime.active

    def partition_for(self, key: SharePartitionKey) -> int:
        """The ``__share_group_state`` partition of ``key``."""
        return self.runtime.partition_for(share_coordinator_key(key))

    # --- lifecycle and ownership ------------------------------------------------------------------

    async def startup(self) -> None:
        self.runtime.start()
        interval = self.config.cold_snapshot_interval_ms
        self.runtime.every(interval, self.snapshot_cold_partitions, "cold partition snapshots")

    async def shutdown(self) -> None:
        await self.runtime.stop()

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.runtime.on_become_leader(tp, leader_epoch)

    def on_become_follower(self, tp: TopicPartition) -> None:
        self.runtime.on_become_follower(tp)

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the coordinator of coordinator key ``key``; creates
        ``__share_group_state`` if missing."""
        return await self.runtime.find_coordinator(key)

    def status(self, key: SharePartitionKey) -> ErrorCode:
        """NONE when ``key``'s partition is loaded here (see the runtime's ``status``)."""
        return self.runtime.status(self.partition_for(key))

    # the runtime's PartitionLoader

    async def replay(self, partition: int, epoch: int) -> ShareCoordinatorShard | None:
        """Read the whole partition into a new shard."""
        shard = self._new_shard()
        try:
            offset, end = self.log.bounds(partition)
            while offset < end:
                if not self.runtime.is_loading(partition, epoch):
                    return None
                data = self.log.read(partition, offset, self.config.load_buffer_size)
                if not data:
                    break
                for _pos, h in iter_batches(data):
                    offset = h.base_offset + h.last_offset_delta + 1
                for rec in iter_all_records(data, verify_crc=False):
                    if rec.key is None:
                        continue
                    try:
                        record_type, key = decode_key(rec.key)
                        value = None if rec.value is None else decode_value(record_type, rec.value)
                    except (SchemaError, UnicodeDecodeError) as exc:
                        log.warning(
                            "%s-%d offset %d: unreadable: %s", SHARE_GROUP_STATE_TOPIC, partition, rec.offset, exc
                        )
                        continue
                    shard.replay(rec.offset, record_type, key, value)
                await asyncio.sleep(0)
        except KafkaError as exc:
            log.warning("loading %s-%d failed: %s", SHARE_GROUP_STATE_TOPIC, partition, exc)
            return None
        return shard

    def install(self, partition: int, epoch: int, loaded: ShareCoordinatorShard) -> None:
        self.shards[partition] = loaded
        log.info(
            "share coordinator: loaded %d share-partitions of %s-%d (coordinator epoch %d)",
            len(loaded.states),
            SHARE_GROUP_STATE_TOPIC,
            partition,
            epoch,
        )

    def unload(self, partition: int) -> None:
        self.shards.pop(partition, None)
        self.pruned.pop(partition, None)

    def _new_shard(self) -> ShareCoordinatorShard:
        topic_exists = self._topic_exists if self._topics is not None else None
        return ShareCoordinatorShard(self.config.records_per_snapshot, self.runtime.time_ms, topic_exists)

    def _topic_exists(self, topic_id: uuid.UUID, partition: int) -> bool:
        assert self._topics is not None
        name = self._topics.topic_name(topic_id)
        count = None if name is None else self._topics.partition_count(name)
        return count is not None and partition < count

    # --- the operations -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _owned(self, key: SharePartitionKey) -> AsyncIterator[tuple[int, ShareCoordinatorShard]]:
        """Hold ``key``'s lock; (partition, shard) of a loaded partition, else ShareStateError."""
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = _KeyLock()
        entry.users += 1
        try:
            async with entry.lock:
                partition = self.partition_for(key)
                error = self.runtime.status(partition)
                shard = self.shards.get(partition)
                if error is ErrorCode.none and shard is None:
                    error = ErrorCode.coordinator_load_in_progress
                if error is not ErrorCode.none:
                    raise ShareStateError(error)
                assert shard is not None
                yield partition, shard
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]

    async def _write(self, partition: int, shard: ShareCoordinatorShard, records: list[ShareRecord]) -> None:
        """Append ``records`` as one batch, wait until durable, apply them; ShareStateError if not."""
        batch = build_batch(
            [Record(encode_key(t, k), None if v is None else encode_value(v)) for t, k, v in records],
            timestamp_ms=self.runtime.time_ms(),
        )
        error, last_offset = await self.runtime.write(partition, batch, self.config.write_timeout_ms)
        if error is not ErrorCode.none:
            if last_offset >= 0:
                self.runtime.unload(partition)  # appended, fate unknown: the log decides at the next load
            raise ShareStateError(_WRITE_ERRORS.get(error, error))
        if self.shards.get(partition) is not shard:
            raise ShareStateError(ErrorCode.not_coordinator)
        first = last_offset - len(records) + 1
        for i, (record_type, key, value) in enumerate(records):
            shard.replay(first + i, record_type, key, value)
        if any(t == SHARE_SNAPSHOT_TYPE for t, _k, _v in records):
            self._maybe_prune(partition, shard)

    def _maybe_prune(self, partition: int, shard: ShareCoordinatorShard) -> None:
        offset = shard.last_redundant_offset()
        if offset is None or self._delete_records is None or offset <= self.pruned.get(partition, 0):
            return
        try:
            self._delete_records(partition, offset)
        except KafkaError as exc:
            log.info("%s-%d: cannot delete records below %d: %s", SHARE_GROUP_STATE_TOPIC, partition, offset, exc)
            return
        self.pruned[partition] = offset

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        """InitializeShareGroupState of one share-partition; ShareStateError on failure."""
        async with self._owned(key) as (partition, shard):
            await self._write(partition, shard, [shard.initialize(key, state_epoch, start_offset)])

    async def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None:
        """WriteShareGroupState of one share-partition; ShareStateError on failure."""
        async with self._owned(key) as (partition, shard):
            record = shard.write(key, state_epoch, leader_epoch, start_offset, batches, delivery_complete_count)
            await self._write(partition, shard, [record])

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareState:
        """ReadShareGroupState of one share-partition (a higher leader epoch is written first);
        ShareStateError on failure, INVALID_REQUEST for a share-partition never initialized."""
        async with self._owned(key) as (partition, shard):
            state, record = shard.read(key, leader_epoch)
            if record is not None:
                await self._write(partition, shard, [record])
            return state

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareSummary | None:
        """ReadShareGroupStateSummary of one share-partition; None when never initialized.
        ``leader_epoch`` is not checked (Kafka's summary reads do not fence)."""
        async with self._owned(key) as (_partition, shard):
            return shard.read_summary(key)

    async def delete_state(self, key: SharePartitionKey) -> None:
        """DeleteShareGroupState of one share-partition (nothing to do for an unknown one)."""
        async with self._owned(key) as (partition, shard):
            record = shard.delete(key)
            if record is not None:
                await self._write(partition, shard, [record])

    async def snapshot_cold_partitions(self) -> None:
        """Snapshot again, one key at a time, every key not snapshotted for the interval."""
        interval = self.config.cold_snapshot_interval_ms
        for shard in list(self.shards.values()):
            for key in shard.cold_keys(interval):
                with contextlib.suppress(ShareStateError):
                    async with self._owned(key) as (partition, owner):
                        record = owner.cold_snapshot(key, interval)
                        if record is not None:
                            await self._write(partition, owner, [record])
