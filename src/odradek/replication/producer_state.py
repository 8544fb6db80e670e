"""Idempotent producers on one partition: sequence numbers and epochs per producer id (Kafka's ProducerStateManager).

For every producer id that wrote to the partition the state keeps its epoch and the last
``MAX_CACHED_BATCHES`` (5) batches it appended: (first sequence, last sequence, first offset,
last offset). A leader checks each produced batch that carries a producer id (KIP-98):

- the epoch is older than the producer's: INVALID_PRODUCER_EPOCH;
- the same epoch and the same sequence range as a cached batch: a *duplicate* (a retry whose
  first answer was lost): nothing is appended and the answer carries the original offsets;
- the same epoch and a first sequence that does not follow the last one (with wrap-around after
  2^31-1): OUT_OF_ORDER_SEQUENCE_NUMBER;
- a newer epoch, or a producer the state does not know: accepted (a new epoch starts its
  sequences anywhere Kafka 2.5+ allows; a producer whose state was lost to retention is let in,
  KIP-360).

Followers and the leader record every appended batch, so a new leader after a failover knows the
producers' sequences and still recognises the retry of a batch the old leader had replicated.
Truncation forgets the batches it removed. On start the state is rebuilt from the batch headers of
the last ``REBUILD_SEGMENTS`` segments (snapshot files are not written yet; producers idle for
longer than that are treated as unknown, and let in).

Event loop only.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from odradek.protocol.records import BatchHeader, iter_batches
from odradek.storage import Log

MAX_CACHED_BATCHES = 5
REBUILD_SEGMENTS = 2
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
        """Check a leader append before it is written; (first offset, last offset) of the original
        when the whole payload is a duplicate, else None. Raises INVALID_PRODUCER_EPOCH or
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
            epoch, prev_seq = pending.get(h.producer_id, (entry.epoch, entry.last_seq) if entry else (-1, -1))
            if entry is not None and h.producer_epoch < epoch:
                raise InvalidProducerEpochError(
                    f"producer {h.producer_id} epoch {h.producer_epoch} is older than the current {epoch}"
                )
            if entry is not None and h.producer_epoch == entry.epoch and h.producer_id not in pending:
                original = entry.find_duplicate(first_seq, last_seq)
                if original is not None:
                    duplicate = (original.first_offset, original.last_offset)
                    continue
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

    def record(self, h: BatchHeader, base_offset: int) -> None:
        """Record an appended batch (leader: offsets just assigned; follower: as fetched)."""
        if h.producer_id == NO_PRODUCER_ID or h.is_control:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None or h.producer_epoch > entry.epoch:
            entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id, h.producer_epoch)
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

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or above ``offset`` (the log was truncated there)."""
        for pid, entry in list(self.producers.items()):
            kept = [b for b in entry.batches if b.last_offset < offset]
            if not kept:
                del self.producers[pid]
            elif len(kept) != len(entry.batches):
                entry.batches = collections.deque(kept, maxlen=MAX_CACHED_BATCHES)

    def rebuild(self, log: Log) -> None:
        """Read the batch headers of the last segments (see the module docstring)."""
        self.producers.clear()
        for segment in log.segments[-REBUILD_SEGMENTS:]:
            for _pos, h in segment.scan_batches():
                self.record(h, h.base_offset)
