"""One partition's log (Kafka's ``UnifiedLog``): segments, producer state, transactions, epochs.

:class:`Log` is the one log object of a partition. It extends
:class:`~odradek.storage.local_log.LocalLog` (the segments) with what Kafka's ``UnifiedLog`` keeps
beside them, all in the partition directory:

- the producer state (:class:`~odradek.storage.producer_state.ProducerStateManager`): each
  idempotent producer's epoch and last sequences, checked and updated inside the append;
- the transaction state (:class:`~odradek.storage.txn_state.TxnState`): open transactions, the
  first unstable offset (:attr:`Log.last_stable_offset`), aborted ranges, each abort also written
  to the ``.txnindex`` of the segment holding its marker;
- the leader epoch cache (``leader-epoch-checkpoint``, :mod:`odradek.storage.leader_epoch`);
- producer snapshots (``<offset>.snapshot``, :mod:`odradek.storage.producer_snapshot`): taken
  whenever a segment rolls, at the new segment's base offset before anything is written to it
  (Kafka's ``roll``), and by :meth:`Log.take_producer_snapshot` at a clean shutdown; the newest
  three are kept.

The appends, each answering one :class:`~odradek.storage.results.LogAppendInfo`:

- :meth:`Log.append_as_leader` (origin ``client`` or ``coordinator``) and, for clients,
  :meth:`Log.append_as_leader_async` (large payloads written by an I/O thread): the batches are
  checked (:func:`~odradek.storage.append.check_leader_batches`); a client's idempotent batches
  are then checked against the producer state (Kafka 3.9's ``ProducerAppendInfo``:
  INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER; a retry of a batch still in the state is
  not appended and is answered with its original offsets, ``duplicate`` set); offsets are
  assigned, the bytes written and committed, and the batches recorded in the producer and
  transaction state. The coordinators' appends (markers, internal topics) skip the sequence
  check, as Kafka's non-client origins do.
- :meth:`Log.append_as_follower` (the replication origin): batches carrying the leader's offsets;
  a leader epoch newer than the cache's latest is assigned at its batch's base offset first, then
  the batches are written and recorded as on the leader.

Both record from the batch headers the check returned (no second walk over the payload; only a
control batch is decoded, for its marker). The state is updated on the event loop right after the
commit, under the append lock, also when the caller of an asynchronous append was cancelled: the
producer state knows every batch in the log, or a retry of one would be appended again.

Recovery (at open, after a truncation): the epoch cache drops entries past the log end offset;
snapshots above the log end offset are deleted; the producer and transaction state come from the
newest snapshot at or below the log end offset (an unreadable one is logged and skipped) and then
from the batch headers after it; producers whose last batch lies below the log start offset are
dropped. A crash before a roll's snapshot or during its write (a ``.tmp`` left over) only makes the
next open read more batch headers: the segments are the truth, snapshots a shortcut.

Threading: as :class:`~odradek.storage.local_log.LocalLog`, the broker's event-loop thread only;
only the byte copy of :meth:`Log.append_as_leader_async` runs on an I/O thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Literal

from odradek.errors import KafkaStorageError
from odradek.protocol.records import LOG_OVERHEAD, BatchHeader
from odradek.storage.append import (
    PreparedAppend,
    check_follower_batches,
    check_leader_batches,
    prepare_leader_append,
)
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.local_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, LocalLog, wall_clock_ms
from odradek.storage.producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    delete_snapshots,
    latest_snapshot,
    read_snapshot,
    write_snapshot,
)
from odradek.storage.producer_state import NO_PRODUCER_ID, ProducerStateManager
from odradek.storage.results import LogAppendInfo
from odradek.storage.segment import LogSegment
from odradek.storage.txn_state import TxnState, control_marker

__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "Log", "wall_clock_ms"]

logger = logging.getLogger("odradek.storage.log")

Records = bytes | bytearray | memoryview


class Log(LocalLog):
    """A partition's log: :class:`LocalLog` plus producer state, transaction state, leader epoch
    cache and producer snapshots behind the appends. See the module docstring.

    Opening (:class:`LocalLog`'s arguments) runs the segment loader (recovery), then drops the
    epoch cache's entries past the log end and rebuilds the producer and transaction state.
    """

    leader_epoch_cache: LeaderEpochFileCache
    """(epoch, start offset) of every leader epoch in the log (KIP-101)."""
    producer_state: ProducerStateManager
    txn_state: TxnState

    def _after_load(self) -> None:
        self.leader_epoch_cache = LeaderEpochFileCache(self._dir)
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset + 1)
        if self.leader_epoch_cache.unreadable:
            self._assign_recovered_epochs(self._log_start_offset)
        elif self._recovered_from is not None:
            self._assign_recovered_epochs(self._recovered_from)
        self.producer_state = ProducerStateManager()
        self.txn_state = TxnState(self)
        self.load_producer_state()

    def _assign_recovered_epochs(self, from_offset: int) -> None:
        """The epochs of the batches at or after ``from_offset`` (the segments recovery scanned,
        or every segment when the checkpoint was unreadable) enter the cache, as Kafka's segment
        recovery assigns them: the checkpoint is durable only below the recovery point."""
        cache = self.leader_epoch_cache
        ends = [*self._base_offsets[1:], self._log_end_offset]
        for segment, end in zip(self._segments, ends, strict=True):
            if end <= from_offset:
                continue
            for _pos, h in segment.log.scan_batches():
                if h.partition_leader_epoch > cache.latest_epoch and h.base_offset >= from_offset:
                    cache.assign(h.partition_leader_epoch, h.base_offset)

    def flush(self, offset: int | None = None) -> None:
        """:meth:`LocalLog.flush`, the epoch checkpoint made durable first: every offset below
        the recovery point then has its epoch on disk (see :mod:`odradek.storage.leader_epoch`)."""
        self.leader_epoch_cache.sync()
        super().flush(offset)

    def close(self) -> None:
        """:meth:`LocalLog.close`, the epoch checkpoint made durable first."""
        if not self.closed:
            self.leader_epoch_cache.sync()
        super().close()

    @property
    def last_stable_offset(self) -> int:
        """``min(first unstable offset, high watermark)``: read_committed reads stop there."""
        hw = self._high_watermark
        first_unstable = self.txn_state.first_unstable_offset()
        return hw if first_unstable is None else min(first_unstable, hw)

    # --- appends ------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: Records,
        leader_epoch: int = 0,
        *,
        origin: Literal["client", "coordinator"] = "client",
    ) -> LogAppendInfo:
        """Check, assign offsets from the log end offset, append and record a payload, on the loop.

        Raises the errors of :func:`odradek.storage.append.check_leader_batches` (CorruptRecordError,
        InvalidRecordError, RecordTooLargeError, RecordValidationError for a client's records) and,
        for a client, INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER; nothing is written
        unless every batch passes. Base offsets and ``leader_epoch`` are written over the batches'
        first bytes as they go to the file; LogAppendTime topics also get the broker time. An empty
        payload appends nothing (offsets -1). Raises KafkaStorageError while an asynchronous append
        is in progress (the appends of one log are serialized by :meth:`append_as_leader_async`).
        """
        self._check_open()
        headers = check_leader_batches(records, self._config, origin, self._time_ms, self._tp)
        if not headers:
            return self._empty_info()
        if self._append_lock.locked():
            raise KafkaStorageError(f"{self._tp}: an asynchronous append is in progress")
        if origin == "client" and (duplicate := self._check_producers(headers)) is not None:
            return duplicate
        prepared = self._prepare_leader_append(records, headers, leader_epoch)
        segment, position = self._segment_for(prepared)
        segment.log.write_at(prepared.chunks, position)
        return self._commit_and_record(records, segment, position, prepared)

    async def append_as_leader_async(
        self,
        records: Records,
        leader_epoch: int = 0,
        *,
        executor: Executor | None = None,
        executor_min_bytes: int = 0,
        on_commit: Callable[[LogAppendInfo], None] | None = None,
    ) -> LogAppendInfo:
        """:meth:`append_as_leader` for clients, writing payloads of ``executor_min_bytes`` or more
        on ``executor`` (an I/O thread) while the event loop goes on.

        Appends to one log are serialized (an asyncio lock held from the producer-state check to
        the commit), so offsets are assigned in arrival order and each client payload is checked
        against the state every earlier append left. While the bytes are written, readers see the
        log as it was; the log end offset moves only when the write is committed. A log closed,
        truncated or deleted meanwhile fails the append with KafkaStorageError and keeps none of its
        bytes. Retention leaves the active segment alone while a write is in progress. ``records``
        must stay unchanged until the append is committed. ``on_commit`` runs on the loop right
        after the commit and the producer-state update, under the lock (not for a duplicate).

        Once its offsets are assigned an append is finished whatever happens to the caller, as
        Kafka's request handler thread finishes an append whose connection closed: cancelling the
        caller (its connection was lost) while an I/O thread writes leaves the write, the commit,
        the producer-state update and ``on_commit`` to go on, and the lock is held until then, so
        the next append cannot write over bytes still being written.
        """
        self._check_open()
        headers = check_leader_batches(records, self._config, "client", self._time_ms, self._tp)
        if not headers:
            return self._empty_info()
        await self._append_lock.acquire()
        release = True
        try:
            self._check_open()
            if (duplicate := self._check_producers(headers)) is not None:
                return duplicate
            prepared = self._prepare_leader_append(records, headers, leader_epoch)
            segment, position = self._segment_for(prepared)
            if executor is None or prepared.size < executor_min_bytes:
                segment.log.write_at(prepared.chunks, position)
                return self._committed(records, segment, position, prepared, on_commit)
            self._write_in_progress = True
            write = asyncio.ensure_future(
                self._write_and_commit(executor, records, segment, position, prepared, on_commit)
            )
            write.add_done_callback(_retrieve_result)
            release = False  # the write's task releases the lock
            return await asyncio.shield(write)
        finally:
            if release:
                self._append_lock.release()

    async def _write_and_commit(
        self,
        executor: Executor,
        records: Records,
        segment: LogSegment,
        position: int,
        prepared: PreparedAppend,
        on_commit: Callable[[LogAppendInfo], None] | None,
    ) -> LogAppendInfo:
        """The I/O-thread half of :meth:`append_as_leader_async` (its own task, never cancelled
        with the caller); releases the append lock when done."""
        try:
            try:
                await asyncio.get_running_loop().run_in_executor(
                    executor, segment.log.write_at, prepared.chunks, position
                )
            finally:
                self._write_in_progress = False
            return self._committed(records, segment, position, prepared, on_commit)
        finally:
            self._append_lock.release()

    def _committed(
        self,
        records: Records,
        segment: LogSegment,
        position: int,
        prepared: PreparedAppend,
        on_commit: Callable[[LogAppendInfo], None] | None,
    ) -> LogAppendInfo:
        info = self._commit_and_record(records, segment, position, prepared)
        if on_commit is not None:
            on_commit(info)
        return info

    def append_as_follower(self, records: Records) -> LogAppendInfo:
        """Append batches that already carry their offsets (replication), stored as given.

        Checks of :func:`odradek.storage.append.check_follower_batches` (offsets at or above the
        log end offset and increasing, headers, CRCs, sizes); no producer-state check (the leader
        made it). A batch whose leader epoch is newer than the cache's latest starts that epoch at
        its base offset (Kafka's ``maybeAssignEpochStartOffset``). An empty payload appends
        nothing. Raises KafkaStorageError while an asynchronous append is in progress.
        """
        self._check_open()
        prepared = check_follower_batches(records, self._log_end_offset, self._config.max_message_bytes, self._tp)
        if prepared is None:
            return self._empty_info()
        if self._append_lock.locked():
            raise KafkaStorageError(f"{self._tp}: an asynchronous append is in progress")
        self._assign_epochs(prepared.headers)
        segment, position = self._segment_for(prepared)
        segment.log.write_at(prepared.chunks, position)
        return self._commit_and_record(records, segment, position, prepared)

    def _assign_epochs(self, headers: Sequence[BatchHeader]) -> None:
        cache = self.leader_epoch_cache
        latest = cache.latest_epoch
        for h in headers:
            if h.partition_leader_epoch > latest:
                latest = h.partition_leader_epoch
                if h.base_offset >= self._log_end_offset:
                    cache.assign(latest, h.base_offset)

    def _prepare_leader_append(self, records: Records, headers: list[BatchHeader], leader_epoch: int) -> PreparedAppend:
        append_time = self._time_ms() if self._config.message_timestamp_type == "LogAppendTime" else None
        return prepare_leader_append(records, headers, self._log_end_offset, leader_epoch, append_time)

    def _check_producers(self, headers: list[BatchHeader]) -> LogAppendInfo | None:
        """The producer-state check of a client's batches (raises); the answer for a duplicate."""
        original = self.producer_state.check(headers)
        if original is None:
            return None
        first, last = original
        return LogAppendInfo(first, last, -1, -1, -1, self._log_start_offset, 0, 0, duplicate=True)

    def _commit_and_record(
        self, records: Records, segment: LogSegment, position: int, prepared: PreparedAppend
    ) -> LogAppendInfo:
        """Commit ``prepared`` (written at ``position`` of ``segment``), then record its batches in
        the producer and transaction state; the append's info."""
        info = self._commit(segment, position, prepared)
        view = memoryview(records)
        for h, (pos, last, _ts, size) in zip(prepared.headers, prepared.metas, strict=True):
            info.transactional |= h.is_transactional
            info.control |= h.is_control
            if h.producer_id == NO_PRODUCER_ID:
                continue
            base = last - h.last_offset_delta
            batch = view[pos : pos + size]
            marker = control_marker(batch) if h.is_control else None
            self.producer_state.record(h, base, marker[1] if marker else -1)
            if h.is_transactional:
                self.txn_state.on_batch(h, base, batch, self.last_stable_offset)
        return info

    # --- rolling and truncation ---------------------------------------------------------------

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """:meth:`LocalLog.roll`, then a producer snapshot at the new segment's base offset: the
        state of every batch before it (Kafka's ``roll``). Not when the active segment stays."""
        previous = self.active_segment
        segment = super().roll(expected_next_offset)
        if segment is not previous:
            self.take_producer_snapshot(segment.base_offset)
        return segment

    def truncate_to(self, offset: int) -> bool:
        """:meth:`LocalLog.truncate_to`; the epoch cache drops the epochs starting at or after
        ``offset`` even when no batch goes (a broker that led an epoch without writing in it must
        not name that epoch in its next fetch). When batches went, the snapshots above ``offset``
        are deleted and the producer and transaction state rebuilt."""
        self.leader_epoch_cache.truncate_from_end(offset)
        if not super().truncate_to(offset):
            return False
        delete_snapshots(self._dir, above=offset)
        self.load_producer_state()
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """:meth:`LocalLog.truncate_fully_and_start_at`; every snapshot is deleted and the producer
        and transaction state start empty."""
        super().truncate_fully_and_start_at(new_offset)
        delete_snapshots(self._dir, above=-1)
        self.load_producer_state()

    # --- producer state -----------------------------------------------------------------------

    def load_producer_state(self) -> None:
        """Producer and transaction state from the newest snapshot at or below the log end offset,
        then the batch headers after it; from every batch when there is no usable snapshot (an
        unreadable one is logged and skipped). Producers whose batches retention removed are dropped."""
        start, entries = self._log_start_offset, list[SnapshotEntry]()
        delete_snapshots(self._dir, above=self._log_end_offset)
        found = latest_snapshot(self._dir, self._log_end_offset)
        if found is not None:
            try:
                entries = read_snapshot(found[1])
                start = max(start, found[0])
            except (OSError, CorruptSnapshotError) as e:
                logger.warning("%s: producer snapshot unusable (%s); rebuilding from the log", self._tp, e)
        self.producer_state.load(entries)
        self.txn_state.rebuild(
            {e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0}
        )
        segments = self._segments
        for i, segment in enumerate(segments):
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
                continue
            for pos, h in segment.scan_batches():
                if h.base_offset + h.last_offset_delta < start:
                    continue
                marker = control_marker(segment.read_at(pos, h.batch_length + LOG_OVERHEAD)) if h.is_control else None
                self.producer_state.record(h, h.base_offset, marker[1] if marker else -1)
                self.txn_state.replay(h)
        self.producer_state.truncate_head(self._log_start_offset)

    def take_producer_snapshot(self, offset: int | None = None) -> None:
        """Write the producer state up to ``offset`` (default: the log end offset) to
        ``<offset>.snapshot``; keeps the newest three. A failed write is logged (the state is
        rebuilt from the log instead)."""
        offset = self._log_end_offset if offset is None else offset
        entries = self.producer_state.snapshot_entries(self.txn_state.ongoing)
        try:
            write_snapshot(self._dir, offset, entries)
            delete_snapshots(self._dir)
        except OSError as e:
            logger.warning("%s: producer snapshot at %d not written: %s", self._tp, offset, e)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> None:
        """Retention and ``producer.id.expiration.ms`` (run periodically): producers whose batches
        are gone or idle that long, and aborted ranges below the log start, are forgotten."""
        self.producer_state.truncate_head(self._log_start_offset)
        self.txn_state.on_log_start(self._log_start_offset)
        self.producer_state.remove_expired(now_ms, expiration_ms, keep=self.txn_state.ongoing)


def _retrieve_result(task: asyncio.Future[LogAppendInfo]) -> None:
    """Mark the outcome of an append's write task as seen: when its caller was cancelled nobody
    awaits it, and a failure (e.g. the log closed meanwhile) is not news worth a warning."""
    if not task.cancelled():
        task.exception()
