"""Transactions on one partition: ongoing transactions, the first unstable offset, aborted ranges.

Kafka keeps this in its ``ProducerStateManager`` and ``TransactionIndex``. A batch with the
transactional flag opens a transaction for its producer id at its base offset (if none is open);
a control batch (a COMMIT or ABORT marker written by WriteTxnMarkers) closes it. An ABORT records
``AbortedTxn(producer_id, first_offset, marker_offset, last_stable_offset)`` in the ``.txnindex``
of the segment holding the marker (:mod:`odradek.storage.txn_index`).

- the *first unstable offset* is the smallest first offset of the open transactions (None: none);
  the partition's last stable offset is ``min(first unstable offset, high watermark)``;
- a read_committed fetch of ``[start, upper)`` answers the aborted transactions whose range
  overlaps it (Kafka's ``collectAbortedTransactions``), so the consumer drops their records;
- leaders and followers track the same batches, so a new leader knows which transactions are open.

The partition's log (:class:`odradek.storage.log.Log`) owns it, records every appended batch in
it and rebuilds it on open and after a truncation: aborted ranges from the segments'
``.txnindex`` files, open transactions from the newest producer snapshot (which records each
producer's open transaction) and then :meth:`replay` of the batch headers after it. Event loop
only.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Protocol

from odradek.protocol.records import BatchHeader, decode_records
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import AbortedTxn, TransactionIndex

__all__ = ["ABORT", "COMMIT", "SegmentSource", "TxnState", "control_marker", "control_type"]

ABORT, COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def control_marker(batch: bytes | memoryview) -> tuple[int, int] | None:
    """(type, coordinator epoch) of one control batch: key ``version int16, type int16`` (ABORT 0,
    COMMIT 1), value ``version int16, coordinator_epoch int32``; None when unreadable."""
    try:
        records = decode_records(batch, verify_crc=False)
    except Exception:
        return None
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        return None
    value = records[0].value
    epoch = int(_MARKER_VALUE.unpack_from(value)[1]) if value is not None and len(value) >= _MARKER_VALUE.size else -1
    return int(_CONTROL_KEY.unpack_from(records[0].key)[1]), epoch


def control_type(batch: bytes | memoryview) -> int | None:
    """The marker type of one control batch (ABORT 0, COMMIT 1); None when unreadable."""
    marker = control_marker(batch)
    return None if marker is None else marker[0]


class SegmentSource(Protocol):
    """What :class:`TxnState` reads of its log: the segments, oldest first."""

    @property
    def segments(self) -> Sequence[LogSegment]: ...


class TxnState:
    """Open transactions and aborted ranges of one partition's log."""

    def __init__(self, log: SegmentSource) -> None:
        self.log = log
        self.ongoing: dict[int, int] = {}
        """producer id -> first offset of its open transaction."""
        self.aborted: list[AbortedTxn] = []
        """In marker order (ascending ``last_offset``)."""

    # --- appends -------------------------------------------------------------------------------

    def on_batch(self, h: BatchHeader, base_offset: int, batch: bytes | memoryview, lso: int) -> None:
        """A batch appended at ``base_offset`` (``batch`` its bytes, needed for control batches);
        ``lso`` is the last stable offset before it, recorded with an abort."""
        if not h.is_transactional or h.producer_id < 0:
            return
        if not h.is_control:
            self.ongoing.setdefault(h.producer_id, base_offset)
            return
        first = self.ongoing.pop(h.producer_id, None)
        if control_type(batch) == ABORT and first is not None:
            entry = AbortedTxn(h.producer_id, first, base_offset, lso)
            self.aborted.append(entry)
            self._segment_index(base_offset).append(entry)

    def _segment_index(self, offset: int) -> TransactionIndex:
        for segment in reversed(self.log.segments):
            if segment.base_offset <= offset:
                return segment.txn_index
        return self.log.segments[0].txn_index

    # --- reads -------------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def collect_aborted(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping ``[start, upper)``."""
        return [
            (a.producer_id, a.first_offset) for a in self.aborted if a.last_offset >= start and a.first_offset < upper
        ]

    # --- rebuild, truncation, retention -------------------------------------------------------

    def rebuild(self, ongoing: dict[int, int] | None = None) -> None:
        """Aborted ranges from the ``.txnindex`` files; open transactions as ``ongoing`` (from a
        snapshot), then the caller :meth:`replay` s the batch headers after it."""
        self.ongoing = dict(ongoing or {})
        self.aborted = [e for segment in self.log.segments for e in segment.txn_index.entries()]

    def replay(self, h: BatchHeader) -> None:
        """A batch header read back from the log (rebuild)."""
        if not h.is_transactional or h.producer_id < 0:
            return
        if not h.is_control:
            self.ongoing.setdefault(h.producer_id, h.base_offset)
        else:
            self.ongoing.pop(h.producer_id, None)

    def on_log_start(self, offset: int) -> None:
        """Retention moved the log start: ranges that ended before it are gone."""
        self.aborted = [a for a in self.aborted if a.last_offset >= offset]
        self.ongoing = {pid: max(first, offset) for pid, first in self.ongoing.items()}
