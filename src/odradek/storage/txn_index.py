"""The aborted-transaction index of a segment: ``<base_offset>.txnindex`` (Kafka's ``TransactionIndex``).

One 34-byte entry per transaction aborted by a marker in the segment, in the order the markers
were written, big-endian:

    version             int16   0
    producer_id         int64
    first_offset        int64   the transaction's first record in this partition
    last_offset         int64   the ABORT marker's offset
    last_stable_offset  int64   the partition's LSO when the marker was written

The file is appended to (no preallocation); a torn last entry (a crash mid-write) is ignored when
read and cut off by :meth:`TransactionIndex.truncate_to`. A fetch under read_committed reads the
entries whose range overlaps the fetched offsets to answer ``aborted_transactions``. Called on the
event loop (or the log's I/O thread, under the log's lock, for appends).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENTRY_SIZE", "TXN_INDEX_FILE_SUFFIX", "AbortedTxn", "TransactionIndex"]

TXN_INDEX_FILE_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(0, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TransactionIndex:
    """``path``'s entries; the file exists only once something was aborted in the segment."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, entry: AbortedTxn) -> None:
        with open(self.path, "ab") as f:
            f.write(entry.encode())

    def entries(self) -> list[AbortedTxn]:
        """Every whole entry; [] when the file does not exist. Entries of another version are
        skipped (there is only version 0)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, producer_id, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version == 0:
                out.append(AbortedTxn(producer_id, first, last, lso))
        return out

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset`` (and a torn tail)."""
        if not self.path.exists():
            return
        kept = [e for e in self.entries() if e.last_offset < offset]
        if kept:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(b"".join(e.encode() for e in kept))
            os.replace(tmp, self.path)
        else:
            self.path.unlink(missing_ok=True)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
