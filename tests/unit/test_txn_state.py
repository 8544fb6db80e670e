"""Transactions on one partition's log: open transactions, the LSO, aborted ranges in ``.txnindex``
(Kafka's 34-byte entries), rebuilt from the files after a restart and after truncation."""

from __future__ import annotations

import struct
from pathlib import Path

from odradek.protocol.records import Record, build_batch
from odradek.replication.partition import Partition, PartitionState
from odradek.server.apis.write_txn_markers import control_batch
from odradek.storage import Log, TopicPartition
from odradek.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

from .storage_support import log_config

TP = TopicPartition("t", 0)


def test_entry_format_and_a_torn_tail(tmp_path: Path) -> None:
    entry = AbortedTxn(producer_id=7, first_offset=3, last_offset=6, last_stable_offset=2)
    assert entry.encode() == struct.pack(">hqqqq", 0, 7, 3, 6, 2) and ENTRY_SIZE == 34
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    assert index.entries() == []
    index.append(entry)
    index.append(AbortedTxn(8, 10, 12, 10))
    with open(index.path, "ab") as f:
        f.write(b"\x00\x00\x00")  # a torn write
    assert index.entries() == [entry, AbortedTxn(8, 10, 12, 10)]
    index.truncate_to(12)
    assert index.entries() == [entry] and index.path.stat().st_size == ENTRY_SIZE


def _partition(path: Path) -> Partition:
    log = Log(path, log_config())
    p = Partition(TP, 1, log, PartitionState(-1, -1, [], []))
    p.make_leader(PartitionState(1, 0, [1], [1]), now_ms=0)
    return p


def _data(p: Partition, producer_id: int, n: int) -> None:
    records = build_batch(
        [Record(None, b"v")] * n, producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    p.log.append_as_leader(records, 0)


def _marker(p: Partition, producer_id: int, commit: bool) -> None:
    records = control_batch(producer_id, 0, commit, 0)
    p.log.append_as_leader(records, 0, origin="coordinator")


def test_open_transactions_hold_the_lso_and_aborts_are_indexed(tmp_path: Path) -> None:
    p = _partition(tmp_path / "t-0")
    _data(p, 1, 2)  # offsets 0-1, producer 1
    _data(p, 2, 1)  # offset 2, producer 2
    p.log.high_watermark = 3
    assert p.last_stable_offset == 0
    _marker(p, 1, commit=False)  # offset 3 aborts producer 1's 0-1
    p.log.high_watermark = 4
    assert p.last_stable_offset == 2  # producer 2 still open
    _marker(p, 2, commit=True)  # offset 4
    p.log.high_watermark = 5
    assert p.last_stable_offset == 5
    assert p.txn_state.collect_aborted(0, 5) == [(1, 0)]
    assert p.txn_state.collect_aborted(4, 5) == []
    index = p.log.segments[0].txn_index
    assert index.entries() == [AbortedTxn(1, 0, 3, 0)]
    _data(p, 3, 1)  # offset 5, left open
    reopened = _partition(tmp_path / "t-0")  # a restart: rebuilt from .txnindex and the headers
    assert reopened.txn_state.aborted == [AbortedTxn(1, 0, 3, 0)]
    assert reopened.txn_state.ongoing == {3: 5}
    reopened.truncate_to(3)  # the abort marker goes: producer 1's transaction is open again
    assert reopened.txn_state.ongoing == {1: 0, 2: 2} and reopened.txn_state.aborted == []
    assert not index.path.exists()
