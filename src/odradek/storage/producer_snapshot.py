"""Producer-state snapshot files: ``<offset>.snapshot`` in the partition directory (Kafka's format).

The file holds the producer state of the partition up to (excluding) ``offset``, the 20-digit
number in its name, so a restart replays only the batches after it instead of rebuilding from the
log. Format (big-endian, Kafka's ``ProducerStateManager`` version 1):

    version                 int16   1
    crc                     uint32  CRC-32C of everything after this field
    producer_entries        int32 count, then per producer (46 bytes):
      producer_id               int64
      epoch                     int16
      last_sequence             int32
      last_offset               int64
      offset_delta              int32   last_sequence - first sequence of the producer's last batch
      timestamp                 int64   max timestamp of the producer's last batch
      coordinator_epoch         int32   of the producer's last transaction marker, -1 if none
      current_txn_first_offset  int64   first offset of its open transaction, -1 if none

Written at segment roll and at clean shutdown (whole file to ``.tmp``, then renamed); files above
the log end are deleted on truncation and only the newest :data:`KEEP` are kept. A file that is
short, of another version or fails its CRC raises :class:`CorruptSnapshotError` (the caller logs
it and rebuilds from the log). Pure file I/O: the caller's thread.
"""

from __future__ import annotations

import os
import struct
from dataclasses import astuple, dataclass
from pathlib import Path

from crc32c import crc32c

__all__ = [
    "SNAPSHOT_SUFFIX",
    "CorruptSnapshotError",
    "SnapshotEntry",
    "delete_snapshots",
    "latest_snapshot",
    "read_snapshot",
    "write_snapshot",
]

SNAPSHOT_SUFFIX = ".snapshot"
KEEP = 3
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes


class CorruptSnapshotError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


def _path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def write_snapshot(directory: Path, offset: int, entries: list[SnapshotEntry]) -> Path:
    packed = (_ENTRY.pack(*astuple(e)) for e in entries)
    body = _COUNT.pack(len(entries)) + b"".join(packed)
    path = _path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(_HEAD.pack(1, crc32c(body)) + body)
    os.replace(tmp, path)
    return path


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    data = path.read_bytes()
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"{path.name}: {len(data)} bytes is shorter than a snapshot header")
    version, crc = _HEAD.unpack_from(data, 0)
    body = data[_HEAD.size :]
    if version != 1:
        raise CorruptSnapshotError(f"{path.name}: version {version} (expected 1)")
    if crc32c(body) != crc:
        raise CorruptSnapshotError(f"{path.name}: CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or _COUNT.size + count * _ENTRY.size != len(body):
        raise CorruptSnapshotError(f"{path.name}: {count} entries do not fill {len(body)} bytes")
    out = []
    for i in range(count):
        out.append(SnapshotEntry(*_ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size)))
    return out


def _snapshots(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if len(stem) == 20 and stem.isdigit():
            out.append((int(stem), path))
    return sorted(out)


def latest_snapshot(directory: Path, max_offset: int) -> tuple[int, Path] | None:
    """The newest snapshot at or below ``max_offset`` (the log end offset)."""
    found = [s for s in _snapshots(directory) if s[0] <= max_offset]
    return found[-1] if found else None


def delete_snapshots(directory: Path, above: int | None = None, keep: int = KEEP) -> None:
    """Delete the snapshots beyond ``above`` (a truncation point), then all but the newest ``keep``."""
    for leftover in directory.glob(f"*{SNAPSHOT_SUFFIX}.tmp"):  # a write cut short
        leftover.unlink(missing_ok=True)
    remaining = []
    for offset, path in _snapshots(directory):
        if above is not None and offset > above:
            path.unlink(missing_ok=True)
        else:
            remaining.append(path)
    for path in remaining[: max(len(remaining) - keep, 0)]:
        path.unlink(missing_ok=True)
