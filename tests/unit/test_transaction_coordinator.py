"""The transaction coordinator over fakes of its typed dependencies: every transition of Kafka's
TransactionState table, InitProducerId (fencing, KIP-360, epoch overflow), AddPartitionsToTxn /
AddOffsetsToTxn, EndTxn and its retries, timeouts, transactional id expiration, coordinator
status errors and loading after a failover. No sockets, no processes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence

from odradek.coordinator.transaction.config import TransactionCoordinatorConfig
from odradek.coordinator.transaction.coordinator import MAX_EPOCH, TransactionCoordinator, TransactionCoordinatorDeps
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
from odradek.protocol.records import Record, build_batch, iter_all_records
from odradek.storage.topic_partition import TopicPartition

from .coordinator_fakes import ManualClock, MemoryOffsetsLog, run, runtime_deps, settle

S = TransactionState
PARTITIONS = 3
A, B, C = "tx1", "tx4", "tx7"  # all three on __transaction_state partition 0 of 3
T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)


class FakeMarkers:
    """Records every marker write; ``hold`` blocks writes until set, ``written`` is the outcome."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, bool, int, list[tuple[str, int]]]] = []
        self.hold: asyncio.Event | None = None
        self.closed = False

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[tuple[str, int]],
        still_owner: Callable[[], bool],
    ) -> bool:
        self.calls.append((producer_id, producer_epoch, commit, coordinator_epoch, list(partitions)))
        if self.hold is not None:
            await self.hold.wait()
        return still_owner()

    async def close(self) -> None:
        self.closed = True


class Harness:
    """A transaction coordinator leading every ``__transaction_state`` partition (epoch 0)."""

    def __init__(self, log: MemoryOffsetsLog | None = None, **config: int) -> None:
        self.clock = ManualClock()
        self.log = log or MemoryOffsetsLog()
        deps, self.metadata, self.create_topic = runtime_deps(self.log, self.clock)
        self.markers = FakeMarkers()
        self.pids = itertools.count(1000)
        settings = {"num_partitions": PARTITIONS, "replication_factor": 3, "min_isr": 2, "offsets_partitions": 5}
        cfg = TransactionCoordinatorConfig(**{**settings, **config})
        self.coordinator = TransactionCoordinator(TransactionCoordinatorDeps(cfg, deps, self._next_pid, self.markers))

    async def _next_pid(self) -> int:
        return next(self.pids)

    async def start(self) -> Harness:
        await self.coordinator.startup()
        await settle()
        return self

    def records(self, txn_id: str) -> list[TransactionMetadata | None]:
        """The values written for ``txn_id``, in order (None: a tombstone)."""
        out: list[TransactionMetadata | None] = []
        for batch in self.log.batches.get(partition_for(txn_id, PARTITIONS), []):
            for rec in iter_all_records(batch):
                assert rec.key is not None
                if decode_key(rec.key) == txn_id:
                    out.append(None if rec.value is None else decode_value(txn_id, rec.value))
        return out

    def states(self, txn_id: str) -> list[TransactionState | None]:
        return [None if m is None else m.state for m in self.records(txn_id)]

    def state(self, txn_id: str) -> TransactionState | None:
        meta = self.coordinator.txns.get(txn_id)
        return None if meta is None else meta.state

    async def init(self, txn_id: str = A, timeout_ms: int = 60000) -> tuple[int, int]:
        error, pid, epoch = await self.coordinator.init_producer_id(txn_id, timeout_ms)
        assert error == ErrorCode.none, error
        return pid, epoch

    async def ongoing(self, txn_id: str = A, partitions: Sequence[tuple[str, int]] = (T0,)) -> tuple[int, int]:
        pid, epoch = await self.init(txn_id)
        assert await self.coordinator.add_partitions(txn_id, pid, epoch, partitions) == ErrorCode.none
        return pid, epoch


def prepared_log(*entries: TransactionMetadata | tuple[str, None]) -> MemoryOffsetsLog:
    """A ``__transaction_state`` log holding one record per entry, as a failed coordinator left it."""
    log = MemoryOffsetsLog()
    for entry in entries:
        if isinstance(entry, TransactionMetadata):
            record = Record(encode_key(entry.transactional_id), encode_value(entry))
            log.append(partition_for(entry.transactional_id, PARTITIONS), build_batch([record]))
        else:
            log.append(partition_for(entry[0], PARTITIONS), build_batch([Record(encode_key(entry[0]), None)]))
    return log


# --- InitProducerId ---------------------------------------------------------------------------------


@run
async def test_init_producer_id_gives_a_new_id_epoch_zero_written_empty() -> None:
    h = await Harness().start()
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.none, 1000, 0)
    assert h.states(A) == [S.EMPTY]
    (meta,) = h.records(A)
    assert meta is not None and (meta.producer_id, meta.producer_epoch, meta.timeout_ms) == (1000, 0, 60000)
    assert await h.coordinator.init_producer_id(B, 60000) == (ErrorCode.none, 1001, 0)


@run
async def test_init_producer_id_bumps_the_epoch_and_fences_the_old_producer() -> None:
    h = await Harness().start()
    pid, epoch = await h.init()
    assert await h.coordinator.init_producer_id(A, 30000) == (ErrorCode.none, pid, epoch + 1)  # Empty -> Empty
    assert h.states(A) == [S.EMPTY, S.EMPTY]
    assert h.coordinator.txns[A].timeout_ms == 30000
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.producer_fenced
    assert await h.coordinator.end_txn(A, pid, epoch, True) == ErrorCode.producer_fenced
    assert await h.coordinator.add_partitions(A, pid + 1, epoch + 1, [T0]) == ErrorCode.invalid_producer_id_mapping
    assert await h.coordinator.add_partitions("unknown", pid, epoch + 1, [T0]) == ErrorCode.invalid_producer_id_mapping


@run
async def test_kip_360_only_the_current_producer_may_reinitialise() -> None:
    h = await Harness().start()
    pid, epoch = await h.init()
    assert await h.coordinator.init_producer_id(A, 60000, pid, epoch) == (ErrorCode.none, pid, epoch + 1)
    assert await h.coordinator.init_producer_id(A, 60000, pid, epoch) == (ErrorCode.producer_fenced, -1, -1)
    assert await h.coordinator.init_producer_id(A, 60000, pid + 7, epoch + 1) == (ErrorCode.producer_fenced, -1, -1)
    assert h.states(A) == [S.EMPTY, S.EMPTY]


@run
async def test_epoch_overflow_gives_a_new_producer_id() -> None:
    old = TransactionMetadata(A, 77, MAX_EPOCH - 1, 60000, S.COMPLETE_COMMIT, set(), 1, 2)
    h = await Harness(prepared_log(old)).start()
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.none, 1000, 0)
    meta = h.records(A)[-1]
    assert meta is not None and (meta.state, meta.producer_id, meta.producer_epoch) == (S.EMPTY, 1000, 0)


@run
async def test_init_producer_id_refuses_bad_requests() -> None:
    h = await Harness(max_timeout_ms=1000).start()
    assert await h.coordinator.init_producer_id("", 100) == (ErrorCode.invalid_request, -1, -1)
    assert await h.coordinator.init_producer_id(A, 1001) == (ErrorCode.invalid_transaction_timeout, -1, -1)
    assert await h.coordinator.init_producer_id(A, 0) == (ErrorCode.invalid_transaction_timeout, -1, -1)
    assert h.log.batches == {}


@run
async def test_init_producer_id_fences_an_ongoing_transaction_through_prepare_epoch_fence() -> None:
    """Ongoing -> PrepareEpochFence -> PrepareAbort (one record, epoch bumped) -> CompleteAbort."""
    h = await Harness().start()
    pid, epoch = await h.ongoing(A, [T1, T0])
    h.markers.hold = asyncio.Event()
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.concurrent_transactions, -1, -1)
    fence = h.records(A)[-1]
    assert fence is not None and (fence.state, fence.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    await settle()
    assert h.markers.calls == [(pid, epoch + 1, False, 0, [T0, T1])]
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.producer_fenced
    h.markers.hold.set()
    await settle()
    assert h.states(A)[-2:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.none, pid, epoch + 2)  # CompleteAbort->Empty
    assert h.coordinator.txns[A].partitions == set()


# --- the transaction --------------------------------------------------------------------------------


@run
async def test_add_partitions_starts_and_grows_the_transaction() -> None:
    h = await Harness().start()
    pid, epoch = await h.init()
    h.clock.advance(5)
    started = h.clock.now
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.none  # Empty -> Ongoing
    h.clock.advance(5)
    assert await h.coordinator.add_partitions(A, pid, epoch, [T1]) == ErrorCode.none  # Ongoing -> Ongoing
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0, T1]) == ErrorCode.none  # nothing new: no write
    assert h.states(A) == [S.EMPTY, S.ONGOING, S.ONGOING]
    meta = h.coordinator.txns[A]
    assert meta.partitions == {T0, T1} and meta.start_ms == started
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0], verify_only=True) == ErrorCode.none
    assert await h.coordinator.add_partitions(A, pid, epoch, [U0], verify_only=True) == ErrorCode.invalid_txn_state
    assert h.states(A) == [S.EMPTY, S.ONGOING, S.ONGOING]


@run
async def test_add_offsets_adds_the_groups_consumer_offsets_partition() -> None:
    h = await Harness().start()
    pid, epoch = await h.init()
    assert await h.coordinator.add_offsets(A, pid, epoch, "group") == ErrorCode.none
    assert h.coordinator.txns[A].partitions == {("__consumer_offsets", partition_for("group", 5))}
    h.metadata.add_topic("__consumer_offsets", 7)  # the topic's own count wins once known
    assert await h.coordinator.add_offsets(A, pid, epoch, "other") == ErrorCode.none
    assert ("__consumer_offsets", partition_for("other", 7)) in h.coordinator.txns[A].partitions


@run
async def test_commit_writes_markers_then_complete_commit() -> None:
    h = await Harness().start()
    pid, epoch = await h.ongoing(A, [T1, U0, T0])
    h.markers.hold = asyncio.Event()
    assert await h.coordinator.end_txn(A, pid, epoch, True) == ErrorCode.none  # Ongoing -> PrepareCommit
    assert h.state(A) is S.PREPARE_COMMIT
    assert await h.coordinator.end_txn(A, pid, epoch, True) == ErrorCode.concurrent_transactions
    assert await h.coordinator.end_txn(A, pid, epoch, False) == ErrorCode.invalid_txn_state
    await settle()
    assert h.markers.calls == [(pid, epoch, True, 0, [T0, T1, U0])]
    h.markers.hold.set()
    await settle()
    assert h.states(A) == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert await h.coordinator.end_txn(A, pid, epoch, True) == ErrorCode.none  # a retry after completion
    assert await h.coordinator.end_txn(A, pid, epoch, False) == ErrorCode.invalid_txn_state
    assert await h.coordinator.add_partitions(A, pid, epoch, [T1]) == ErrorCode.none  # CompleteCommit -> Ongoing
    assert h.coordinator.txns[A].partitions == {T1}


@run
async def test_abort_writes_markers_then_complete_abort() -> None:
    h = await Harness().start()
    pid, epoch = await h.ongoing(A, [T0])
    assert await h.coordinator.end_txn(A, pid, epoch, False) == ErrorCode.none  # Ongoing -> PrepareAbort
    await settle()
    assert h.markers.calls == [(pid, epoch, False, 0, [T0])]
    assert h.states(A) == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert await h.coordinator.end_txn(A, pid, epoch, False) == ErrorCode.none
    assert await h.coordinator.end_txn(A, pid, epoch, True) == ErrorCode.invalid_txn_state
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.none  # CompleteAbort -> Ongoing
    assert h.state(A) is S.ONGOING


@run
async def test_complete_commit_to_empty_and_end_txn_on_empty() -> None:
    h = await Harness().start()
    pid, epoch = await h.ongoing(A, [T0])
    assert await h.coordinator.end_txn(A, pid, epoch, True) == ErrorCode.none
    await settle()
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.none, pid, epoch + 1)  # CompleteCommit->Empty
    assert h.state(A) is S.EMPTY
    assert await h.coordinator.end_txn(A, pid, epoch + 1, True) == ErrorCode.invalid_txn_state


@run
async def test_a_write_in_flight_makes_other_requests_concurrent() -> None:
    h = await Harness().start()
    pid, epoch = await h.init()
    h.log.hold = asyncio.Event()
    first = asyncio.ensure_future(h.coordinator.add_partitions(A, pid, epoch, [T0]))
    await settle()
    assert h.coordinator.txns[A].pending is S.ONGOING
    assert await h.coordinator.add_partitions(A, pid, epoch, [T1]) == ErrorCode.concurrent_transactions
    h.log.hold.set()
    assert await first == ErrorCode.none
    assert h.coordinator.txns[A].pending is None


@run
async def test_a_failed_write_changes_nothing_and_maps_its_error() -> None:
    h = await Harness().start()
    pid, epoch = await h.init()
    h.log.fail_with = ErrorCode.not_leader_or_follower
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.not_coordinator
    h.log.fail_with = ErrorCode.not_enough_replicas
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.coordinator_not_available
    h.log.fail_with = None
    h.log.durable_error = ErrorCode.request_timed_out
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.coordinator_not_available
    meta = h.coordinator.txns[A]
    assert (meta.state, meta.partitions, meta.pending) == (S.EMPTY, set(), None)


@run
async def test_leadership_lost_during_a_write_is_not_coordinator() -> None:
    h = await Harness().start()
    pid, epoch = await h.init()
    h.log.hold = asyncio.Event()
    pending = asyncio.ensure_future(h.coordinator.add_partitions(A, pid, epoch, [T0]))
    await settle()
    h.coordinator.on_become_follower(TopicPartition(TRANSACTION_STATE_TOPIC, partition_for(A, PARTITIONS)))
    h.log.hold.set()
    assert await pending == ErrorCode.not_coordinator
    assert A not in h.coordinator.txns


# --- timeouts and expiration --------------------------------------------------------------------------


@run
async def test_a_transaction_open_longer_than_its_timeout_is_aborted_with_an_epoch_bump() -> None:
    h = await Harness().start()
    pid, epoch = await h.init(A, timeout_ms=1000)
    assert await h.coordinator.add_partitions(A, pid, epoch, [T0]) == ErrorCode.none
    await h.ongoing(B)  # 60 s timeout
    h.clock.advance(1000)
    assert await h.coordinator.abort_timed_out_transactions() == 0  # not past its timeout yet
    h.clock.advance(1)
    assert await h.coordinator.abort_timed_out_transactions() == 1
    await settle()
    assert h.states(A)[-2:] == [S.PREPARE_ABORT, S.COMPLETE_ABORT]
    assert h.coordinator.txns[A].producer_epoch == epoch + 1
    assert h.state(B) is S.ONGOING
    assert await h.coordinator.add_partitions(A, pid, epoch, [T1]) == ErrorCode.producer_fenced


@run
async def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = await Harness(id_expiration_ms=10_000).start()
    pid, _ = await h.init(A)  # Empty
    committed_pid, epoch = await h.ongoing(B)
    assert await h.coordinator.end_txn(B, committed_pid, epoch, True) == ErrorCode.none
    await settle()  # CompleteCommit
    await h.ongoing(C)  # Ongoing: never expires
    h.clock.advance(9_999)
    assert await h.coordinator.expire_transactional_ids() == 0
    h.clock.advance(1)
    assert await h.coordinator.expire_transactional_ids() == 2
    assert h.records(A)[-1] is None and h.records(B)[-1] is None
    assert set(h.coordinator.txns) == {C}
    assert h.coordinator.describe(A) == (ErrorCode.transactional_id_not_found, None)
    error, new_pid, new_epoch = await h.coordinator.init_producer_id(A, 60000)
    assert (error, new_epoch) == (ErrorCode.none, 0) and new_pid != pid


# --- coordinator status --------------------------------------------------------------------------------


@run
async def test_not_coordinator_load_in_progress_and_not_available() -> None:
    h = Harness()
    assert h.coordinator.describe(A) == (ErrorCode.coordinator_not_available, None)  # not started
    h.log.epochs[0] = None
    await h.start()
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.not_coordinator, -1, -1)
    assert await h.coordinator.end_txn(A, 1, 0, True) == ErrorCode.not_coordinator
    h.log.epochs[0] = 4
    h.coordinator.on_become_leader(TopicPartition(TRANSACTION_STATE_TOPIC, 0), 4)
    assert h.coordinator.describe(A) == (ErrorCode.coordinator_load_in_progress, None)
    assert h.coordinator.list(set(), set(), -1) == (ErrorCode.coordinator_load_in_progress, [])
    await settle()
    assert h.coordinator.describe(A) == (ErrorCode.transactional_id_not_found, None)
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.none, 1000, 0)
    await h.coordinator.shutdown()
    assert h.markers.closed
    assert await h.coordinator.init_producer_id(A, 60000) == (ErrorCode.coordinator_not_available, -1, -1)


@run
async def test_describe_and_list() -> None:
    h = await Harness().start()
    pid, _ = await h.ongoing(A, [T0])
    await h.init(B)
    error, meta = h.coordinator.describe(A)
    assert error == ErrorCode.none and meta is not None and meta.partitions == {T0}
    assert [m.transactional_id for m in h.coordinator.list({"Ongoing"}, set(), -1)[1]] == [A]
    assert [m.transactional_id for m in h.coordinator.list(set(), {pid}, -1)[1]] == [A]
    h.clock.advance(100)
    assert h.coordinator.list(set(), set(), 101) == (ErrorCode.none, [])
    assert len(h.coordinator.list(set(), set(), 100)[1]) == 1


@run
async def test_find_coordinator_creates_the_topic_once() -> None:
    h = await Harness().start()
    assert await h.coordinator.find_coordinator(A) == (ErrorCode.none, 0)
    assert await h.coordinator.find_coordinator(B) == (ErrorCode.none, 0)
    ((name, partitions, rf, configs),) = h.create_topic.calls
    assert (name, partitions, rf) == (TRANSACTION_STATE_TOPIC, PARTITIONS, 3)
    assert configs["min.insync.replicas"] == "1" and configs["cleanup.policy"] == "compact"  # one live broker
    h.metadata.leaders[TopicPartition(TRANSACTION_STATE_TOPIC, partition_for(C, PARTITIONS))] = 9
    assert await h.coordinator.find_coordinator(C) == (ErrorCode.coordinator_not_available, -1)  # not live


@run
async def test_find_coordinator_when_the_topic_cannot_be_created() -> None:
    h = await Harness().start()
    h.create_topic.fail_with = KafkaError("no brokers")
    assert await h.coordinator.find_coordinator(A) == (ErrorCode.coordinator_not_available, -1)


# --- loading after a failover --------------------------------------------------------------------------


@run
async def test_a_new_coordinator_completes_what_the_log_left_prepared() -> None:
    committing = TransactionMetadata(A, 10, 3, 60000, S.PREPARE_COMMIT, {T1, T0}, 5, 6)
    aborting = TransactionMetadata(B, 11, 2, 60000, S.PREPARE_ABORT, {U0}, 5, 6)
    open_ = TransactionMetadata(C, 12, 0, 60000, S.ONGOING, {T0}, 5, 6)
    gone = TransactionMetadata("tx10", 13, 0, 60000, S.EMPTY, set(), 5, 6)
    log = prepared_log(committing, aborting, open_, gone, ("tx10", None))
    log.epochs[0] = 7
    h = await Harness(log).start()
    assert sorted(h.markers.calls) == [(10, 3, True, 7, [T0, T1]), (11, 2, False, 7, [U0])]
    assert h.states(A)[-1] is S.COMPLETE_COMMIT and h.state(A) is S.COMPLETE_COMMIT
    assert h.states(B)[-1] is S.COMPLETE_ABORT
    assert h.state(C) is S.ONGOING and h.coordinator.txns[C].partitions == {T0}
    assert "tx10" not in h.coordinator.txns
    assert await h.coordinator.end_txn(A, 10, 3, True) == ErrorCode.none  # the producer's retry


@run
async def test_markers_are_left_to_the_next_coordinator_when_leadership_moves() -> None:
    committing = TransactionMetadata(A, 10, 3, 60000, S.PREPARE_COMMIT, {T0}, 5, 6)
    h = Harness(prepared_log(committing))
    h.markers.hold = asyncio.Event()
    await h.start()
    assert len(h.markers.calls) == 1
    h.coordinator.on_become_follower(TopicPartition(TRANSACTION_STATE_TOPIC, 0))
    h.markers.hold.set()
    await settle()
    assert h.states(A) == [S.PREPARE_COMMIT]  # no CompleteCommit from a former coordinator
    assert h.coordinator.txns == {}
