"""The share coordinator's state of one ``__share_group_state`` partition (Kafka's
``ShareCoordinatorShard`` and ``ShareCoordinatorOffsetsManager``).

For every share-partition whose key maps to the partition: its :class:`ShareGroupOffset` (the
last snapshot with the updates since merged over it), the highest leader and state epochs seen,
and how many ShareUpdate records followed its last ShareSnapshot.

Each request is answered in two steps, as Kafka's shard does: the request is checked and turned
into the one record to write (:meth:`initialize`, :meth:`write`, :meth:`read`, :meth:`delete`,
:meth:`cold_snapshot`; nothing changes yet), and once that record is durable it is applied with
:meth:`replay`, the same method that loads the partition from the log. Rules (Kafka 4.2's):

- a negative partition: INVALID_REQUEST; a topic id or partition the metadata does not know:
  UNKNOWN_TOPIC_OR_PARTITION (``topic_exists``; checked last);
- InitializeShareGroupState: a state epoch below the kept one is FENCED_STATE_EPOCH; otherwise a
  ShareSnapshot with that state epoch and start offset, no batches, leader epoch -1, snapshot epoch
  one above the kept one (0 for a new key), created and written now;
- WriteShareGroupState: an uninitialized key is INVALID_REQUEST; a leader epoch (other than -1)
  below the kept one is FENCED_LEADER_EPOCH, a state epoch (other than -1) below the kept one
  FENCED_STATE_EPOCH. The write becomes a ShareUpdate (its batches combined among themselves)
  until ``records_per_snapshot`` updates followed the last snapshot; then a ShareSnapshot of the
  kept state with the write merged over it (-1 fields keep the kept values), snapshot epoch + 1.
  A ShareUpdate carries no state epoch: a higher one in a write is kept from the next snapshot on;
- ReadShareGroupState: an uninitialized key is INVALID_REQUEST; a leader epoch (other than -1)
  below the kept one FENCED_LEADER_EPOCH; one above it is recorded by a record as a write of no
  batches would make (the answer is given with that record written);
- ReadShareGroupStateSummary: the kept state epoch, leader epoch, start offset and
  delivery-complete count; an uninitialized key answers None (no fencing);
- DeleteShareGroupState: a tombstone under the ShareSnapshot key; nothing for an unknown key.

Replay: a snapshot replaces the key's state (update count 0), an update is merged over it
(:func:`~odradek.coordinator.share.batches.combine_state_batches`, start offset and leader epoch
unless -1; update count + 1), a tombstone forgets the key; leader and state epochs only grow.

**Pruning** (Kafka's offsets manager): each key's latest ShareSnapshot offset is noted; every
record of the partition below the smallest of them is redundant. :meth:`last_redundant_offset`
answers that offset (None while nothing is redundant); a tombstone's offset counts once, then its
key is dropped from the calculation.

**Cold snapshots** (Kafka's ``snapshotColdPartitions``): a key not snapshotted for
``interval_ms`` gets a new ShareSnapshot of its state, so its old records can be pruned; skipped
when every key's last snapshot was already such a re-snapshot (``create_timestamp`` differs from
``write_timestamp``), as then nothing moved.

Plain data, no I/O; the coordinator calls it on its event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from odradek.coordinator.share.batches import combine_state_batches
from odradek.coordinator.share.records import (
    SHARE_SNAPSHOT_TYPE,
    SHARE_UPDATE_TYPE,
    ShareSnapshotValue,
    ShareUpdateValue,
    ShareValue,
)
from odradek.errors import ErrorCode
from odradek.share.state import (
    UNINITIALIZED_STATE_EPOCH,
    SharePartitionKey,
    ShareState,
    ShareStateError,
    StateBatch,
)

__all__ = [
    "NEGATIVE_PARTITION_ID",
    "READ_UNINITIALIZED",
    "WRITE_UNINITIALIZED",
    "ShareCoordinatorShard",
    "ShareGroupOffset",
    "ShareRecord",
    "ShareSummary",
]

NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
READ_UNINITIALIZED = "Read state called on uninitialized share partition."
WRITE_UNINITIALIZED = "Write state called on uninitialized share partition."

ShareRecord = tuple[int, SharePartitionKey, ShareValue | None]
"""(record type, key, value; None: a tombstone) of one ``__share_group_state`` record."""


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """A share-partition's state as the coordinator keeps it (Kafka's ``ShareGroupOffset``)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1

    @classmethod
    def from_snapshot(cls, v: ShareSnapshotValue) -> ShareGroupOffset:
        return cls(
            v.snapshot_epoch,
            v.state_epoch,
            v.leader_epoch,
            v.start_offset,
            v.state_batches,
            v.delivery_complete_count,
            v.create_timestamp,
            v.write_timestamp,
        )

    def snapshot(self, snapshot_epoch: int, write_timestamp: int) -> ShareSnapshotValue:
        return ShareSnapshotValue(
            snapshot_epoch,
            self.state_epoch,
            self.leader_epoch,
            self.start_offset,
            self.create_timestamp,
            write_timestamp,
            self.state_batches,
            self.delivery_complete_count,
        )


@dataclass(frozen=True, slots=True)
class ShareSummary:
    """What ReadShareGroupStateSummary answers of an initialized share-partition."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1


def _pick(requested: int, kept: int) -> int:
    return kept if requested == -1 else requested


class ShareCoordinatorShard:
    """See the module docstring. ``topic_exists(topic_id, partition)`` (None: every topic exists)
    is the metadata check; ``time_ms`` the clock of the records' timestamps."""

    def __init__(
        self,
        records_per_snapshot: int,
        time_ms: Callable[[], int],
        topic_exists: Callable[[uuid.UUID, int], bool] | None = None,
    ) -> None:
        self.records_per_snapshot = records_per_snapshot
        self.time_ms = time_ms
        self.topic_exists = topic_exists
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}
        self.state_epochs: dict[SharePartitionKey, int] = {}
        self.update_counts: dict[SharePartitionKey, int] = {}
        self.snapshot_offsets: dict[SharePartitionKey, int] = {}
        """Key -> offset of its latest ShareSnapshot (or tombstone) record."""
        self._redundant_offset = 2**63 - 1

    # --- checks --------------------------------------------------------------------------------------

    def _check_partition(self, key: SharePartitionKey) -> None:
        if key.partition < 0:
            raise ShareStateError(ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)

    def _check_metadata(self, key: SharePartitionKey) -> None:
        if self.topic_exists is not None and not self.topic_exists(key.topic_id, key.partition):
            raise ShareStateError(ErrorCode.unknown_topic_or_partition)

    def _check_leader_epoch(self, key: SharePartitionKey, leader_epoch: int) -> None:
        kept = self.leader_epochs.get(key)
        if leader_epoch != -1 and kept is not None and kept > leader_epoch:
            raise ShareStateError(
                ErrorCode.fenced_leader_epoch, f"leader epoch {leader_epoch} is below the recorded {kept}"
            )

    def _check_state_epoch(self, key: SharePartitionKey, state_epoch: int) -> None:
        kept = self.state_epochs.get(key)
        if state_epoch != -1 and kept is not None and kept > state_epoch:
            raise ShareStateError(
                ErrorCode.fenced_state_epoch, f"state epoch {state_epoch} is below the recorded {kept}"
            )

    # --- requests: the record to write ----------------------------------------------------------------

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> ShareRecord:
        """The ShareSnapshot initializing ``key``; raises ShareStateError."""
        self._check_partition(key)
        self._check_state_epoch(key, state_epoch)
        self._check_metadata(key)
        kept = self.states.get(key)
        now = self.time_ms()
        snapshot_epoch = 0 if kept is None else kept.snapshot_epoch + 1
        value = ShareSnapshotValue(snapshot_epoch, state_epoch, -1, start_offset, now, now)
        return SHARE_SNAPSHOT_TYPE, key, value

    def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
        delivery_complete_count: int = -1,
    ) -> ShareRecord:
        """The ShareUpdate or ShareSnapshot recording a write; raises ShareStateError."""
        self._check_partition(key)
        if key not in self.states:
            raise ShareStateError(ErrorCode.invalid_request, WRITE_UNINITIALIZED)
        self._check_leader_epoch(key, leader_epoch)
        self._check_state_epoch(key, state_epoch)
        self._check_metadata(key)
        return self._state_record(key, state_epoch, leader_epoch, start_offset, list(batches), delivery_complete_count)

    def _state_record(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
        delivery_complete_count: int,
        *,
        new_write_time: bool = True,
    ) -> ShareRecord:
        kept = self.states[key]
        if self.update_counts.get(key, 0) >= self.records_per_snapshot:
            new_start = _pick(start_offset, kept.start_offset)
            merged = ShareGroupOffset(
                kept.snapshot_epoch + 1,
                _pick(state_epoch, kept.state_epoch),
                _pick(leader_epoch, kept.leader_epoch),
                new_start,
                combine_state_batches(kept.state_batches, batches, new_start),
                _pick(delivery_complete_count, kept.delivery_complete_count),
                kept.create_timestamp,
            )
            written = self.time_ms() if new_write_time else kept.write_timestamp
            return SHARE_SNAPSHOT_TYPE, key, merged.snapshot(merged.snapshot_epoch, written)
        update = ShareUpdateValue(
            kept.snapshot_epoch,
            leader_epoch,
            start_offset,
            combine_state_batches((), batches, start_offset),
            delivery_complete_count,
        )
        return SHARE_UPDATE_TYPE, key, update

    def read(self, key: SharePartitionKey, leader_epoch: int) -> tuple[ShareState, ShareRecord | None]:
        """The kept state and, for a leader epoch above the kept one, the record recording it;
        raises ShareStateError."""
        self._check_partition(key)
        kept = self.states.get(key)
        if kept is None:
            raise ShareStateError(ErrorCode.invalid_request, READ_UNINITIALIZED)
        self._check_leader_epoch(key, leader_epoch)
        self._check_metadata(key)
        recorded = self.leader_epochs.get(key, -1)
        record = None
        if leader_epoch != -1 and leader_epoch > recorded:
            count = kept.delivery_complete_count
            record = self._state_record(
                key, kept.state_epoch, leader_epoch, kept.start_offset, [], count, new_write_time=False
            )
            recorded = leader_epoch
        return ShareState(kept.state_epoch, kept.start_offset, recorded, kept.state_batches), record

    def read_summary(self, key: SharePartitionKey) -> ShareSummary | None:
        """The summary of ``key``; None when it is not initialized; raises ShareStateError."""
        self._check_partition(key)
        self._check_metadata(key)
        kept = self.states.get(key)
        if kept is None:
            return None
        return ShareSummary(
            kept.state_epoch, self.leader_epochs.get(key, -1), kept.start_offset, kept.delivery_complete_count
        )

    def delete(self, key: SharePartitionKey) -> ShareRecord | None:
        """The tombstone of ``key``; None when there is nothing to delete; raises ShareStateError."""
        self._check_partition(key)
        self._check_metadata(key)
        return (SHARE_SNAPSHOT_TYPE, key, None) if key in self.states else None

    def cold_keys(self, interval_ms: int) -> list[SharePartitionKey]:
        """The keys last snapshotted more than ``interval_ms`` ago (none when every key's last
        snapshot already was a re-snapshot)."""
        if all(s.create_timestamp != s.write_timestamp for s in self.states.values()):
            return []
        now = self.time_ms()
        return [key for key, s in self.states.items() if now - s.write_timestamp > interval_ms]

    def cold_snapshot(self, key: SharePartitionKey, interval_ms: int) -> ShareRecord | None:
        """A new ShareSnapshot of ``key``'s state if it was (still) last snapshotted more than
        ``interval_ms`` ago (the caller picked it from :meth:`cold_keys`)."""
        kept = self.states.get(key)
        now = self.time_ms()
        if kept is None or now - kept.write_timestamp <= interval_ms:
            return None
        return SHARE_SNAPSHOT_TYPE, key, kept.snapshot(kept.snapshot_epoch + 1, now)

    # --- replay -------------------------------------------------------------------------------------

    def replay(self, offset: int, record_type: int, key: SharePartitionKey, value: ShareValue | None) -> None:
        """Apply one record read from (or written to) the partition at ``offset``."""
        if value is None:
            if record_type == SHARE_SNAPSHOT_TYPE:
                self.states.pop(key, None)
                self.leader_epochs.pop(key, None)
                self.state_epochs.pop(key, None)
                self.update_counts.pop(key, None)
                self._note_snapshot(key, offset, deleted=True)
            return
        if key not in self.leader_epochs or self.leader_epochs[key] < value.leader_epoch:
            self.leader_epochs[key] = value.leader_epoch
        if isinstance(value, ShareSnapshotValue):
            if key not in self.state_epochs or self.state_epochs[key] < value.state_epoch:
                self.state_epochs[key] = value.state_epoch
            self.states[key] = ShareGroupOffset.from_snapshot(value)
            self.update_counts[key] = 0
            self._note_snapshot(key, offset, deleted=False)
            return
        kept = self.states.get(key)
        if kept is None:
            self.states[key] = ShareGroupOffset(
                value.snapshot_epoch,
                UNINITIALIZED_STATE_EPOCH,
                value.leader_epoch,
                value.start_offset,
                value.state_batches,
                value.delivery_complete_count,
            )
            self.update_counts[key] = 0
            return
        start = _pick(value.start_offset, kept.start_offset)
        self.states[key] = replace(
            kept,
            leader_epoch=_pick(value.leader_epoch, kept.leader_epoch),
            start_offset=start,
            state_batches=combine_state_batches(kept.state_batches, value.state_batches, start),
            delivery_complete_count=_pick(value.delivery_complete_count, kept.delivery_complete_count),
        )
        self.update_counts[key] = self.update_counts.get(key, 0) + 1

    # --- pruning ------------------------------------------------------------------------------------

    def _note_snapshot(self, key: SharePartitionKey, offset: int, *, deleted: bool) -> None:
        self._redundant_offset = min(self._redundant_offset, offset)
        self.snapshot_offsets[key] = offset
        self._redundant_offset = min(self.snapshot_offsets.values())
        if deleted:
            del self.snapshot_offsets[key]

    def last_redundant_offset(self) -> int | None:
        """Every record of the partition below this offset is redundant; None while none is."""
        offset = self._redundant_offset
        return None if offset <= 0 or offset == 2**63 - 1 else offset
