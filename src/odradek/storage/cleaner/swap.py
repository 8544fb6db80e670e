"""Cleaned-segment files, the swap order and its crash recovery (Kafka's ``LocalLog.replaceSegments``
and ``LogLoader`` swap handling).

Files of a cleaned segment with base offset ``B`` (``B`` zero-padded to 20 digits): ``B.log``,
``B.index``, ``B.timeindex``, ``B.txnindex`` plus a suffix:

* ``.cleaned``: written by the cleaner (:mod:`.segment_cleaner`); never trusted at load (removed).
* ``.swap``: the cleaned segment is complete and replaces the segments of its offset range; at
  load the swap is completed (:func:`recover_swaps`).
* ``.deleted``: an old segment on its way out; removed at load.

Swap order (:func:`swap_in` and :func:`remove_replaced`, called by ``Log.replace_segments`` on
the event loop), each step
crash-safe:

1. ``.cleaned`` -> ``.swap`` for the index files, then the ``.log`` last (its ``.swap`` is the
   commit point); directory fsynced.
2. each replaced segment's files -> ``.deleted`` (old segment objects closed);
3. ``.swap`` -> final names; directory fsynced;
4. ``.deleted`` files removed.

Recovery at load (:func:`recover_swaps`): for each ``B.log.swap``, the segments whose base
offset is in ``[B, next offset of the swap)`` are deleted, then the swap files are renamed to
their final names (an index file missing is rebuilt by the loader). A cleaned segment always
ends at the last offset of the last segment it replaces (:mod:`.segment_cleaner`), so the range
is exact.

**Test hook** (not a configuration): :data:`CRASH_POINT_ENV` names a step; when the cleaner
reaches it the process kills itself with SIGKILL, as a ``kill -9`` would. Points: ``cleaned``
(``.cleaned`` files written), ``swap`` (after the ``.swap`` renames), ``deleting`` (one old
segment renamed ``.deleted``, others not yet), ``deleted`` (final names in place, ``.deleted``
files not yet removed).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.file_records import FileRecords

if TYPE_CHECKING:
    from odradek.storage.segment import LogSegment

__all__ = [
    "CLEANED_SUFFIX",
    "CRASH_POINT_ENV",
    "DELETED_SUFFIX",
    "SWAP_SUFFIX",
    "cleaned_paths",
    "crash_point",
    "recover_swaps",
    "remove_replaced",
    "remove_suffixed",
    "rename_segment_files",
    "swap_in",
]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
CRASH_POINT_ENV = "ODRADEK_CLEANER_CRASH_POINT"
_KINDS = ("index", "timeindex", "txnindex", "log")  # the .log last: its rename commits a step

logger = logging.getLogger("odradek.storage.cleaner")


def crash_point(name: str) -> None:
    """Test hook: SIGKILL this process when :data:`CRASH_POINT_ENV` is ``name``."""
    if os.environ.get(CRASH_POINT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _prefix(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_paths(directory: str | os.PathLike[str], base_offset: int, suffix: str = "") -> dict[str, Path]:
    d = Path(directory)
    prefix = _prefix(base_offset)
    return {kind: d / f"{prefix}.{kind}{suffix}" for kind in _KINDS}


def cleaned_paths(directory: str | os.PathLike[str], base_offset: int) -> dict[str, Path]:
    """The ``.cleaned`` files of a cleaned segment (keys ``log``, ``index``, ``timeindex``, ``txnindex``)."""
    return segment_paths(directory, base_offset, CLEANED_SUFFIX)


def rename_segment_files(directory: str | os.PathLike[str], base_offset: int, old: str, new: str) -> None:
    """Rename the files of segment ``base_offset`` from suffix ``old`` to ``new`` (indexes first,
    ``.log`` last; missing files are skipped, a ``.txnindex`` that should not exist is removed)."""
    src = segment_paths(directory, base_offset, old)
    dst = segment_paths(directory, base_offset, new)
    for kind in _KINDS:
        if src[kind].exists():
            os.replace(src[kind], dst[kind])
        elif kind == "txnindex":
            dst[kind].unlink(missing_ok=True)


def swap_in(directory: Path, base_offset: int, old: Sequence[LogSegment]) -> None:
    """Steps 1-3 of the swap order (module docstring): the cleaned segment ``base_offset`` takes
    the place of ``old`` on disk; the old segments are closed. The caller opens the new segment
    and then calls :func:`remove_replaced`."""
    rename_segment_files(directory, base_offset, CLEANED_SUFFIX, SWAP_SUFFIX)
    fsync_dir(directory)
    crash_point("swap")
    for i, seg in enumerate(old):
        seg.close()
        rename_segment_files(directory, seg.base_offset, "", DELETED_SUFFIX)
        if i == 0:
            crash_point("deleting")
    rename_segment_files(directory, base_offset, SWAP_SUFFIX, "")
    fsync_dir(directory)


def remove_replaced(directory: Path, old: Sequence[LogSegment]) -> None:
    """Step 4: remove the ``.deleted`` files of the replaced segments."""
    crash_point("deleted")
    for seg in old:
        remove_suffixed(directory, seg.base_offset, DELETED_SUFFIX)


def remove_suffixed(directory: str | os.PathLike[str], base_offset: int, suffix: str) -> None:
    for p in segment_paths(directory, base_offset, suffix).values():
        p.unlink(missing_ok=True)


def _next_offset_of(log_path: Path) -> int | None:
    """The offset after the last batch of ``log_path``; None unless the whole file is valid
    (CRC-checked) and holds at least one batch."""
    records = FileRecords(log_path)
    try:
        scan = records.checked_batches()
        next_offset: int | None = None
        for _, h in scan:
            next_offset = h.base_offset + h.last_offset_delta + 1
        return next_offset if scan.reason is None else None
    finally:
        records.close()


def recover_swaps(directory: Path, ident: str) -> None:
    """Complete every interrupted swap of ``directory`` (module docstring). Runs before the loader
    removes other leftovers."""
    swaps = sorted(p for p in directory.iterdir() if p.name.endswith(".log" + SWAP_SUFFIX))
    for swap in swaps:
        if len(swap.name) != 29 or not swap.name[:20].isdigit():
            continue
        base = int(swap.name[:20])
        end = _next_offset_of(swap)
        if end is None:
            logger.warning("%s Deleting swap file %s: it holds no valid batches", ident, swap.name)
            remove_suffixed(directory, base, SWAP_SUFFIX)
            continue
        logger.info("%s Found log file %s from an interrupted swap; completing it", ident, swap.name)
        for p in directory.iterdir():
            name = p.name
            kind = name[21:].split(".", 1)[0]
            if len(name) < 21 or not name[:20].isdigit() or name.endswith(SWAP_SUFFIX) or kind not in _KINDS:
                continue  # producer snapshots and other files stay
            offset = int(name[:20])
            if base <= offset < end and p.is_file():
                logger.info("%s Deleting segment file %s replaced by the cleaned segment", ident, name)
                p.unlink(missing_ok=True)
        # the index files of the swap are rebuilt by the loader (the .swap names are dropped)
        for kind in ("index", "timeindex"):
            segment_paths(directory, base, SWAP_SUFFIX)[kind].unlink(missing_ok=True)
        rename_segment_files(directory, base, SWAP_SUFFIX, "")
    if swaps:
        fsync_dir(directory)
