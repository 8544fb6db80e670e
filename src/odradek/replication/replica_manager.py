"""The replica manager: every partition this broker hosts, and the produce/fetch paths.

Kafka's ``ReplicaManager`` in small. It owns the :class:`Partition` objects and the replica state
the controller's requests change (``become_leader_or_follower``, ``stop_replicas`` and the
controller epoch fence: :mod:`odradek.replication.state_change`), appends produced batches to
leaders' logs (``append_records``) and serves fetches, long-polling up to ``max_wait_ms`` until
``min_bytes`` are available (``fetch_messages``: Kafka's DelayedFetch, done with futures that
appends complete).

Records are never decoded here: appends pass the producer's bytes to the log, fetches return
the log's stored bytes.

Called only from the broker's event loop thread. Produced payloads of ``IO_THREAD_MIN_BYTES`` or
more are written to the page cache by a pool of ``num.io.threads`` I/O threads (Kafka's request
handler threads), so the loop keeps reading sockets while the kernel copies them; see
:meth:`odradek.storage.log.Log.append_as_leader_async`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from odradek.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from odradek.replication.alter_log_dirs import ReplicaAlterLogDirsManager
from odradek.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from odradek.replication.pacing import Pacer, pace
from odradek.replication.partition import FetchClock, FetchWatchers, IsrWriter, Partition, PartitionState
from odradek.replication.quota import ReplicationQuota
from odradek.replication.state_change import ReplicaStateChanges
from odradek.storage import FileSlice, Log, LogAppendInfo, LogManager, TopicPartition
from odradek.storage.config import LogConfig
from odradek.storage.log import wall_clock_ms

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
"""ListOffsets v8+ (KIP-405): the local log's start; without tiered storage, the log start offset."""
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets v9+ (KIP-1005): the highest offset in remote storage; without tiered storage, -1."""
READ_COMMITTED = 1


@dataclass(slots=True)
class FetchRequestPartition:
    topic_partition: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    """-1: not checked (clients before KIP-320); else must equal the partition's leader epoch."""
    last_fetched_epoch: int = -1
    """Fetch v12+: the epoch of the fetcher's last batch; -1 when unknown (no divergence check)."""


def diverging_epoch(partition: Partition, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
    """Kafka's divergence check: where ``last_fetched_epoch`` ends in the leader's epoch cache;
    (epoch, end offset) when that is before ``fetch_offset`` or the leader knows an older epoch
    only, else None."""
    assert partition.epoch_cache is not None
    epoch, end_offset = partition.epoch_cache.end_offset_for(last_fetched_epoch, partition.log.log_end_offset)
    if end_offset < 0:
        return None
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


def check_current_leader_epoch(partition: Partition, current_leader_epoch: int) -> None:
    """KIP-320: FENCED_LEADER_EPOCH for an older epoch than ours, UNKNOWN_LEADER_EPOCH for a newer one."""
    if current_leader_epoch < 0 or current_leader_epoch == partition.leader_epoch:
        return
    tp = partition.topic_partition
    if current_leader_epoch < partition.leader_epoch:
        raise FencedLeaderEpochError(
            f"{tp.topic}-{tp.partition}: leader epoch {current_leader_epoch} is older than {partition.leader_epoch}"
        )
    raise UnknownLeaderEpochError(
        f"{tp.topic}-{tp.partition}: leader epoch {current_leader_epoch} is newer than {partition.leader_epoch}"
    )


IO_THREAD_MIN_BYTES = 256 * 1024
"""Produced payloads at least this large are written by an I/O thread; smaller ones are written on
the event loop. Measured on 2 cores with confluent-kafka at 100-byte messages (requests of about
120 KiB per partition): a 64 KiB threshold cost 0.35 broker CPU-µs per message, 256 KiB 0.25 (the
thread hand-off and the GIL round trip cost more than the copy they move)."""

SENDFILE_MIN_BYTES = 64 * 1024
"""Partition data at least this large is sent from the page cache with ``sendfile``; smaller
slices are read with one ``pread`` (cheaper than a descriptor dance for a few kilobytes)."""


@dataclass(slots=True)
class FetchPartitionResult:
    """One partition's answer. ``records`` is bytes, or a :class:`FileSlice` of a segment file
    for large reads (the connection sends it with ``sendfile``); ``records_size`` is its length."""

    topic_partition: TopicPartition
    error_code: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileSlice | None = None

    @property
    def records_size(self) -> int:
        records = self.records
        if records is None:
            return 0
        return records.size if isinstance(records, FileSlice) else len(records)

    aborted_transactions: list[tuple[int, int]] | None = None
    diverging_epoch: tuple[int, int] | None = None
    caught_up: bool = False
    """Nothing to read past the fetch offset (the log end offset for a follower, the high
    watermark or last stable offset for a consumer) and nothing else to tell: an incremental fetch
    session need not read the partition again until it changes (:meth:`Partition.changed`)."""

    @property
    def preferred_read_replica(self) -> int:
        """-1: fetching from followers (KIP-392) is not served, the leader is the one to read."""
        return -1


class ReplicaManager(ReplicaStateChanges):
    """Partitions hosted by one broker. ``log_config_for(topic)`` gives a topic's LogConfig;
    ``partition_exists(tp)`` whether the cluster's metadata (the broker's metadata cache) has the
    partition, which decides how a request for a partition not hosted here is answered
    (:meth:`get_partition`)."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        log_config_for: Callable[[str], LogConfig],
        *,
        io_threads: int = 8,
        replica_lag_time_max_ms: int = 30000,
        isr_writer: IsrWriter | None = None,
        endpoint_for: Callable[[int], tuple[str, int] | None] = lambda _broker_id: None,
        fetcher_config: FetcherConfig | None = None,
        producer_id_expiration_ms: int = 86400000,
        partition_exists: Callable[[TopicPartition], bool] = lambda _tp: False,
    ) -> None:
        self.broker_id = broker_id
        self.partition_exists = partition_exists
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.partitions: dict[TopicPartition, Partition] = {}
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.isr_writer = isr_writer
        self.isr_changed: set[TopicPartition] = set()
        """Partitions whose ISR this broker changed since the last ``/isr_change_notification``."""
        self.counters = [0, 0, 0]
        """Shared by every partition: ISR shrinks and expansions, bytes appended as a follower
        (indexes in :mod:`odradek.replication.partition`)."""
        self.fetcher_manager = ReplicaFetcherManager(
            broker_id,
            self.partitions.get,
            endpoint_for,
            replace(fetcher_config or FetcherConfig(), on_storage_error=self._follower_storage_error),
        )
        self.leader_quota = ReplicationQuota()
        """Bytes sent to out-of-sync followers of throttled partitions (see :mod:`.quota`)."""
        self.follower_quota = self.fetcher_manager.config.quota
        self._io_executor = ThreadPoolExecutor(max_workers=max(io_threads, 1), thread_name_prefix="odradek-io")
        self.alter_log_dirs = ReplicaAlterLogDirsManager(self, self._io_executor)
        """AlterReplicaLogDirs: replicas moving between this broker's log dirs."""
        self.offline_partitions: set[TopicPartition] = set()
        """Partitions whose log dir failed on this broker: KAFKA_STORAGE_ERROR until it restarts."""
        self.on_log_dir_failure: Callable[[Path], None] | None = None
        """The broker's hook: a log dir went offline (it tells the controller)."""
        self.on_append: Callable[[str, int, int], None] | None = None
        """Told (topic, records, bytes) of every :meth:`append_records` (the coordinators' internal
        topics, transaction markers), which Kafka's BrokerTopicMetrics count like produced ones."""
        self.fetch_watchers: FetchWatchers = {}
        """The incremental fetch sessions' watches of each partition (:meth:`Partition.changed`)."""
        log_manager.on_dir_failure = self._on_dir_failure
        log_manager.on_log_start_moved = self._log_start_moved

    # --- state changes from the controller --------------------------------------------------

    def make_leader_or_follower(self, tp: TopicPartition, state: PartitionState) -> Partition:
        """Create or update the partition (creating its log if needed) with the controller's state.

        Leader: followers' states reset, the epoch cache records the new epoch at the log end
        offset, fetching stops. Follower: fetching from the new leader (re)starts with truncation
        (OffsetForLeaderEpoch) whenever the leader or its epoch changed.
        """
        partition = self.partitions.get(tp)
        if partition is None and tp in self.offline_partitions:
            raise KafkaStorageError(f"{tp.topic}-{tp.partition} is offline on this broker: its log dir failed")
        offline_dirs = self.log_manager.offline_dirs
        if partition is None and offline_dirs and tp not in self.log_manager and state.leader_epoch > 0:
            # not a new partition (epoch 0 is, Kafka's isNew): its log may be in an offline dir
            dirs = ", ".join(map(str, sorted(offline_dirs)))
            raise KafkaStorageError(f"cannot create the log of {tp.topic}-{tp.partition}: log dirs {dirs} are offline")
        if partition is None:
            config = self.log_config_for(tp.topic)
            log_ = self.log_manager.get_or_create_log(tp, config)
            if log_.config != config:  # loaded at start-up, before the topic's overrides were known
                log_.update_config(config)
            partition = Partition(
                tp,
                self.broker_id,
                log_,
                PartitionState(-1, -1, [], []),
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                isr_writer=self.isr_writer,
                on_isr_change=self.isr_changed.add,
                counters=self.counters,
                watchers=self.fetch_watchers,
            )
            self.partitions[tp] = partition
        if state.leader == self.broker_id:
            self.fetcher_manager.remove_partition(tp)
            partition.make_leader(state, wall_clock_ms())
        elif partition.make_follower(state) or tp not in self.fetcher_manager.assigned:
            if state.leader >= 0:
                self.fetcher_manager.add_partition(tp, state.leader)
            else:
                self.fetcher_manager.remove_partition(tp)
        return partition

    # --- log dir failure ---------------------------------------------------------------------

    def storage_failure(self, partition: Partition, exc: OSError) -> KafkaStorageError:
        """An I/O error on ``partition``'s log: its log dir goes offline (Kafka's
        ``LogDirFailureChannel.maybeAddOfflineLogDir``); the error to answer with."""
        tp = partition.topic_partition
        self.log_manager.fail_dir(partition.log.dir.parent, f"I/O error on {tp.topic}-{tp.partition}: {exc}")
        return KafkaStorageError(f"{tp.topic}-{tp.partition}: the log dir failed: {exc}")

    def _follower_storage_error(self, partition: Partition, exc: OSError) -> None:
        self.storage_failure(partition, exc)

    def _on_dir_failure(self, directory: Path, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.offline_partitions.add(tp)
            self._drop_partition(tp)
        if self.on_log_dir_failure is not None:
            self.on_log_dir_failure(directory)

    def _drop_partition(self, tp: TopicPartition) -> None:
        """Stop following and leading ``tp``: pending acks=all produces and parked fetches end."""
        self.fetcher_manager.remove_partition(tp)
        partition = self.partitions.pop(tp, None)
        if partition is not None:
            partition.state = PartitionState(-1, partition.leader_epoch, [], [])
            partition.complete_delayed_produces()
            partition.wake_waiters()

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        self._drop_partition(tp)
        if delete:
            self.log_manager.delete_log(tp)

    # --- ISR -----------------------------------------------------------------------------------

    def maybe_shrink_isr(self, now_ms: int | None = None) -> None:
        """Every leader drops followers not caught up for ``replica.lag.time.max.ms`` (periodic)."""
        now = wall_clock_ms() if now_ms is None else now_ms
        for partition in self.leader_partitions():
            partition.maybe_shrink_isr(now)

    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (epoch, end offset) per the epoch cache.

        Raises UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH (the
        caller's ``current_leader_epoch`` is older) or UNKNOWN_LEADER_EPOCH (newer).
        """
        partition = self.leader_partition(tp)
        check_current_leader_epoch(partition, current_leader_epoch)
        assert partition.epoch_cache is not None
        return partition.epoch_cache.end_offset_for(leader_epoch, partition.log.log_end_offset)

    async def wait_for_acks(self, tp: TopicPartition, required_offset: int, timeout_ms: int) -> ErrorCode:
        """acks=all: wait until the high watermark reaches ``required_offset`` (DelayedProduce)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return ErrorCode.not_leader_or_follower
        waiter = partition.wait_for_offset(required_offset)
        if waiter.done():  # the high watermark is already there (an ISR of the leader alone)
            return waiter.result()
        try:
            return await asyncio.wait_for(waiter, max(timeout_ms, 0) / 1000)
        except TimeoutError:
            return ErrorCode.request_timed_out

    def update_log_config(self, topic: str) -> None:
        config = self.log_config_for(topic)
        for tp, partition in self.partitions.items():
            if tp.topic == topic:
                partition.log.update_config(config)

    def get_partition(self, tp: TopicPartition) -> Partition:
        """The hosted partition ``tp``, else the error every partition API answers (Kafka's
        ``getPartitionOrException``): KAFKA_STORAGE_ERROR when its log dir failed here,
        NOT_LEADER_OR_FOLLOWER when the partition exists but this broker is not one of its replicas
        (the client refreshes its metadata and goes to the leader), UNKNOWN_TOPIC_OR_PARTITION only
        when the partition does not exist at all."""
        partition = self.partitions.get(tp)
        if partition is not None:
            return partition
        name = f"{tp.topic}-{tp.partition}"
        if tp in self.offline_partitions:
            raise KafkaStorageError(f"{name} is offline on this broker: its log dir failed")
        if self.partition_exists(tp):
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not a replica of {name}")
        raise UnknownTopicOrPartitionError(f"this broker hosts no partition {name}")

    def leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.get_partition(tp)
        partition.check_leader()
        return partition

    def _partition_of(self, log_: Log) -> Partition | None:
        partition = self.partitions.get(log_.topic_partition)
        return partition if partition is not None and partition.log is log_ else None

    def cleaner_upper_bound(self, log_: Log) -> int:
        """How far the log cleaner may clean ``log_``: its partition's last stable offset (the log's
        high watermark when no hosted partition has this log, e.g. during a log dir move)."""
        partition = self._partition_of(log_)
        return partition.last_stable_offset if partition is not None else log_.high_watermark

    def producer_last_offsets(self, log_: Log) -> set[int] | None:
        """Offsets of each active producer's last data batch and last marker in ``log_``, which the
        cleaner keeps (emptied if need be) so producer state survives cleaning; None when no hosted
        partition has this log."""
        partition = self._partition_of(log_)
        if partition is None:
            return None
        offsets: set[int] = set()
        for entry in partition.producer_state.producers.values():
            if entry.batches:
                offsets.add(entry.batches[-1].last_offset)
            if entry.last_offset >= 0:
                offsets.add(entry.last_offset)
        return offsets

    # --- produce -----------------------------------------------------------------------------

    def append_records(
        self,
        tp: TopicPartition,
        records: bytes | memoryview,
        required_acks: int,
        origin: Literal["client", "coordinator"] = "client",
    ) -> LogAppendInfo:
        """Append batches to the leader's log now, on the loop (the coordinators' internal topics,
        transaction markers: ``origin`` "coordinator" may write control batches).

        Raises KafkaError subclasses (per partition): UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
        NOT_ENOUGH_REPLICAS (acks=-1 with fewer in-sync replicas than min.insync.replicas).
        """
        partition = self._partition_for_append(tp, required_acks)
        try:
            info = partition.log.append_as_leader(records, partition.leader_epoch, origin=origin)
        except OSError as exc:
            raise self.storage_failure(partition, exc) from None
        if info.first_offset >= 0 and not info.duplicate:
            partition.wake_follower_waiters()
        partition.maybe_increment_high_watermark()
        if self.on_append is not None:
            self.on_append(tp.topic, info.records_count, info.valid_bytes)
        return info

    async def append_produced_records(
        self, tp: TopicPartition, records: bytes | memoryview, required_acks: int
    ) -> LogAppendInfo:
        """Append a producer's batches to the leader's log; large payloads are written by an I/O
        thread. Errors as :meth:`append_records`, plus KAFKA_STORAGE_ERROR when the log is closed or
        truncated while the payload is written, and for idempotent producers INVALID_PRODUCER_EPOCH
        and OUT_OF_ORDER_SEQUENCE_NUMBER; a retried batch already in the log is not appended again
        and gets its original offsets (the log's producer state decides,
        :mod:`odradek.storage.producer_state`). ``records`` must not change until the append is
        committed. Cancelling this (the request's connection was lost) while an I/O thread writes
        does not cancel the append: it is committed and recorded in the producer state as if the
        caller had waited, and followers waiting for it are woken."""
        await pace()  # a Produce may name thousands of partitions: the loop gets a turn every slice
        partition = self._partition_for_append(tp, required_acks)

        def committed(_info: LogAppendInfo) -> None:
            partition.wake_follower_waiters()

        try:
            info = await partition.log.append_as_leader_async(
                records,
                partition.leader_epoch,
                executor=self._io_executor,
                executor_min_bytes=IO_THREAD_MIN_BYTES,
                on_commit=committed,
            )
        except OSError as exc:
            raise self.storage_failure(partition, exc) from None
        partition.maybe_increment_high_watermark()
        return info

    async def create_logs(self, new: list[TopicPartition]) -> None:
        """The logs of ``new`` created on the I/O threads (:meth:`LogManager.create_logs`); none
        while a log dir is offline (each partition's own path then says which dir, and why)."""
        if self.log_manager.offline_dirs:
            return
        wanted = {tp: self.log_config_for(tp.topic) for tp in new if tp not in self.offline_partitions}
        await self.log_manager.create_logs(wanted, self._io_executor)

    def _partition_for_append(self, tp: TopicPartition, required_acks: int) -> Partition:
        partition = self.leader_partition(tp)
        partition.check_enough_replicas(required_acks)
        return partition

    # --- fetch -------------------------------------------------------------------------------

    def _read(
        self,
        req: FetchRequestPartition,
        min_one_message: bool,
        isolation_level: int,
        replica_id: int,
        now_ms: int | None = None,
        max_bytes: int | None = None,
        clock: FetchClock | None = None,
    ) -> FetchPartitionResult:
        """One partition's read; ``max_bytes`` (default the request's ``partition_max_bytes``)
        caps it, ``now_ms`` is the fetch's time and ``clock`` its session's (a follower's fetch
        state)."""
        result = FetchPartitionResult(req.topic_partition)
        try:
            partition = self.get_partition(req.topic_partition)
            partition.check_leader()
            check_current_leader_epoch(partition, req.current_leader_epoch)
            log_ = partition.log
            if req.last_fetched_epoch >= 0:
                diverging = diverging_epoch(partition, req.last_fetched_epoch, req.fetch_offset)
                if diverging is not None:  # no records: the fetcher truncates first (KIP-595)
                    result.diverging_epoch = diverging
                    result.high_watermark = partition.high_watermark
                    result.last_stable_offset = partition.last_stable_offset
                    result.log_start_offset = log_.log_start_offset
                    result.records = b""
                    return result
            if replica_id >= 0:
                partition.update_follower_fetch_state(
                    replica_id, req.fetch_offset, wall_clock_ms() if now_ms is None else now_ms, clock
                )
            result.high_watermark = partition.high_watermark
            result.last_stable_offset = partition.last_stable_offset
            result.log_start_offset = log_.log_start_offset
            throttled = False
            if replica_id >= 0:
                max_offset = None
                # Kafka's shouldLeaderThrottle: out-of-sync followers of throttled partitions
                throttled = replica_id not in partition.state.isr and self.leader_quota.is_throttled(
                    req.topic_partition
                )
                if throttled and self.leader_quota.is_exceeded():
                    result.records = b""
                    return result
            elif isolation_level == READ_COMMITTED:
                max_offset = partition.last_stable_offset
            else:
                max_offset = partition.high_watermark
            if req.fetch_offset == log_.log_end_offset:  # caught up (an idle follower's usual fetch): nothing to read
                result.records = b""
                # a follower outside the ISR is read at each fetch until its expansion is written
                result.caught_up = replica_id < 0 or replica_id in partition.state.isr
                return result
            limit = req.partition_max_bytes if max_bytes is None else max_bytes
            if max_offset is not None and req.fetch_offset == max_offset:  # a consumer at the watermark
                result.records = b""
                result.caught_up = True
                return result
            info = log_.read(req.fetch_offset, limit, max_offset, min_one_message)
            if isolation_level == READ_COMMITTED and replica_id < 0 and max_offset is not None:
                result.aborted_transactions = partition.txn_state.collect_aborted(req.fetch_offset, max_offset)
            if info.file_slice is not None and info.file_slice.size >= SENDFILE_MIN_BYTES:
                result.records = info.file_slice
            else:
                result.records = info.records_bytes()
            if throttled:
                self.leader_quota.record(result.records_size)
        except KafkaError as exc:
            result.error_code = exc.error_code
            result.records = b""
        return result

    async def fetch_messages(
        self,
        requests: Sequence[FetchRequestPartition],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int = 0,
        replica_id: int = -1,
        on_delay: Callable[[], None] | None = None,
        clock: FetchClock | None = None,
    ) -> list[FetchPartitionResult]:
        """Read every requested partition; if fewer than ``min_bytes`` are available and no
        partition errored, wait up to ``max_wait_ms`` for appends and read again. A wait that
        ends with no partition woken (no append, no high watermark or leadership change) answers
        the first read as it was: nothing it reported moved, and an idle cluster's long polls
        then read each partition once per fetch, not twice.

        ``max_bytes`` bounds the whole response, each request's ``partition_max_bytes`` its
        partition; the first partition with data returns at least one whole batch even if it
        is larger than both (KIP-74), so a consumer can always make progress. ``on_delay`` is
        called once if the fetch starts waiting (it enters Kafka's fetch purgatory). ``clock`` is a
        follower's incremental session's (:class:`FetchClock`): set to the time of each read.
        """
        results = await self._read_all(requests, max_bytes, isolation_level, replica_id, clock)
        if max_wait_ms <= 0 or self.satisfied(results, min_bytes):
            return results
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000.0
        if on_delay is not None:
            on_delay()
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            waiter: asyncio.Future[None] = loop.create_future()
            watched = [self.partitions[r.topic_partition] for r in requests if r.topic_partition in self.partitions]
            for partition in watched:
                partition.add_waiter(waiter, follower=replica_id >= 0)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return results  # nothing woke the wait: the last read still holds
            finally:
                for partition in watched:
                    partition.remove_waiter(waiter)
            results = await self._read_all(requests, max_bytes, isolation_level, replica_id, clock)
            if self.satisfied(results, min_bytes):
                return results
        return await self._read_all(requests, max_bytes, isolation_level, replica_id, clock)

    async def _read_all(
        self,
        requests: Sequence[FetchRequestPartition],
        max_bytes: int,
        isolation_level: int,
        replica_id: int,
        clock: FetchClock | None = None,
    ) -> list[FetchPartitionResult]:
        """Read the partitions in order, giving the loop a turn every slice (a Fetch may name thousands)."""
        results: list[FetchPartitionResult] = []
        remaining = max_bytes
        min_one = True
        pacer = Pacer()
        now_ms = wall_clock_ms()
        if clock is not None:
            clock.ms = now_ms
        for req in requests:
            await pacer.step()
            limit = max(0, min(req.partition_max_bytes, remaining))
            result = self._read(req, min_one, isolation_level, replica_id, now_ms, limit, clock)
            size = result.records_size
            if size:
                min_one = False
                remaining -= size
            results.append(result)
        return results

    @staticmethod
    def satisfied(results: list[FetchPartitionResult], min_bytes: int) -> bool:
        """Whether a fetch may be answered now: an error, or ``min_bytes`` of records."""
        total = 0
        for r in results:
            if r.error_code != ErrorCode.none:
                return True
            total += r.records_size
        return total >= min_bytes  # min_bytes 0 answers at once, as Kafka's DelayedFetch

    # --- offsets -----------------------------------------------------------------------------

    def fetch_offset_for_timestamp(
        self, tp: TopicPartition, timestamp: int, isolation_level: int = 0
    ) -> tuple[int, int]:
        """(offset, timestamp) for ListOffsets: -2 earliest, -1 latest, -3 max timestamp, -4
        earliest local (the log start: there is no tiered storage), -5 latest tiered (-1, as
        Kafka without remote storage), else the first offset whose timestamp >= ``timestamp``
        ((-1, -1) when there is none)."""
        partition = self.leader_partition(tp)
        log_ = partition.log
        upper = partition.last_stable_offset if isolation_level == READ_COMMITTED else partition.high_watermark
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return log_.log_start_offset, -1
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1
        if timestamp == LATEST_TIMESTAMP:
            return upper, -1
        if timestamp == MAX_TIMESTAMP:
            found = log_.latest_timestamp()
            return found if found is not None else (-1, -1)
        if timestamp < 0:
            raise InvalidRequestError(f"invalid ListOffsets timestamp {timestamp}")
        found = log_.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= upper:
            return -1, -1
        return found

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """Advance the log start offset (DeleteRecords); -1 means the high watermark. Returns the new low watermark."""
        partition = self.leader_partition(tp)
        low_watermark = int(partition.log.delete_records(offset))
        partition.changed()
        return low_watermark

    def _log_start_moved(self, tp: TopicPartition) -> None:
        """Retention deleted segments of ``tp``: fetch sessions answer its new log start offset."""
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.changed()
            self.fetcher_manager.mark_changed(tp)  # a follower tells its leader the new log start

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    async def shutdown_fetchers(self) -> None:
        """Stop following and finish log dir moves (before the logs close)."""
        await self.fetcher_manager.shutdown()
        await self.alter_log_dirs.shutdown()

    def shutdown(self) -> None:
        """Wake long-polling fetches and wait for the I/O threads' writes in progress (their appends
        then fail or commit on the loop before the logs close)."""
        for partition in self.partitions.values():
            partition.wake_waiters()
        self._io_executor.shutdown(wait=True)
        for partition in self.partitions.values():
            if not partition.log.closed:
                partition.log.take_producer_snapshot()

    def expire_producers(self, now_ms: int) -> None:
        """Every ``producer.id.expiration.check.interval.ms``: see
        :meth:`odradek.storage.log.Log.expire_producers`."""
        for partition in self.partitions.values():
            partition.log.expire_producers(now_ms, self.producer_id_expiration_ms)
