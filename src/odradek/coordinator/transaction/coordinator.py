"""The transaction coordinator (Kafka's ``TransactionCoordinator`` + ``TransactionStateManager``).

Each transactional id lives in one ``__transaction_state`` partition; the broker leading that
partition is its coordinator and keeps the ids of its partitions in memory, loaded from the log
when it becomes leader (the last record per id wins, a null value removes it) and dropped when it
stops leading. Every state change is written to the log (acks=all) before it is acted on or
answered, so a new coordinator after a failover continues from the log: transactions found in
PrepareCommit/PrepareAbort get their markers written and complete (SEEDS §5, step 1 and 7).

Requests (checks in Kafka's order: coordinator ownership -> NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS, unknown id -> INVALID_PRODUCER_ID_MAPPING, other producer id ->
INVALID_PRODUCER_ID_MAPPING, other epoch -> PRODUCER_FENCED, a transition in flight ->
CONCURRENT_TRANSACTIONS):

- InitProducerId: a new id gets a producer id (epoch 0); a known one gets its epoch bumped (a new
  producer id once the epoch would reach 32767), which fences the previous producer. An ongoing
  transaction is aborted first (epoch bumped, PrepareAbort) and the request answered
  CONCURRENT_TRANSACTIONS until the abort completes; the client retries. KIP-360: a producer
  passing its current id/epoch may re-initialise; a stale pair is PRODUCER_FENCED.
- AddPartitionsToTxn / AddOffsetsToTxn: the partitions (or the group's ``__consumer_offsets``
  partition) join the transaction, which becomes Ongoing.
- EndTxn: PrepareCommit/PrepareAbort is written and answered; then the markers are written on
  every partition's leader (WriteTxnMarkers over the wire, retried until they are) and
  CompleteCommit/CompleteAbort is written. AddPartitionsToTxn and InitProducerId arriving while
  that is under way wait for it up to ``COMPLETION_WAIT_S`` before they are answered (usually it
  takes a millisecond), instead of answering CONCURRENT_TRANSACTIONS at once and making the
  client back off 20 ms (librdkafka's and the Java client's backoff for that error): a producer
  that begins its next transaction right after a commit no longer pays that backoff each time.
  A retried EndTxn of a completed transaction is NONE, of the other outcome INVALID_TXN_STATE.
- ``transaction.timeout.ms``: checked against ``transaction.max.timeout.ms``; a background task
  aborts (with an epoch bump) transactions open longer than their timeout.

- ``transactional.id.expiration.ms``: ids idle that long (no open transaction) are removed with a
  tombstone every ``transaction.remove.expired.transaction.cleanup.interval.ms``.

DescribeTransactions and ListTransactions read the in-memory states (:meth:`describe`,
:meth:`list`). Event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Any

from odradek.coordinator.group.log_io import ReplicaOffsetsLog
from odradek.coordinator.group.schemas import partition_for as group_partition_for
from odradek.coordinator.transaction.markers import MarkerWriter
from odradek.coordinator.transaction.metadata import (
    TRANSACTION_STATE_TOPIC,
    TransactionMetadata,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record, build_batch, iter_all_records, iter_batches
from odradek.storage.topic_partition import TopicPartition

__all__ = ["TransactionCoordinator"]

log = logging.getLogger(__name__)

S = TransactionState
MAX_EPOCH = 32767
STATE_NAMES = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
"""Kafka's names of the states (DescribeTransactions, ListTransactions, kafka-transactions.sh)."""
WRITE_TIMEOUT_MS = 30_000
COMPLETION_WAIT_S = 0.5
"""Longest a request waits for the previous transaction's markers before CONCURRENT_TRANSACTIONS."""
LOAD_BYTES = 1 << 20


class CoordinatorError(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


class TransactionCoordinator:
    """See the module docstring. Registered as the broker's ``transaction_coordinator`` extension."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions = int(cfg["transaction.state.log.num.partitions"])
        self.replication = int(cfg["transaction.state.log.replication.factor"])
        self.min_isr = int(cfg["transaction.state.log.min.isr"])
        self.segment_bytes = int(cfg["transaction.state.log.segment.bytes"])
        self.max_timeout_ms = int(cfg["transaction.max.timeout.ms"])
        self.abort_interval_ms = int(cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"])
        self.id_expiration_ms = int(cfg["transactional.id.expiration.ms"])
        self.expire_interval_ms = int(cfg["transaction.remove.expired.transaction.cleanup.interval.ms"])
        self.log = ReplicaOffsetsLog(lambda: broker.replica_manager, TRANSACTION_STATE_TOPIC)
        self.txns: dict[str, TransactionMetadata] = {}
        self.owned: dict[int, int] = {}
        """Loaded partition -> its leader epoch (the coordinator epoch of its markers)."""
        self.loading: dict[int, int] = {}
        self.markers = MarkerWriter(broker)
        self._completing: dict[str, asyncio.Event] = {}
        """Transactional id -> set when its markers and Complete state are written (or given up)."""
        self.active = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._create_lock = asyncio.Lock()

    # --- lifecycle and ownership ---------------------------------------------------------------

    async def startup(self) -> None:
        self.active = True
        self._spawn(self._abort_timed_out_loop())
        self._spawn(self._expire_loop())
        for partition in range(self.num_partitions):
            self._check_ownership(partition)

    async def shutdown(self) -> None:
        self.active = False
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        await self.markers.close()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _leader_epoch(self, partition: int) -> int | None:
        rm = getattr(self.broker, "replica_manager", None)
        p = rm.partitions.get(TopicPartition(TRANSACTION_STATE_TOPIC, partition)) if rm is not None else None
        return int(p.leader_epoch) if p is not None and p.is_leader else None

    def on_become_leader(self, tp: TopicPartition) -> None:
        if tp.topic == TRANSACTION_STATE_TOPIC and self.active:
            self._check_ownership(tp.partition)

    def on_become_follower(self, tp: TopicPartition) -> None:
        if tp.topic == TRANSACTION_STATE_TOPIC:
            self._unload(tp.partition)

    def _unload(self, partition: int) -> None:
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        for txn_id in [t for t in self.txns if partition_for(t, self.num_partitions) == partition]:
            del self.txns[txn_id]

    def _check_ownership(self, partition: int) -> ErrorCode:
        epoch = self._leader_epoch(partition)
        if epoch is None:
            if partition in self.owned or partition in self.loading:
                self._unload(partition)
            return ErrorCode.not_coordinator
        if self.owned.get(partition) == epoch:
            return ErrorCode.none
        if self.loading.get(partition) != epoch:
            self._unload(partition)
            self.loading[partition] = epoch
            self._spawn(self._load(partition, epoch))
        return ErrorCode.coordinator_load_in_progress

    async def _load(self, partition: int, epoch: int) -> None:
        """Replay the partition; then finish the transactions it left prepared."""
        loaded: dict[str, TransactionMetadata | None] = {}
        try:
            offset, end = self.log.bounds(partition)
            while offset < end:
                data = self.log.read(partition, offset, LOAD_BYTES)
                if not data:
                    break
                for _pos, h in iter_batches(data):
                    offset = h.base_offset + h.last_offset_delta + 1
                for rec in iter_all_records(data, verify_crc=False):
                    if rec.key is None:
                        continue
                    try:
                        txn_id = decode_key(rec.key)
                        loaded[txn_id] = decode_value(txn_id, rec.value) if rec.value is not None else None
                    except (ValueError, UnicodeDecodeError) as exc:
                        log.warning(
                            "%s-%d offset %d: unreadable record: %s",
                            TRANSACTION_STATE_TOPIC,
                            partition,
                            rec.offset,
                            exc,
                        )
                await asyncio.sleep(0)
        except KafkaError as exc:
            log.warning("loading %s-%d failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            self.loading.pop(partition, None)
            return
        if self.loading.get(partition) != epoch:
            return
        del self.loading[partition]
        self.owned[partition] = epoch
        for txn_id, meta in loaded.items():
            if meta is not None:
                self.txns[txn_id] = meta
        log.info(
            "transaction coordinator: loaded %d transactional ids of %s-%d (coordinator epoch %d)",
            sum(m is not None for m in loaded.values()),
            TRANSACTION_STATE_TOPIC,
            partition,
            epoch,
        )
        for meta in list(self.txns.values()):
            mine = partition_for(meta.transactional_id, self.num_partitions) == partition
            if mine and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._start_completion(meta, meta.state is S.PREPARE_COMMIT)

    # --- FindCoordinator ---------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of ``key``'s coordinator; creates ``__transaction_state`` if missing."""
        if not self.active:
            return ErrorCode.coordinator_not_available, -1
        cache = self.broker.metadata_cache
        if cache.topic(TRANSACTION_STATE_TOPIC) is None:
            async with self._create_lock:
                if cache.topic(TRANSACTION_STATE_TOPIC) is None:
                    try:
                        live = len(cache.brokers) or 1
                        configs = {
                            "cleanup.policy": "compact",
                            "min.insync.replicas": str(max(1, min(self.min_isr, self.replication, live))),
                            "segment.bytes": str(self.segment_bytes),
                            "unclean.leader.election.enable": "false",
                        }
                        await self.broker.admin.create_internal_topic(
                            TRANSACTION_STATE_TOPIC, self.num_partitions, self.replication, configs
                        )
                    except KafkaError as exc:
                        log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)
                        return ErrorCode.coordinator_not_available, -1
            meta = cache.topic(TRANSACTION_STATE_TOPIC)
            if meta is None:
                return ErrorCode.coordinator_not_available, -1
            for partition in range(len(meta.partitions)):
                self._check_ownership(partition)
        state = cache.partition_state(TopicPartition(TRANSACTION_STATE_TOPIC, partition_for(key, self.num_partitions)))
        if state is None or state.leader < 0 or state.leader not in cache.brokers:
            return ErrorCode.coordinator_not_available, -1
        return ErrorCode.none, int(state.leader)

    # --- shared checks and the log ---------------------------------------------------------------

    def _status(self, txn_id: str) -> None:
        if not self.active:
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        error = self._check_ownership(partition_for(txn_id, self.num_partitions))
        if error != ErrorCode.none:
            raise CoordinatorError(error)

    def _existing(self, txn_id: str, producer_id: int, epoch: int) -> TransactionMetadata:
        self._status(txn_id)
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            raise CoordinatorError(ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != epoch:
            raise CoordinatorError(ErrorCode.producer_fenced)
        if meta.pending is not None:
            raise CoordinatorError(ErrorCode.concurrent_transactions)
        return meta

    async def _persist(self, meta: TransactionMetadata, target: TransactionMetadata) -> None:
        """Write ``target`` (the next state of ``meta``) and, once durable, make it ``meta``'s."""
        partition = partition_for(meta.transactional_id, self.num_partitions)
        epoch = self.owned.get(partition)
        meta.pending = target.state
        try:
            batch = build_batch([Record(encode_key(meta.transactional_id), encode_value(target))])
            error, last = self.log.append(partition, batch)
            if error == ErrorCode.none:
                error = await self.log.wait_durable(partition, last, WRITE_TIMEOUT_MS)
            if error == ErrorCode.none and self.owned.get(partition) != epoch:
                error = ErrorCode.not_coordinator
        finally:
            meta.pending = None
        if error != ErrorCode.none:
            mapped = {
                ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
                ErrorCode.unknown_topic_or_partition: ErrorCode.not_coordinator,
            }.get(error, ErrorCode.coordinator_not_available)
            raise CoordinatorError(mapped)
        meta.producer_id, meta.producer_epoch, meta.timeout_ms = (
            target.producer_id,
            target.producer_epoch,
            target.timeout_ms,
        )
        meta.partitions = set(target.partitions)
        meta.start_ms = target.start_ms
        meta.transition(target.state, target.last_update_ms)

    @staticmethod
    def _next(meta: TransactionMetadata, state: TransactionState, now_ms: int, **changes: Any) -> TransactionMetadata:
        target = TransactionMetadata(
            meta.transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            meta.timeout_ms,
            meta.state,
            set(meta.partitions),
            meta.start_ms,
            meta.last_update_ms,
        )
        for key, value in changes.items():
            setattr(target, key, value)
        target.transition(state, now_ms)
        return target

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    # --- InitProducerId ------------------------------------------------------------------------

    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id."""
        try:
            if txn_id == "":
                return ErrorCode.invalid_request, -1, -1
            if not 0 < timeout_ms <= self.max_timeout_ms:
                return ErrorCode.invalid_transaction_timeout, -1, -1
            await self._await_completion(txn_id)
            self._status(txn_id)
            meta = self.txns.get(txn_id)
            now = self.now_ms()
            if meta is None:
                pid = await self.broker.producer_ids.generate_producer_id()
                meta = TransactionMetadata(txn_id, pid, -1, timeout_ms, S.EMPTY, set(), -1, now)
                self.txns[txn_id] = meta
                await self._persist(meta, self._next(meta, S.EMPTY, now, producer_epoch=0))
                return ErrorCode.none, meta.producer_id, meta.producer_epoch
            if meta.pending is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
                return ErrorCode.concurrent_transactions, -1, -1
            if producer_id >= 0 and (producer_id, epoch) != (meta.producer_id, meta.producer_epoch):
                return ErrorCode.producer_fenced, -1, -1  # KIP-360: only the current producer may recover
            if meta.state is S.ONGOING:
                await self._abort(meta, bump=True)  # fences the old producer, then aborts
                return ErrorCode.concurrent_transactions, -1, -1
            if meta.producer_epoch + 1 >= MAX_EPOCH:
                pid = await self.broker.producer_ids.generate_producer_id()
                target = self._next(meta, S.EMPTY, now, producer_id=pid, producer_epoch=0, timeout_ms=timeout_ms)
            else:
                target = self._next(meta, S.EMPTY, now, producer_epoch=meta.producer_epoch + 1, timeout_ms=timeout_ms)
            target.partitions = set()
            await self._persist(meta, target)
            return ErrorCode.none, meta.producer_id, meta.producer_epoch
        except CoordinatorError as exc:
            return exc.error, -1, -1

    # --- the transaction ---------------------------------------------------------------------

    async def add_partitions(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
        verify_only: bool = False,
    ) -> ErrorCode:
        try:
            await self._await_completion(txn_id)
            meta = self._existing(txn_id, producer_id, epoch)
            wanted = set(partitions)
            if verify_only:
                ok = meta.state is S.ONGOING and wanted <= meta.partitions
                return ErrorCode.none if ok else ErrorCode.invalid_txn_state
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return ErrorCode.concurrent_transactions
            if meta.state is S.ONGOING and wanted <= meta.partitions:
                return ErrorCode.none
            now = self.now_ms()
            await self._persist(meta, self._next(meta, S.ONGOING, now, partitions=meta.partitions | wanted))
            return ErrorCode.none
        except CoordinatorError as exc:
            return exc.error

    async def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str) -> ErrorCode:
        partitions = self.broker.config["offsets.topic.num.partitions"]
        cached = self.broker.metadata_cache.topic("__consumer_offsets")
        count = len(cached.partitions) if cached is not None and cached.partitions else int(partitions)
        return await self.add_partitions(
            txn_id, producer_id, epoch, [("__consumer_offsets", group_partition_for(group_id, count))]
        )

    async def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        try:
            meta = self._existing(txn_id, producer_id, epoch)
            if meta.state is S.ONGOING:
                target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
                await self._persist(meta, self._next(meta, target, self.now_ms()))
                self._start_completion(meta, commit)
                return ErrorCode.none
            if meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                return ErrorCode.none if (meta.state is S.COMPLETE_COMMIT) == commit else ErrorCode.invalid_txn_state
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                done = (meta.state is S.PREPARE_COMMIT) == commit
                return ErrorCode.concurrent_transactions if done else ErrorCode.invalid_txn_state
            return ErrorCode.invalid_txn_state
        except CoordinatorError as exc:
            return exc.error

    async def _abort(self, meta: TransactionMetadata, bump: bool) -> None:
        """Abort an Ongoing transaction (timeout, or fencing by InitProducerId): the epoch is
        bumped first so the old producer can write nothing more, then PrepareAbort."""
        now = self.now_ms()
        changes: dict[str, Any] = {"producer_epoch": meta.producer_epoch + 1} if bump else {}
        await self._persist(meta, self._next(meta, S.PREPARE_ABORT, now, **changes))
        self._start_completion(meta, commit=False)

    def _start_completion(self, meta: TransactionMetadata, commit: bool) -> None:
        self._completing.setdefault(meta.transactional_id, asyncio.Event())
        self._spawn(self._complete(meta, commit))

    async def _await_completion(self, txn_id: str) -> None:
        """Wait (at most ``COMPLETION_WAIT_S``) for the completion of ``txn_id``'s last transaction."""
        done = self._completing.get(txn_id)
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), COMPLETION_WAIT_S)

    async def _complete(self, meta: TransactionMetadata, commit: bool) -> None:
        try:
            await self._write_markers_and_complete(meta, commit)
        finally:
            done = self._completing.pop(meta.transactional_id, None)
            if done is not None:
                done.set()

    async def _write_markers_and_complete(self, meta: TransactionMetadata, commit: bool) -> None:
        """Write the markers (retried until written), then CompleteCommit/CompleteAbort."""
        partition = partition_for(meta.transactional_id, self.num_partitions)
        coordinator_epoch = self.owned.get(partition, 0)
        written = await self.markers.write(
            meta.producer_id,
            meta.producer_epoch,
            commit,
            coordinator_epoch,
            sorted(meta.partitions),
            still_owner=lambda: self.owned.get(partition) == coordinator_epoch,
        )
        if not written:
            return  # no longer the coordinator: the new one finishes it from the log
        target = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        try:
            await self._persist(meta, self._next(meta, target, self.now_ms()))
        except CoordinatorError as exc:
            log.warning("transaction %s: writing %s failed: %s", meta.transactional_id, target.name, exc.error.name)

    # --- DescribeTransactions / ListTransactions -----------------------------------------------

    def describe(self, txn_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        """NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND, or the state."""
        try:
            self._status(txn_id)
        except CoordinatorError as exc:
            return exc.error, None
        meta = self.txns.get(txn_id)
        return (ErrorCode.none, meta) if meta is not None else (ErrorCode.transactional_id_not_found, None)

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int) -> tuple[ErrorCode, list[Any]]:
        """This broker's transactional ids matching every filter given (empty: no filter);
        COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, []
        now = self.now_ms()
        out = []
        for meta in self.txns.values():
            if states and STATE_NAMES[meta.state] not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state is not S.ONGOING or now - meta.start_ms < min_duration_ms):
                continue
            out.append(meta)
        return ErrorCode.none, out

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(self.expire_interval_ms / 1000)
            try:
                await self.expire_transactional_ids()
            except Exception:
                log.exception("expiring transactional ids failed")

    async def expire_transactional_ids(self, now_ms: int | None = None) -> int:
        """Remove ids with no open transaction and no change for ``transactional.id.expiration.ms``
        (Kafka's ``removeExpiredTransactionalIds``): a tombstone is written, then the id is
        forgotten; a later InitProducerId starts it afresh with a new producer id. Returns how many."""
        now = self.now_ms() if now_ms is None else now_ms
        removed = 0
        idle = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        for meta in list(self.txns.values()):
            if meta.state not in idle or meta.pending is not None or now - meta.last_update_ms < self.id_expiration_ms:
                continue
            partition = partition_for(meta.transactional_id, self.num_partitions)
            if partition not in self.owned:
                continue
            meta.pending = S.DEAD
            try:
                error, last = self.log.append(partition, build_batch([Record(encode_key(meta.transactional_id), None)]))
                if error == ErrorCode.none:
                    error = await self.log.wait_durable(partition, last, WRITE_TIMEOUT_MS)
            finally:
                meta.pending = None
            if error == ErrorCode.none and self.txns.get(meta.transactional_id) is meta:
                del self.txns[meta.transactional_id]
                removed += 1
                log.info("transactional id %s expired and was removed", meta.transactional_id)
        return removed

    async def _abort_timed_out_loop(self) -> None:
        while True:
            await asyncio.sleep(self.abort_interval_ms / 1000)
            now = self.now_ms()
            for meta in list(self.txns.values()):
                if meta.state is S.ONGOING and meta.pending is None and now > meta.start_ms + meta.timeout_ms:
                    log.info("transaction %s timed out after %d ms; aborting", meta.transactional_id, meta.timeout_ms)
                    try:
                        await self._abort(meta, bump=True)
                    except CoordinatorError as exc:
                        log.warning("aborting %s failed: %s", meta.transactional_id, exc.error.name)
