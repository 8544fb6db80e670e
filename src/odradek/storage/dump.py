"""Reading segment files for inspection (Kafka's ``DumpLogSegments``), as lines of text.

:func:`dump_files` handles ``.log``, ``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` files and returns a
:class:`DumpResult`: the lines Kafka's tool prints to stdout, the problems it prints to stderr,
and whether verification failed (an index entry that does not match the log, an index that fails
its sanity check, a batch with a bad CRC, invalid bytes at the end of a log).

Files are opened read-only and memory-mapped; nothing is ever written. Safe to run against the
files of a running broker (it may see a partially written tail). Any thread.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from odradek.errors import KafkaError
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    DecodedRecord,
    decode_records,
    iter_batches,
    timestamp_type_name,
)
from odradek.storage.index import AbstractIndex, CorruptIndexError, OffsetIndex, TimeIndex
from odradek.storage.producer_snapshot import SNAPSHOT_SUFFIX, CorruptSnapshotError, read_snapshot
from odradek.storage.segment import INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX
from odradek.storage.txn_index import TXN_INDEX_FILE_SUFFIX, TransactionIndex

__all__ = ["DumpResult", "dump_files", "dump_index", "dump_log", "dump_time_index"]

_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


@dataclass
class DumpResult:
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed: bool = False

    def extend(self, other: DumpResult) -> None:
        self.lines += other.lines
        self.errors += other.errors
        self.failed = self.failed or other.failed


def _bool(value: bool) -> str:
    return "true" if value else "false"


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield memoryview(b"")
            return
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        view = memoryview(mm)
        try:
            yield view
        finally:
            view.release()
            mm.close()


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".", 1)[0])
    except ValueError:
        return 0


def _batch_line(h: BatchHeader, position: int, valid: bool) -> str:
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
        f"deleteHorizonMs: {_delete_horizon(h)} "
        f"position: {position} {timestamp_type_name(h.timestamp_type)}: {h.max_timestamp} "
        f"size: {h.size_in_bytes} magic: {h.magic} compresscodec: {h.compression_name} "
        f"crc: {h.crc} isvalid: {_bool(valid)}"
    )


def _delete_horizon(h: BatchHeader) -> str:
    """Kafka prints the batch's ``deleteHorizonMs`` (a Java ``OptionalLong``): the base timestamp
    when attribute bit 0x40 is set (KIP-534, stamped by the cleaner on the first clean of a batch
    that keeps tombstones or transaction markers), else empty."""
    return f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon_ms else "OptionalLong.empty"


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _record_line(h: BatchHeader, r: DecodedRecord, print_data: bool) -> str:
    sequence = h.base_sequence + (r.offset - h.base_offset) if h.base_sequence >= 0 else -1
    keys = ",".join(name for name, _ in r.headers)
    line = (
        f"| offset: {r.offset} {timestamp_type_name(h.timestamp_type)}: {r.timestamp_ms} "
        f"keySize: {len(r.key) if r.key is not None else -1} "
        f"valueSize: {len(r.value) if r.value is not None else -1} sequence: {sequence} headerKeys: [{keys}]"
    )
    if h.is_control:
        line += _control_text(r)
    elif print_data:
        if r.key is not None:
            line += f" key: {_text(r.key)}"
        if r.value is not None:
            line += f" payload: {_text(r.value)}"
    return line


def _control_text(r: DecodedRecord) -> str:
    if r.key is None or len(r.key) < 4:
        return " controlType: UNKNOWN"
    _, type_id = struct.unpack_from(">hh", r.key)
    name = _CONTROL_TYPES.get(type_id)
    if name is None:
        return f" controlType: UNKNOWN({type_id})"
    epoch = struct.unpack_from(">i", r.value, 2)[0] if r.value is not None and len(r.value) >= 6 else -1
    return f" endTxnMarker: {name} coordinatorEpoch: {epoch}"


def dump_log(path: str | Path, *, print_data_log: bool = False, deep_iteration: bool = False) -> DumpResult:
    """Batch lines of a ``.log`` file (and record lines with ``deep_iteration``/``print_data_log``)."""
    path = Path(path)
    out = DumpResult()
    out.lines.append(f"Log starting offset: {_base_offset(path)}")
    deep = deep_iteration or print_data_log
    gaps: list[tuple[int, int]] = []
    last_offset = -1
    with _mapped(path) as view:
        valid_bytes = 0
        for pos, h in iter_batches(view):
            size = h.batch_length + LOG_OVERHEAD
            valid = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) == h.crc
            out.failed = out.failed or not valid
            out.lines.append(_batch_line(h, pos, valid))
            if deep:
                try:
                    records = decode_records(view[pos : pos + size], verify_crc=False)
                except KafkaError as exc:
                    out.errors.append(f"Cannot decode the records of the batch at position {pos}: {exc}")
                    out.failed = True
                    records = []
                for r in records:
                    if last_offset != -1 and r.offset != last_offset + 1:
                        gaps.append((last_offset, r.offset))
                    last_offset = r.offset
                    out.lines.append(_record_line(h, r, print_data_log))
            valid_bytes = pos + size
        trailing = view.nbytes - valid_bytes
    if trailing > 0:
        out.lines.append(f"Found {trailing} invalid bytes at the end of {path.name}")
        out.failed = True
    if gaps:
        out.errors.append(f"Non-consecutive offsets in {path.resolve()}")
        out.errors += [f"  {a} is followed by {b}" for a, b in gaps]
    return out


def _header_at(view: memoryview, position: int) -> BatchHeader | None:
    if position < 0:
        return None
    for pos, h in iter_batches(view[position:]):
        return h if pos == 0 else None
    return None


def _ready_to_verify(index: AbstractIndex, path: Path, log_path: Path, out: DumpResult, *, sanity_only: bool) -> bool:
    """Run ``index``'s sanity check into ``out``; True when its entries should then be checked against the log."""
    try:
        index.sanity_check()
    except CorruptIndexError as exc:
        out.errors.append(f"{path} failed sanity check: {exc}")
        out.failed = True
        if sanity_only:
            return False
    else:
        if sanity_only:
            out.lines.append(f"{path} passed sanity check.")
            return False
    if not log_path.exists():
        out.errors.append(f"Log file {log_path} not found: cannot verify {path}")
        out.failed = True
        return False
    return True


def dump_index(path: str | Path, *, verify_only: bool = False, sanity_only: bool = False) -> DumpResult:
    """``offset: O position: P`` per entry of an ``.index``; mismatches with the log are errors."""
    path = Path(path)
    out = DumpResult()
    log_path = path.with_name(path.name.split(".", 1)[0] + LOG_FILE_SUFFIX)
    index = OffsetIndex(path, _base_offset(path), writable=False)
    try:
        if index.entries == 0:
            out.lines.append(f"{path} is empty.")
            return out
        if not _ready_to_verify(index, path, log_path, out, sanity_only=sanity_only):
            return out
        mismatches: list[tuple[int, int]] = []
        with _mapped(log_path) as view:
            for entry in index.all_entries():
                h = _header_at(view, entry.position)
                log_offset = h.last_offset if h is not None else -1
                if log_offset != entry.offset:
                    mismatches.append((entry.offset, log_offset))
                if not verify_only:
                    out.lines.append(f"offset: {entry.offset} position: {entry.position}")
        if mismatches:
            out.failed = True
            out.errors.append(f"Mismatches in :{path.resolve()}")
            out.errors += [f"  Index offset: {i}, log offset: {g}" for i, g in mismatches]
        return out
    finally:
        index.close()


def dump_time_index(path: str | Path, *, verify_only: bool = False, sanity_only: bool = False) -> DumpResult:
    """``timestamp: T offset: O`` per entry of a ``.timeindex``, checked against the log."""
    path = Path(path)
    out = DumpResult()
    stem = path.name.split(".", 1)[0]
    base = _base_offset(path)
    log_path = path.with_name(stem + LOG_FILE_SUFFIX)
    index_path = path.with_name(stem + INDEX_FILE_SUFFIX)
    tindex = TimeIndex(path, base, writable=False)
    oindex = OffsetIndex(index_path, base, writable=False) if index_path.exists() else None
    try:
        if not _ready_to_verify(tindex, path, log_path, out, sanity_only=sanity_only):
            return out
        not_found: list[tuple[int, int]] = []
        mismatches: list[tuple[int, int]] = []
        out_of_order: list[tuple[int, int]] = []
        prev_ts = -1
        with _mapped(log_path) as view:
            for entry in tindex.all_entries():
                start = oindex.lookup(entry.offset).position if oindex is not None else 0
                found: BatchHeader | None = None
                for _, h in iter_batches(view[start:]):
                    if h.last_offset >= entry.offset:
                        found = h
                        break
                if found is None:
                    not_found.append((entry.offset, -1))
                elif found.last_offset != entry.offset:
                    not_found.append((entry.offset, found.last_offset))
                else:
                    if found.max_timestamp != entry.timestamp:
                        mismatches.append((entry.timestamp, found.max_timestamp))
                    if prev_ts >= entry.timestamp:
                        out_of_order.append((entry.timestamp, prev_ts))
                if not verify_only:
                    out.lines.append(f"timestamp: {entry.timestamp} offset: {entry.offset}")
                prev_ts = entry.timestamp
        where = path.resolve()
        if mismatches:
            out.errors.append(f"Found timestamp mismatch in :{where}")
            out.errors += [f"  Index timestamp: {i}, log timestamp: {g}" for i, g in mismatches]
        if out_of_order:
            out.errors.append(f"Found out of order timestamp in :{where}")
            out.errors += [f"  Index timestamp: {i}, Previously indexed timestamp: {p}" for i, p in out_of_order]
        if not_found:
            out.errors.append("The following indexed offsets are not found in the log.")
            out.errors += [f"Indexed offset: {i}, found log offset: {g}" for i, g in not_found]
        out.failed = out.failed or bool(mismatches or out_of_order or not_found)
        return out
    finally:
        tindex.close()
        if oindex is not None:
            oindex.close()


def dump_txn_index(path: str | Path) -> DumpResult:
    """One line per aborted transaction of a ``.txnindex``, as Kafka's ``DumpLogSegments``."""
    out = DumpResult()
    for e in TransactionIndex(Path(path)).entries():
        out.lines.append(
            f"version: 0 producerId: {e.producer_id} firstOffset: {e.first_offset} "
            f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}"
        )
    return out


def dump_producer_snapshot(path: str | Path) -> DumpResult:
    """One line per producer of a ``.snapshot``, as Kafka's ``DumpLogSegments``."""
    out = DumpResult()
    try:
        entries = read_snapshot(Path(path))
    except CorruptSnapshotError as exc:
        out.errors.append(str(exc))
        out.failed = True
        return out
    for e in entries:
        txn = "None" if e.current_txn_first_offset < 0 else str(e.current_txn_first_offset)
        out.lines.append(
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp} "
            f"firstSequence: {e.last_sequence - e.offset_delta} lastSequence: {e.last_sequence} "
            f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
        )
    return out


def dump_files(
    files: Sequence[str | Path],
    *,
    print_data_log: bool = False,
    deep_iteration: bool = False,
    verify_index_only: bool = False,
    index_sanity_check: bool = False,
) -> DumpResult:
    """Dump each file by its suffix; unknown suffixes and missing files are reported as errors."""
    result = DumpResult()
    for name in files:
        path = Path(name)
        result.lines.append(f"Dumping {path}")
        if not path.is_file():
            result.errors.append(f"File {path} does not exist")
            result.failed = True
            continue
        try:
            if path.name.endswith(LOG_FILE_SUFFIX):
                result.extend(dump_log(path, print_data_log=print_data_log, deep_iteration=deep_iteration))
            elif path.name.endswith(TIME_INDEX_FILE_SUFFIX):
                result.extend(dump_time_index(path, verify_only=verify_index_only, sanity_only=index_sanity_check))
            elif path.name.endswith(TXN_INDEX_FILE_SUFFIX):
                result.extend(dump_txn_index(path))
            elif path.name.endswith(SNAPSHOT_SUFFIX):
                result.extend(dump_producer_snapshot(path))
            elif path.name.endswith(INDEX_FILE_SUFFIX):
                result.extend(dump_index(path, verify_only=verify_index_only, sanity_only=index_sanity_check))
            else:
                result.errors.append(f"Ignoring unknown file {path}")
        except OSError as exc:
            result.errors.append(f"Cannot read {path}: {exc}")
            result.failed = True
    return result
