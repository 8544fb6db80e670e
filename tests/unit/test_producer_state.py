"""Idempotent producer state: duplicates answered with the original offsets, gaps and old epochs refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches
from odradek.replication.producer_state import ProducerStateManager
from odradek.storage import Log

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


def test_gaps_and_old_epochs_are_refused_new_epochs_accepted() -> None:
    state = ProducerStateManager()
    state.record_payload(batch(7, 2, 0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(headers(batch(7, 2, 5)))
    with pytest.raises(InvalidProducerEpochError):
        state.check(headers(batch(7, 1, 3)))
    assert state.check(headers(batch(7, 3, 0))) is None
    assert state.check(headers(batch(8, 0, 42))) is None  # unknown producer: let in
    assert state.check(headers(batch(-1, -1, -1))) is None  # not idempotent


def test_only_the_last_five_batches_are_remembered_and_truncation_forgets() -> None:
    state = ProducerStateManager()
    for i in range(7):
        state.record_payload(batch(7, 0, i * 3), i * 3)
    with pytest.raises(OutOfOrderSequenceError):  # evicted from the last five: no longer a known duplicate
        state.check(headers(batch(7, 0, 0)))
    assert state.check(headers(batch(7, 0, 18))) == (18, 20)
    state.truncate_to(15)
    assert state.producers[7].last_seq == 14
    assert state.check(headers(batch(7, 0, 15))) is None


def test_state_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", log_config())
    log.append_as_leader(batch(9, 1, 0), 0)
    log.append_as_leader(batch(9, 1, 3), 0)
    state = ProducerStateManager()
    state.rebuild(log)
    assert state.check(headers(batch(9, 1, 3))) == (3, 5)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(headers(batch(9, 1, 9)))
