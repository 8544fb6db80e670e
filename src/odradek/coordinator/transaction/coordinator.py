"""The transaction coordinator (Kafka's ``TransactionCoordinator`` + ``TransactionStateManager``).

Each transactional id lives in one ``__transaction_state`` partition; the broker leading that
partition is its coordinator and keeps the ids of its partitions in memory, loaded from the log
when it becomes leader (the last record per id wins, a null value removes it) and dropped when it
stops leading (ownership, loading and writes are the
:class:`~odradek.coordinator.runtime.CoordinatorRuntime`'s, one load per leader epoch). Every state
change is written to the log (acks=all) before it is acted on or answered, so a new coordinator
after a failover continues from the log: transactions found in PrepareCommit/PrepareAbort get
their markers written and complete (SEEDS §5, step 1 and 7). The coordinator is built by the
broker's start-up from a :class:`TransactionCoordinatorDeps`.

Requests (checks in Kafka's order: coordinator ownership -> NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS, unknown id -> INVALID_PRODUCER_ID_MAPPING, other producer id ->
INVALID_PRODUCER_ID_MAPPING, other epoch -> PRODUCER_FENCED, a transition in flight ->
CONCURRENT_TRANSACTIONS):

- InitProducerId: a new id gets a producer id (epoch 0); a known one gets its epoch bumped (a new
  producer id once the epoch would reach 32767), which fences the previous producer. An ongoing
  transaction is aborted first (epoch bumped, PrepareEpochFence -> PrepareAbort) and the request answered
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
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from odradek.coordinator.group.schemas import GROUP_METADATA_TOPIC
from odradek.coordinator.group.schemas import partition_for as group_partition_for
from odradek.coordinator.runtime import CoordinatorRuntime, InternalTopic, RuntimeDeps
from odradek.coordinator.transaction.config import TransactionCoordinatorConfig
from odradek.coordinator.transaction.markers import MarkerChannel
from odradek.coordinator.transaction.metadata import (
    TRANSACTION_STATE_TOPIC,
    TransactionMetadata,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record, build_batch, iter_all_records, iter_batches
from odradek.storage.topic_partition import TopicPartition

__all__ = ["TransactionCoordinator", "TransactionCoordinatorDeps"]

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

_WRITE_ERRORS = {
    ErrorCode.not_coordinator: ErrorCode.not_coordinator,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.unknown_topic_or_partition: ErrorCode.not_coordinator,
}
"""A failed write of ``__transaction_state`` as the client is told; others COORDINATOR_NOT_AVAILABLE."""

Loaded = dict[str, TransactionMetadata | None]
"""What replaying a partition found: the last value per transactional id (None: a tombstone)."""


class CoordinatorError(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorDeps:
    """What the transaction coordinator uses: its settings, its runtime's dependencies (the
    ``__transaction_state`` partitions on this broker, the metadata view, topic creation, clock),
    producer id allocation and the channel that writes markers."""

    config: TransactionCoordinatorConfig
    runtime: RuntimeDeps
    generate_producer_id: Callable[[], Awaitable[int]]
    markers: MarkerChannel


class TransactionCoordinator:
    """See the module docstring. The broker's ``transaction_coordinator``."""

    def __init__(self, deps: TransactionCoordinatorDeps) -> None:
        config = deps.config
        self.config = config
        self.runtime: CoordinatorRuntime[Loaded] = CoordinatorRuntime(
            "transaction coordinator",
            InternalTopic(
                TRANSACTION_STATE_TOPIC, config.num_partitions, config.replication_factor, config.topic_configs
            ),
            deps.runtime,
            self,
        )
        self.log = self.runtime.log
        self.metadata = deps.runtime.metadata
        self._generate_producer_id = deps.generate_producer_id
        self.markers = deps.markers
        self.txns: dict[str, TransactionMetadata] = {}
        self._completing: dict[str, asyncio.Event] = {}
        """Transactional id -> set when its markers and Complete state are written (or given up)."""

    @property
    def active(self) -> bool:
        return self.runtime.active

    def now_ms(self) -> int:
        return self.runtime.time_ms()

    def partition_for(self, txn_id: str) -> int:
        return self.runtime.partition_for(txn_id)

    # --- lifecycle and ownership ---------------------------------------------------------------

    async def startup(self) -> None:
        self.runtime.start()
        self.runtime.every(self.config.abort_interval_ms, self.abort_timed_out_transactions, "aborting timed out")
        self.runtime.every(self.config.expire_interval_ms, self.expire_transactional_ids, "expiring ids")

    async def shutdown(self) -> None:
        await self.runtime.stop()
        await self.markers.close()

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.runtime.on_become_leader(tp, leader_epoch)

    def on_become_follower(self, tp: TopicPartition) -> None:
        self.runtime.on_become_follower(tp)

    # the runtime's PartitionLoader

    def unload(self, partition: int) -> None:
        for txn_id in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[txn_id]

    async def replay(self, partition: int, epoch: int) -> Loaded | None:
        """Read the partition: the last record per transactional id wins."""
        loaded: Loaded = {}
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
            return None
        return loaded

    def install(self, partition: int, epoch: int, loaded: Loaded) -> None:
        """Take the loaded ids over; then finish the transactions the log left prepared."""
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
            mine = self.partition_for(meta.transactional_id) == partition
            if mine and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._start_completion(meta, meta.state is S.PREPARE_COMMIT)

    # --- FindCoordinator ---------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of ``key``'s coordinator; creates ``__transaction_state`` if missing."""
        return await self.runtime.find_coordinator(key)

    # --- shared checks and the log ---------------------------------------------------------------

    def _status(self, txn_id: str) -> None:
        error = self.runtime.status(self.partition_for(txn_id))
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
        meta.pending = target.state
        try:
            batch = build_batch([Record(encode_key(meta.transactional_id), encode_value(target))])
            error, _ = await self.runtime.write(self.partition_for(meta.transactional_id), batch, WRITE_TIMEOUT_MS)
        finally:
            meta.pending = None
        if error != ErrorCode.none:
            raise CoordinatorError(_WRITE_ERRORS.get(error, ErrorCode.coordinator_not_available))
        meta.producer_id, meta.producer_epoch, meta.timeout_ms = (
            target.producer_id,
            target.producer_epoch,
            target.timeout_ms,
        )
        meta.partitions = set(target.partitions)
        meta.start_ms = target.start_ms
        meta.transition(target.state, target.last_update_ms)

    @staticmethod
    def _next(
        meta: TransactionMetadata,
        state: TransactionState,
        now_ms: int,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: set[tuple[str, int]] | None = None,
    ) -> TransactionMetadata:
        """A copy of ``meta`` with the given fields changed, moved to ``state`` (checked
        against Kafka's table)."""
        target = dataclasses.replace(
            meta,
            producer_id=meta.producer_id if producer_id is None else producer_id,
            producer_epoch=meta.producer_epoch if producer_epoch is None else producer_epoch,
            timeout_ms=meta.timeout_ms if timeout_ms is None else timeout_ms,
            partitions=set(meta.partitions if partitions is None else partitions),
            pending=None,
        )
        target.transition(state, now_ms)
        return target

    # --- InitProducerId ------------------------------------------------------------------------

    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id."""
        try:
            if txn_id == "":
                return ErrorCode.invalid_request, -1, -1
            if not 0 < timeout_ms <= self.config.max_timeout_ms:
                return ErrorCode.invalid_transaction_timeout, -1, -1
            await self._await_completion(txn_id)
            self._status(txn_id)
            meta = self.txns.get(txn_id)
            now = self.now_ms()
            if meta is None:
                pid = await self._generate_producer_id()
                meta = TransactionMetadata(txn_id, pid, -1, timeout_ms, S.EMPTY, set(), -1, now)
                self.txns[txn_id] = meta
                await self._persist(meta, self._next(meta, S.EMPTY, now, producer_epoch=0))
                return ErrorCode.none, meta.producer_id, meta.producer_epoch
            if meta.pending is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
                return ErrorCode.concurrent_transactions, -1, -1
            if producer_id >= 0 and (producer_id, epoch) != (meta.producer_id, meta.producer_epoch):
                return ErrorCode.producer_fenced, -1, -1  # KIP-360: only the current producer may recover
            if meta.state is S.ONGOING:
                await self._fence_and_abort(meta)  # fences the old producer, then aborts
                return ErrorCode.concurrent_transactions, -1, -1
            if meta.producer_epoch + 1 >= MAX_EPOCH:
                pid = await self._generate_producer_id()
                target = self._next(
                    meta, S.EMPTY, now, producer_id=pid, producer_epoch=0, timeout_ms=timeout_ms, partitions=set()
                )
            else:
                epoch_ = meta.producer_epoch + 1
                target = self._next(meta, S.EMPTY, now, producer_epoch=epoch_, timeout_ms=timeout_ms, partitions=set())
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
            # a new transaction (after Empty/CompleteCommit/CompleteAbort) starts with no partitions,
            # as Kafka's prepareAddPartitions: the last transaction's get no markers again
            partitions = meta.partitions | wanted if meta.state is S.ONGOING else wanted
            await self._persist(meta, self._next(meta, S.ONGOING, now, partitions=partitions))
            return ErrorCode.none
        except CoordinatorError as exc:
            return exc.error

    async def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str) -> ErrorCode:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        count = self.metadata.partition_count(GROUP_METADATA_TOPIC) or self.config.offsets_partitions
        return await self.add_partitions(
            txn_id, producer_id, epoch, [(GROUP_METADATA_TOPIC, group_partition_for(group_id, count))]
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

    async def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        """Abort an Ongoing transaction (timeout, or fencing by InitProducerId), as Kafka's
        ``prepareFenceProducerEpoch`` then ``PrepareAbort``: the epoch is bumped (Ongoing ->
        PrepareEpochFence) so the old producer can write nothing more, and the abort is written
        with the new epoch (PrepareEpochFence -> PrepareAbort) in one record."""
        now = self.now_ms()
        target = self._next(meta, S.PREPARE_EPOCH_FENCE, now, producer_epoch=meta.producer_epoch + 1)
        target.transition(S.PREPARE_ABORT, now)
        await self._persist(meta, target)
        self._start_completion(meta, commit=False)

    def _start_completion(self, meta: TransactionMetadata, commit: bool) -> None:
        self._completing.setdefault(meta.transactional_id, asyncio.Event())
        self.runtime.spawn(self._complete(meta, commit))

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
        partition = self.partition_for(meta.transactional_id)
        coordinator_epoch = self.runtime.epoch(partition)
        if coordinator_epoch is None:
            return  # no longer the coordinator: the new one finishes it from the log
        written = await self.markers.write(
            meta.producer_id,
            meta.producer_epoch,
            commit,
            coordinator_epoch,
            sorted(meta.partitions),
            still_owner=lambda: self.runtime.epoch(partition) == coordinator_epoch,
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

    def list(
        self, states: set[str], producer_ids: set[int], min_duration_ms: int
    ) -> tuple[ErrorCode, list[TransactionMetadata]]:
        """This broker's transactional ids matching every filter given (empty: no filter);
        COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if self.runtime.any_loading:
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

    async def expire_transactional_ids(self, now_ms: int | None = None) -> int:
        """Remove ids with no open transaction and no change for ``transactional.id.expiration.ms``
        (Kafka's ``removeExpiredTransactionalIds``): a tombstone is written (the id goes Dead),
        then the id is forgotten; a later InitProducerId starts it afresh with a new producer id.
        Returns how many."""
        now = self.now_ms() if now_ms is None else now_ms
        removed = 0
        idle = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        for meta in list(self.txns.values()):
            if meta.state not in idle or meta.pending is not None:
                continue
            if now - meta.last_update_ms < self.config.id_expiration_ms:
                continue
            partition = self.partition_for(meta.transactional_id)
            if self.runtime.epoch(partition) is None:
                continue
            meta.pending = S.DEAD
            try:
                tombstone = build_batch([Record(encode_key(meta.transactional_id), None)])
                error, _ = await self.runtime.write(partition, tombstone, WRITE_TIMEOUT_MS)
            finally:
                meta.pending = None
            if error == ErrorCode.none and self.txns.get(meta.transactional_id) is meta:
                meta.transition(S.DEAD, now)
                del self.txns[meta.transactional_id]
                removed += 1
                log.info("transactional id %s expired and was removed", meta.transactional_id)
        return removed

    async def abort_timed_out_transactions(self, now_ms: int | None = None) -> int:
        """Abort, with an epoch bump, every Ongoing transaction open longer than its timeout
        (Kafka's ``abortTimedOutTransactions``); returns how many aborts were written."""
        now = self.now_ms() if now_ms is None else now_ms
        aborted = 0
        for meta in list(self.txns.values()):
            if meta.state is S.ONGOING and meta.pending is None and now > meta.start_ms + meta.timeout_ms:
                log.info("transaction %s timed out after %d ms; aborting", meta.transactional_id, meta.timeout_ms)
                try:
                    await self._fence_and_abort(meta)
                    aborted += 1
                except CoordinatorError as exc:
                    log.warning("aborting %s failed: %s", meta.transactional_id, exc.error.name)
        return aborted
