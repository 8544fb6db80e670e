"""The share coordinator's rules (Kafka 4.2's ShareCoordinatorShard): fencing, merging updates
over the snapshot, the snapshot cadence, the prune point, cold snapshots; and the batch combiner."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.share.batches import combine_state_batches
from odradek.coordinator.share.records import SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE, ShareSnapshotValue
from odradek.coordinator.share.shard import READ_UNINITIALIZED, WRITE_UNINITIALIZED, ShareCoordinatorShard, ShareRecord
from odradek.errors import ErrorCode
from odradek.share.state import DeliveryState, SharePartitionKey, ShareState, ShareStateError, StateBatch

A, ACK, ARC, ACQ = DeliveryState.AVAILABLE, DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED, DeliveryState.ACQUIRED
KEY = SharePartitionKey("group", uuid.UUID(int=7), 0)
OTHER = SharePartitionKey("other", uuid.UUID(int=8), 1)


class Harness:
    """A shard, a clock and a log offset: each record made is applied at the next offset."""

    def __init__(self, records_per_snapshot: int = 500, exists: bool = True) -> None:
        self.now = 1000
        self.offset = 0
        self.shard = ShareCoordinatorShard(records_per_snapshot, lambda: self.now, lambda _t, _p: exists)

    def apply(self, record: ShareRecord | None) -> ShareRecord | None:
        if record is not None:
            self.shard.replay(self.offset, *record)
            self.offset += 1
        return record

    def init(self, key: SharePartitionKey = KEY, state_epoch: int = 0, start: int = 0) -> ShareRecord | None:
        return self.apply(self.shard.initialize(key, state_epoch, start))

    def write(
        self, *batches: StateBatch, key: SharePartitionKey = KEY, start: int = -1, leader: int = 0
    ) -> ShareRecord:
        record = self.apply(self.shard.write(key, 0, leader, start, list(batches)))
        assert record is not None
        return record


def error_of(fn: object, *args: object) -> tuple[ErrorCode, str | None]:
    with pytest.raises(ShareStateError) as info:
        fn(*args)  # type: ignore[operator]
    return info.value.error_code, info.value.message


def test_initialize_writes_a_snapshot_and_fences_older_state_epochs() -> None:
    h = Harness()
    record = h.init(state_epoch=3, start=10)
    assert record == (SHARE_SNAPSHOT_TYPE, KEY, ShareSnapshotValue(0, 3, -1, 10, 1000, 1000))
    assert error_of(h.shard.initialize, KEY, 2, 0)[0] is ErrorCode.fenced_state_epoch
    again = h.init(state_epoch=3, start=20)  # same epoch: initialized again, next snapshot epoch
    assert again is not None and again[2] is not None and again[2].snapshot_epoch == 1
    state, _ = h.shard.read(KEY, -1)
    assert (state.state_epoch, state.start_offset, state.batches) == (3, 20, ())


def test_writes_and_reads_of_uninitialized_share_partitions_are_invalid_requests() -> None:
    h = Harness()
    assert error_of(h.shard.write, KEY, 0, 0, 0, []) == (ErrorCode.invalid_request, WRITE_UNINITIALIZED)
    assert error_of(h.shard.read, KEY, 0) == (ErrorCode.invalid_request, READ_UNINITIALIZED)
    assert h.shard.read_summary(KEY) is None
    assert h.shard.delete(KEY) is None  # nothing to delete, nothing written


def test_bad_partitions_and_unknown_topics() -> None:
    h = Harness()
    bad = SharePartitionKey("group", uuid.UUID(int=7), -1)
    assert error_of(h.shard.initialize, bad, 0, 0)[0] is ErrorCode.invalid_request
    gone = Harness(exists=False)
    assert error_of(gone.shard.initialize, KEY, 0, 0)[0] is ErrorCode.unknown_topic_or_partition
    assert error_of(gone.shard.delete, KEY)[0] is ErrorCode.unknown_topic_or_partition


def test_leader_epoch_fencing_and_recording_on_read() -> None:
    h = Harness()
    h.init()
    state, record = h.shard.read(KEY, 2)  # a new leader: recorded by an update
    assert state.leader_epoch == 2 and record is not None and record[0] == SHARE_UPDATE_TYPE
    h.apply(record)
    assert h.shard.leader_epochs[KEY] == 2
    assert h.shard.read(KEY, 2)[1] is None  # same epoch: nothing to write
    assert h.shard.read(KEY, -1) == (ShareState(0, 0, 2, ()), None)  # -1: neither checked nor recorded
    assert error_of(h.shard.read, KEY, 1)[0] is ErrorCode.fenced_leader_epoch
    assert error_of(h.shard.write, KEY, 0, 1, 0, [])[0] is ErrorCode.fenced_leader_epoch
    h.apply(h.shard.write(KEY, 0, -1, 0, []))  # -1 is not fenced
    h.init(state_epoch=4)
    assert error_of(h.shard.write, KEY, 3, 2, 0, [])[0] is ErrorCode.fenced_state_epoch


def test_updates_merge_over_the_snapshot() -> None:
    h = Harness()
    h.init(start=0)
    assert h.write(StateBatch(0, 10, A, 1))[0] == SHARE_UPDATE_TYPE
    h.write(StateBatch(3, 4, ACK, 1), StateBatch(11, 20, A, 1))
    h.write(StateBatch(5, 5, A, 2), start=4)
    state, _ = h.shard.read(KEY, -1)
    assert state.start_offset == 4
    assert state.batches == (
        StateBatch(4, 4, ACK, 1),
        StateBatch(5, 5, A, 2),
        StateBatch(6, 20, A, 1),
    )


def test_a_snapshot_follows_records_per_snapshot_updates() -> None:
    h = Harness(records_per_snapshot=3)
    h.init()
    kinds = [h.write(StateBatch(i, i, ACK, 1))[0] for i in range(8)]
    assert kinds == [1, 1, 1, 0, 1, 1, 1, 0]
    snapshot = h.shard.states[KEY]
    assert snapshot.snapshot_epoch == 2
    assert snapshot.state_batches == (StateBatch(0, 7, ACK, 1),)


def test_the_share_leader_losing_no_batch_when_the_start_offset_moves() -> None:
    # Kafka's testNonSequentialBatchUpdates: with a snapshot on every write, acking batch 3 and
    # moving the start offset past batch 1 keeps batch 2.
    h = Harness(records_per_snapshot=0)
    h.init()
    h.write(StateBatch(100, 109, ACQ, 1), StateBatch(110, 119, ACQ, 2), StateBatch(120, 129, ACQ, 0), start=100)
    h.write(StateBatch(100, 109, ACK, 1))
    last = h.write(StateBatch(120, 129, ACK, 1), start=110)
    assert last[0] == SHARE_SNAPSHOT_TYPE
    assert h.shard.states[KEY].state_batches == (StateBatch(110, 119, ACQ, 2), StateBatch(120, 129, ACK, 1))
    assert h.shard.states[KEY].start_offset == 110


def test_delete_writes_a_tombstone_and_forgets_the_key() -> None:
    h = Harness()
    h.init(state_epoch=5)
    assert h.apply(h.shard.delete(KEY)) == (SHARE_SNAPSHOT_TYPE, KEY, None)
    assert KEY not in h.shard.states and KEY not in h.shard.state_epochs
    h.init(state_epoch=0)  # a deleted share-partition starts over
    assert h.shard.read(KEY, -1)[0].state_epoch == 0


def test_prune_point_is_the_lowest_latest_snapshot_of_any_key() -> None:
    h = Harness(records_per_snapshot=1)
    assert h.shard.last_redundant_offset() is None
    h.init(KEY)  # offset 0
    h.init(OTHER)  # 1
    h.write(StateBatch(0, 0, ACK, 1))  # 2: update
    assert h.shard.last_redundant_offset() is None  # offset 0 still needed
    h.write(StateBatch(1, 1, ACK, 1))  # 3: snapshot of KEY
    assert h.shard.last_redundant_offset() == 1  # OTHER's snapshot at 1 is the oldest needed
    h.write(StateBatch(0, 0, ACK, 1), key=OTHER)  # 4: update of OTHER
    h.write(StateBatch(1, 1, ACK, 1), key=OTHER)  # 5: snapshot of OTHER
    assert h.shard.last_redundant_offset() == 3
    h.apply(h.shard.delete(KEY))  # 6: tombstone; KEY no longer holds anything back
    assert h.shard.last_redundant_offset() == 5


def test_cold_snapshots_move_idle_keys_forward_once() -> None:
    h = Harness()
    h.init(KEY)
    h.now += 1000
    h.init(OTHER)
    h.now += 500
    assert h.shard.cold_keys(1000) == [KEY]
    record = h.apply(h.shard.cold_snapshot(KEY, 1000))
    assert record is not None and isinstance(record[2], ShareSnapshotValue)
    assert (record[2].snapshot_epoch, record[2].create_timestamp, record[2].write_timestamp) == (1, 1000, 2500)
    assert h.shard.cold_snapshot(KEY, 1000) is None  # just written
    h.now += 5000
    h.apply(h.shard.cold_snapshot(OTHER, 1000))
    assert h.shard.cold_keys(1000) == []  # every key re-snapshotted already: nothing moves


@pytest.mark.parametrize(
    ("so_far", "new", "start", "expected"),
    [
        ([], [], -1, []),
        ([(0, 9, A, 1)], [(0, 9, ACK, 1)], -1, [(0, 9, ACK, 1)]),  # same range: the higher state
        ([(0, 9, A, 1)], [(3, 5, ACK, 1)], -1, [(0, 2, A, 1), (3, 5, ACK, 1), (6, 9, A, 1)]),
        ([(0, 9, A, 2)], [(3, 5, ACK, 1)], -1, [(0, 9, A, 2)]),  # a lower delivery count loses
        ([(0, 4, A, 1)], [(5, 9, A, 1)], -1, [(0, 9, A, 1)]),  # contiguous, same state: one batch
        ([(0, 4, A, 1)], [(6, 9, A, 1)], -1, [(0, 4, A, 1), (6, 9, A, 1)]),  # a gap stays
        ([(0, 9, A, 1)], [(8, 15, ARC, 3)], 5, [(5, 7, A, 1), (8, 15, ARC, 3)]),  # cut at the start
        ([(0, 4, A, 1)], [], 5, []),
        ([(0, 9, ACK, 1), (5, 20, A, 1)], [], -1, [(0, 9, ACK, 1), (10, 20, A, 1)]),
    ],
)
def test_combine_state_batches(
    so_far: list[tuple[int, int, DeliveryState, int]],
    new: list[tuple[int, int, DeliveryState, int]],
    start: int,
    expected: list[tuple[int, int, DeliveryState, int]],
) -> None:
    batches = combine_state_batches([StateBatch(*b) for b in so_far], [StateBatch(*b) for b in new], start)
    assert batches == tuple(StateBatch(*b) for b in expected)


def test_combine_is_fast_on_many_batches() -> None:
    so_far = [StateBatch(i * 2, i * 2, ACK, 1) for i in range(5000)]
    new = [StateBatch(i * 2 + 1, i * 2 + 1, ACK, 1) for i in range(5000)]
    assert combine_state_batches(so_far, new, -1) == (StateBatch(0, 9999, ACK, 1),)
