"""Idempotent producers on one partition: sequence numbers and epochs per producer id (Kafka's ProducerStateManager).

For every producer id that wrote to the partition the state keeps its epoch and the last
``MAX_CACHED_BATCHES`` (5) batches it appended: (first sequence, last sequence, first offset,
last offset). A leader checks each produced batch that carries a producer id (KIP-98):

- the epoch is older than the producer's: INVALID_PRODUCER_EPOCH;
- the same epoch and the same sequence range as a cached batch: a *duplicate* (a retry whose
  first answer was lost): nothing is appended and the answer carries the original offsets;
- the same epoch and a first sequence that does not follow the last one (with wrap-around after
  2^31-1): OUT_OF_ORDER_SEQUENCE_NUMBER;
- a newer epoch: its first sequence must be 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER), as a bumped
  epoch starts again (KIP-360);
- a producer the state does not know (it never wrote here, or retention or expiry removed it):
  accepted at any sequence, as Kafka 2.5+ does (KIP-360; Kafka 3.9's ``ProducerAppendInfo``
  never answers UNKNOWN_PRODUCER_ID to a Produce). Answering UNKNOWN_PRODUCER_ID instead makes
  librdkafka bump the producer's epoch and renumber every partition from 0, and a batch that was
  appended but not acknowledged at that moment is then sent again under the new epoch, where no
  broker can recognise it as a retry: a duplicate.

The partition's log (:class:`odradek.storage.log.Log`) owns it: its leader append checks a
client's batches against it before assigning offsets, and both appends record every batch they
write, so a new leader after a failover knows the producers' sequences and still recognises the
retry of a batch the old leader had replicated.
Producers go away when retention removes their last batch (:meth:`truncate_head`) or when their
last batch is older than ``producer.id.expiration.ms`` and they have no open transaction
(:meth:`remove_expired`). The state survives restarts in producer snapshot files
(:mod:`odradek.storage.producer_snapshot`): :meth:`snapshot_entries` / :meth:`load` keep the
last batch of each producer, which is what Kafka's snapshot holds.

Event loop only.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from odradek.protocol.records import BatchHeader, iter_batches
from odradek.storage.producer_snapshot import SnapshotEntry

MAX_CACHED_BATCHES = 5
NO_PRODUCER_ID = -1
_SEQ_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerStateEntry:
    producer_id: int
    epoch: int
    last_timestamp: int = -1
    """The max timestamp of its last batch (``producer.id.expiration.ms`` counts from it)."""
    coordinator_epoch: int = -1
    """The coordinator epoch of its last transaction marker (TRANSACTION_COORDINATOR_FENCED below it)."""
    last_offset: int = -1
    """The offset of its last batch or marker (retention removes the producer when it goes)."""
    batches: collections.deque[BatchMetadata] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_CACHED_BATCHES)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _next_seq(seq: int) -> int:
    return 0 if seq == _SEQ_MAX else seq + 1


class ProducerStateManager:
    """Producer id -> :class:`ProducerStateEntry` for one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}

    def check(self, headers: Iterable[BatchHeader]) -> tuple[int, int] | None:
        """Check a leader append before it is written (Kafka's ``ProducerAppendInfo.checkSequence``
        and ``checkProducerEpoch``, rules above); (first offset, last offset) of the original when
        the whole payload is a duplicate, else None. Raises INVALID_PRODUCER_EPOCH or
        OUT_OF_ORDER_SEQUENCE_NUMBER (nothing must be appended then)."""
        duplicate: tuple[int, int] | None = None
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) within this payload
        count = 0
        for h in headers:
            count += 1
            if h.producer_id == NO_PRODUCER_ID or h.is_control:
                continue
            first_seq, last_seq = h.base_sequence, h.base_sequence + h.last_offset_delta
            entry = self.producers.get(h.producer_id)
            if h.producer_id in pending:
                epoch, prev_seq = pending[h.producer_id]
            elif entry is not None:
                epoch, prev_seq = entry.epoch, entry.last_seq
            else:  # never wrote here, or retention / expiry removed it: any sequence
                pending[h.producer_id] = (h.producer_epoch, last_seq)
                continue
            if h.producer_epoch < epoch:
                raise InvalidProducerEpochError(
                    f"producer {h.producer_id} epoch {h.producer_epoch} is older than the current {epoch}"
                )
            if entry is not None and h.producer_epoch == entry.epoch and h.producer_id not in pending:
                original = entry.find_duplicate(first_seq, last_seq)
                if original is not None:
                    duplicate = (original.first_offset, original.last_offset)
                    continue
            if h.producer_epoch > epoch and first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch {h.producer_epoch} of producer {h.producer_id}: "
                    f"{first_seq} (the current epoch is {epoch})"
                )
            if h.producer_epoch == epoch and prev_seq >= 0 and first_seq != _next_seq(prev_seq):
                raise OutOfOrderSequenceError(
                    f"producer {h.producer_id} epoch {h.producer_epoch}: "
                    f"sequence {first_seq} does not follow {prev_seq}"
                )
            pending[h.producer_id] = (h.producer_epoch, last_seq)
        if duplicate is not None and count == 1:
            return duplicate
        if duplicate is not None:
            raise OutOfOrderSequenceError("a produce payload mixes a duplicate batch with new ones")
        return None

    def record(self, h: BatchHeader, base_offset: int, coordinator_epoch: int = -1) -> None:
        """Record an appended batch (leader: offsets just assigned; follower: as fetched). A
        transaction marker (control batch, ``coordinator_epoch`` from its value) ends the
        producer's transaction: a newer epoch in it resets the producer's sequences (Kafka's
        ``appendEndTxnMarker``), and later markers from an older coordinator are refused."""
        if h.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None or h.producer_epoch > entry.epoch:
            entry = self.producers[h.producer_id] = ProducerStateEntry(
                h.producer_id, h.producer_epoch, coordinator_epoch=entry.coordinator_epoch if entry else -1
            )
        entry.last_timestamp = max(entry.last_timestamp, h.max_timestamp)
        entry.last_offset = base_offset + h.last_offset_delta
        if h.is_control:
            entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
            return
        entry.batches.append(
            BatchMetadata(
                h.base_sequence, h.base_sequence + h.last_offset_delta, base_offset, base_offset + h.last_offset_delta
            )
        )

    def record_payload(self, records: bytes | memoryview, first_offset: int) -> None:
        """Record the batches of a leader append whose first offset is ``first_offset``."""
        offset = first_offset
        for _pos, h in iter_batches(records):
            self.record(h, offset)
            offset += h.last_offset_delta + 1

    def truncate_head(self, log_start_offset: int) -> list[int]:
        """Retention moved the log start: producers whose last batch is below it are removed."""
        gone = [pid for pid, e in self.producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self.producers[pid]
        return gone

    def remove_expired(self, now_ms: int, expiration_ms: int, keep: Iterable[int] = ()) -> list[int]:
        """Remove producers whose last batch is ``expiration_ms`` old, except those in ``keep``
        (the producers with an open transaction)."""
        kept = set(keep)
        gone = [
            pid
            for pid, e in self.producers.items()
            if pid not in kept and e.last_timestamp >= 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
        return gone

    def snapshot_entries(self, open_txn_first_offsets: dict[int, int]) -> list[SnapshotEntry]:
        """One entry per producer: its epoch and last batch (and its open transaction's first offset)."""
        out = []
        for pid, e in sorted(self.producers.items()):
            last = e.batches[-1] if e.batches else BatchMetadata(-1, -1, e.last_offset, e.last_offset)
            delta, txn_first = last.last_offset - last.first_offset, open_txn_first_offsets.get(pid, -1)
            stamp, coordinator = e.last_timestamp, e.coordinator_epoch
            seq, offset = last.last_seq, last.last_offset
            out.append(SnapshotEntry(pid, e.epoch, seq, offset, delta, stamp, coordinator, txn_first))
        return out

    def load(self, entries: Iterable[SnapshotEntry]) -> None:
        """Replace the state with a snapshot's entries."""
        self.producers.clear()
        for s in entries:
            entry = ProducerStateEntry(s.producer_id, s.epoch, s.timestamp, s.coordinator_epoch, s.last_offset)
            if s.last_sequence >= 0:
                first_seq, first_offset = s.last_sequence - s.offset_delta, s.last_offset - s.offset_delta
                entry.batches.append(BatchMetadata(first_seq, s.last_sequence, first_offset, s.last_offset))
            self.producers[s.producer_id] = entry
