"""The partition log (``odradek.storage.log.Log``, Kafka's UnifiedLog): its two appends decide and
record the producer state, the transaction state and the leader epochs; producer snapshots are
taken on roll; an unclean stop is recovered from the snapshots and the segments."""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from odradek.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from odradek.protocol.records import Record, build_batch
from odradek.storage import Log
from odradek.storage.producer_snapshot import read_snapshot
from odradek.storage.txn_index import AbortedTxn

from .storage_support import log_config

T = TypeVar("T")


def _batch(pid: int, seq: int, n: int = 3, *, epoch: int = 0, txn: bool = False, leader_epoch: int = 0) -> bytes:
    records = [Record(None, b"v" * 40) for _ in range(n)]
    return build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        partition_leader_epoch=leader_epoch,
    )


def _marker(pid: int, commit: bool, coordinator_epoch: int = 0) -> bytes:
    key, value = struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, coordinator_epoch)
    return build_batch([Record(key, value)], producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True)


def _state(log: Log) -> dict[int, tuple[int, int, int]]:
    """producer id -> (epoch, last sequence, last offset)."""
    return {pid: (e.epoch, e.last_seq, e.last_offset) for pid, e in log.producer_state.producers.items()}


def _fill(log: Log, pid: int, segments: int = 3) -> int:
    """Append producer ``pid``'s batches of 3 until the log has ``segments`` segments; the next sequence."""
    seq = 0
    while log.num_segments < segments:
        log.append_as_leader(_batch(pid, seq))
        seq += 3
    return seq


def _snapshots(directory: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in directory.glob("*.snapshot"))


def test_leader_append_decides_the_producer_state(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", log_config())
    info = log.append_as_leader(_batch(5, 0), 2)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 2, 3)
    assert not (info.duplicate or info.transactional or info.control)
    retry = log.append_as_leader(_batch(5, 0), 2)  # its answer was lost: the original offsets
    assert retry.duplicate and (retry.first_offset, retry.last_offset, retry.records_count) == (0, 2, 0)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(_batch(5, 7), 2)  # a gap after 2
    log.append_as_leader(_batch(5, 0, epoch=1), 2)  # a new epoch starts at 0
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(_batch(5, 3, epoch=0), 2)
    assert log.log_end_offset == 6 and _state(log) == {5: (1, 2, 5)}
    again = asyncio.run(log.append_as_leader_async(_batch(5, 0, epoch=1), 2))
    assert again.duplicate and (again.first_offset, again.last_offset) == (3, 5) and log.log_end_offset == 6
    # the coordinators' appends skip the sequence check (a non-client origin), and are recorded
    log.append_as_leader(_batch(9, 40), 2, origin="coordinator")
    assert _state(log)[9] == (0, 42, 8)


class _GatedPool(ThreadPoolExecutor):
    """One I/O thread whose writes wait for ``gate``; ``started`` is set when one is waiting."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.gate, self.started = threading.Event(), threading.Event()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        def gated() -> T:
            self.started.set()
            self.gate.wait(10)
            return fn(*args, **kwargs)

        return super().submit(gated)


def test_an_async_append_whose_caller_is_cancelled_is_still_recorded(tmp_path: Path) -> None:
    """The producer state is updated with the commit, not by the caller: a retry of a batch whose
    request was cancelled (its connection lost) while an I/O thread wrote it is a duplicate."""

    async def run() -> None:
        log = Log(tmp_path / "t-0", log_config())
        pool = _GatedPool()
        first = asyncio.create_task(log.append_as_leader_async(_batch(5, 0), 1, executor=pool))
        while not pool.started.is_set():
            await asyncio.sleep(0.005)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        pool.gate.set()
        retry = await log.append_as_leader_async(_batch(5, 0), 1, executor=pool)  # waits for the write
        assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 2)
        assert log.log_end_offset == 3 and _state(log) == {5: (0, 2, 2)}
        pool.shutdown()

    asyncio.run(run())


def test_leader_append_records_transactions(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", log_config())
    data = log.append_as_leader(_batch(7, 0, txn=True))
    assert data.transactional and not data.control
    log.high_watermark = log.log_end_offset
    assert log.txn_state.ongoing == {7: 0} and log.last_stable_offset == 0
    abort = log.append_as_leader(_marker(7, commit=False, coordinator_epoch=4), origin="coordinator")
    assert abort.transactional and abort.control and abort.first_offset == 3
    log.high_watermark = log.log_end_offset
    assert log.txn_state.ongoing == {} and log.last_stable_offset == 4
    assert log.active_segment.txn_index.entries() == [AbortedTxn(7, 0, 3, 0)]
    assert log.producer_state.producers[7].coordinator_epoch == 4


def test_follower_append_assigns_epochs_and_records_the_leaders_batches(tmp_path: Path) -> None:
    leader = Log(tmp_path / "leader" / "t-0", log_config())
    leader.append_as_leader(_batch(5, 0), 3)
    leader.append_as_leader(_batch(6, 0, txn=True), 3)
    leader.append_as_leader(_batch(5, 3), 4)
    leader.append_as_leader(_marker(6, commit=False), 4, origin="coordinator")
    fetched = leader.read(0, 1 << 20).records_bytes()
    follower = Log(tmp_path / "follower" / "t-0", log_config())
    info = follower.append_as_follower(fetched)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 9, 10)
    assert info.transactional and info.control and not info.duplicate
    assert follower.leader_epoch_cache.entries == [(3, 0), (4, 6)]
    assert _state(follower) == _state(leader) == {5: (0, 5, 8), 6: (0, 2, 9)}
    assert follower.txn_state.aborted == leader.txn_state.aborted
    assert [e.first_offset for e in follower.active_segment.txn_index.entries()] == [3]
    assert follower.log_end_offset == leader.log_end_offset == 10
    # the follower, once leader, knows the producers: a retry is a duplicate, a gap is refused
    assert follower.append_as_leader(_batch(5, 3), 5).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        follower.append_as_leader(_batch(5, 9), 5)


def test_snapshot_taken_on_roll_holds_the_state_before_the_new_segment(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, log_config(segment_bytes=600))
    _fill(log, 5)
    bases = [s.base_offset for s in log.segments]
    assert _snapshots(directory) == bases[1:]  # one per roll, none for the first segment
    (entry,) = read_snapshot(directory / f"{bases[2]:020d}.snapshot")
    assert (entry.producer_id, entry.last_offset, entry.last_sequence) == (5, bases[2] - 1, bases[2] - 1)
    log.roll()  # an explicit roll too (Kafka's roll takes one)
    assert _snapshots(directory) == [*bases[1:], log.log_end_offset]
    log.roll()  # the active segment is empty: it stays, no new snapshot
    assert _snapshots(directory) == [*bases[1:], log.log_end_offset]


def test_unclean_stop_recovers_the_producer_state_from_snapshot_and_segments(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, log_config(segment_bytes=600))
    seq = _fill(log, 5)
    log.append_as_leader(_batch(6, 0, txn=True))  # open at the crash
    log.append_as_leader(_batch(5, seq))  # after the last snapshot, in the active segment
    before, ongoing, end = _state(log), dict(log.txn_state.ongoing), log.log_end_offset
    # the broker dies: no close, no snapshot at the log end
    reopened = Log(directory, log_config(segment_bytes=600), recovery_point=0, had_clean_shutdown=False)
    assert reopened.log_end_offset == end and max(_snapshots(directory)) < end
    assert _state(reopened) == before and reopened.txn_state.ongoing == ongoing
    assert reopened.append_as_leader(_batch(5, seq)).duplicate
    # a torn last batch: recovery cuts it, the state forgets it and its retry is appended
    active = reopened.active_segment.log.path
    reopened.close()
    with open(active, "r+b") as f:
        f.truncate(active.stat().st_size - 5)
    torn = Log(directory, log_config(segment_bytes=600), recovery_point=0, had_clean_shutdown=False)
    assert torn.log_end_offset == end - 3 and torn.producer_state.producers[5].last_seq == seq - 1
    retried = torn.append_as_leader(_batch(5, seq))
    assert not retried.duplicate and retried.first_offset == end - 3


def test_truncation_rebuilds_the_state_and_drops_epochs(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, log_config(segment_bytes=600))
    seq = 0
    while log.num_segments < 3:
        log.append_as_follower(_batch_at(log.log_end_offset, 5, seq, leader_epoch=seq // 9))
        seq += 3
    assert len(log.leader_epoch_cache.entries) > 1 and _snapshots(directory)
    cut = log.segments[1].base_offset + 3
    assert log.truncate_to(cut)
    assert all(offset <= cut for offset in _snapshots(directory))
    assert _state(log) == {5: (0, cut - 1, cut - 1)}
    assert all(start < cut for _epoch, start in log.leader_epoch_cache.entries)
    log.truncate_fully_and_start_at(100)
    assert _snapshots(directory) == [] and _state(log) == {} and log.txn_state.ongoing == {}


def _batch_at(base_offset: int, pid: int, seq: int, *, leader_epoch: int) -> bytes:
    records = [Record(None, b"v" * 40) for _ in range(3)]
    return build_batch(
        records,
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        partition_leader_epoch=leader_epoch,
    )
