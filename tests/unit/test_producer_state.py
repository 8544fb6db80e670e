"""Idempotent producer state: duplicates answered with the original offsets, gaps and old epochs refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches
from odradek.replication.partition import Partition, PartitionState
from odradek.storage import Log, TopicPartition
from odradek.storage.producer_state import ProducerStateManager

from .storage_support import log_config


def batch(pid: int, epoch: int, seq: int, n: int = 3, base_offset: int = 0) -> bytes:
    records = [Record(None, b"v%d" % i) for i in range(n)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, base_offset=base_offset)


def headers(data: bytes) -> list[BatchHeader]:
    return [h for _pos, h in iter_batches(data)]


def test_a_retried_batch_is_a_duplicate_with_its_original_offsets() -> None:
    state = ProducerStateManager()
    first = batch(7, 0, 0)
    assert state.check(headers(first)) is None
    state.record_payload(first, 100)
    second = batch(7, 0, 3)
    assert state.check(headers(second)) is None
    state.record_payload(second, 103)
    assert state.check(headers(first)) == (100, 102)
    assert state.check(headers(second)) == (103, 105)


def test_gaps_and_old_epochs_are_refused_new_epochs_accepted_from_zero() -> None:
    state = ProducerStateManager()
    state.record_payload(batch(7, 2, 0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(headers(batch(7, 2, 5)))
    with pytest.raises(InvalidProducerEpochError):
        state.check(headers(batch(7, 1, 3)))
    assert state.check(headers(batch(7, 3, 0))) is None
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):  # a bumped epoch starts at 0
        state.check(headers(batch(7, 3, 3)))
    # an unknown producer is accepted at any sequence (Kafka 3.9, KIP-360): no UNKNOWN_PRODUCER_ID
    assert state.check(headers(batch(8, 0, 42))) is None
    assert state.check(headers(batch(8, 0, 0))) is None
    assert state.check(headers(batch(-1, -1, -1))) is None  # not idempotent


def test_only_the_last_five_batches_are_remembered() -> None:
    state = ProducerStateManager()
    for i in range(7):
        state.record_payload(batch(7, 0, i * 3), i * 3)
    with pytest.raises(OutOfOrderSequenceError):  # evicted from the last five: no longer a known duplicate
        state.check(headers(batch(7, 0, 0)))
    assert state.check(headers(batch(7, 0, 18))) == (18, 20)
    assert state.check(headers(batch(7, 0, 21))) is None


def test_retention_and_expiry_remove_producers_then_any_sequence_is_accepted() -> None:
    state = ProducerStateManager()
    state.record_payload(batch(1, 0, 0), 0)  # offsets 0-2
    state.record_payload(batch(2, 0, 0), 3)  # offsets 3-5
    with pytest.raises(OutOfOrderSequenceError):  # known: a gap
        state.check(headers(batch(1, 0, 9)))
    assert state.truncate_head(3) == [1] and list(state.producers) == [2]
    assert state.check(headers(batch(1, 0, 9))) is None  # forgotten: accepted where it goes on
    stamp = state.producers[2].last_timestamp
    assert stamp > 0
    assert state.remove_expired(stamp + 999, 1000) == []
    assert state.remove_expired(stamp + 1000, 1000, keep=[2]) == []  # open transaction: kept
    with pytest.raises(OutOfOrderSequenceError):
        state.check(headers(batch(2, 0, 9)))
    assert state.remove_expired(stamp + 1000, 1000) == [2]
    assert state.check(headers(batch(2, 0, 9))) is None


def test_state_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", log_config())
    log.append_as_leader(batch(9, 1, 0), 0)
    log.append_as_leader(batch(9, 1, 3), 0)
    state = Partition(TopicPartition("t", 0), 1, log, PartitionState(-1, -1, [], [])).producer_state
    assert state.check(headers(batch(9, 1, 3))) == (3, 5)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(headers(batch(9, 1, 9)))


def test_a_marker_with_a_newer_epoch_fences_the_old_one_and_restarts_sequences() -> None:
    from odradek.server.apis.write_txn_markers import control_batch

    state = ProducerStateManager()
    state.record_payload(batch(7, 0, 0), 0)  # offsets 0-2, sequences 0-2
    (marker,) = headers(control_batch(7, 1, False, 4))  # a coordinator's abort with a bumped epoch
    state.record(marker, 3, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):  # a zombie of epoch 0
        state.check(headers(batch(7, 0, 3)))
    assert state.check(headers(batch(7, 1, 0))) is None  # epoch 1 starts at 0
    entry = state.producers[7]
    assert (entry.epoch, entry.coordinator_epoch, entry.last_offset, list(entry.batches)) == (1, 4, 3, [])
    restored = ProducerStateManager()
    restored.load(state.snapshot_entries({}))
    assert restored.producers[7].coordinator_epoch == 4 and restored.producers[7].epoch == 1
    assert restored.check(headers(batch(7, 1, 0))) is None
