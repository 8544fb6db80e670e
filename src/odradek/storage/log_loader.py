"""Loading and recovering the segments of one partition directory (Kafka's ``LogLoader``).

Steps, in order:

1. Interrupted swaps of the log cleaner are completed (a ``<base>.log.swap`` replaces the
   segments of its offset range, :func:`odradek.storage.cleaner.swap.recover_swaps`); then
   leftover ``*.deleted``, ``*.cleaned`` and ``*.swap`` files are removed (a ``.cleaned`` file is
   an unfinished clean, ``.deleted`` a replaced segment); index files without their ``.log`` are
   removed.
2. Every ``<20 digits>.log`` is opened as a segment. A segment whose ``.index`` or ``.timeindex`` is
   missing, or fails the sanity check (:meth:`LogSegment.sanity_check`), gets both rebuilt from a
   CRC-checked scan of its log (which also cuts an invalid tail), even after a clean shutdown.
   A stale index that is sane (fewer entries than it could have) is kept: it is never wrong.
3. Without a clean shutdown, every segment from the one holding the recovery point onwards is
   recovered (:meth:`LogSegment.recover`). At the first one with an invalid tail, the tail is cut
   (logged at WARNING with partition, file, position, reason and bytes) and every later segment is
   deleted: nothing after a torn write can be trusted.
4. An empty directory gets one empty segment at the log start offset; the last segment is made
   active (indexes preallocated). The log start offset is at least the first segment's base
   offset; a checkpointed start offset beyond the log end empties the log and starts it there.

Synchronous; runs on the thread that opens the log (the broker's event loop, at start-up).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.cleaner.swap import recover_swaps
from odradek.storage.config import LogConfig
from odradek.storage.index import CorruptIndexError
from odradek.storage.segment import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    LogSegment,
    offset_from_file_name,
)
from odradek.storage.txn_index import TXN_INDEX_FILE_SUFFIX

__all__ = ["CLEAN_SHUTDOWN_FILE", "TEMP_FILE_SUFFIXES", "LoadedLog", "load_segments"]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
TEMP_FILE_SUFFIXES = (".deleted", ".cleaned", ".swap")

logger = logging.getLogger("odradek.storage.log_loader")


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    next_offset: int
    log_start_offset: int
    recovery_point: int


def _new_segment(directory: Path, base_offset: int, config: LogConfig, time_ms: Callable[[], int]) -> LogSegment:
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        time_ms=time_ms,
        create=True,
    )


def _remove_leftovers(directory: Path, ident: str) -> set[int]:
    """Delete temp and orphaned index files; return the base offsets of the ``.log`` files."""
    logs: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        if not path.is_file():
            continue
        name = path.name
        if name.endswith(TEMP_FILE_SUFFIXES):
            logger.info("%s Deleting leftover file %s", ident, path)
            path.unlink(missing_ok=True)
            continue
        offset = offset_from_file_name(name)
        if offset is None:
            continue
        suffix = name[20:]
        if suffix == LOG_FILE_SUFFIX:
            logs.add(offset)
        elif suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX):
            indexes.append((offset, path))
    for offset, path in indexes:
        if offset not in logs:
            logger.warning("%s Deleting index file %s: it has no log file", ident, path)
            path.unlink(missing_ok=True)
    return logs


def _rebuild(segment: LogSegment, ident: str) -> None:
    truncated, reason = segment.recover()
    if truncated:
        logger.warning(
            "%s Found invalid bytes in log segment %s at byte position %d: %s. Truncated %d bytes.",
            ident,
            segment.log_path,
            segment.size,
            reason,
            truncated,
        )


def load_segments(
    directory: str | Path,
    config: LogConfig,
    *,
    log_start_offset: int,
    recovery_point: int,
    had_clean_shutdown: bool,
    time_ms: Callable[[], int],
    ident: str,
) -> LoadedLog:
    """Open, check and (if needed) recover the segments of ``directory``; see the module docstring.

    ``ident`` prefixes every log line (e.g. ``[Log partition=orders-0, dir=/data]``).
    """
    directory = Path(directory)
    recover_swaps(directory, ident)
    bases = sorted(_remove_leftovers(directory, ident))
    segments: list[LogSegment] = []
    for base in bases:
        segments.append(
            LogSegment(
                directory,
                base,
                index_interval_bytes=config.index_interval_bytes,
                max_index_size=config.segment_index_bytes,
                time_ms=time_ms,
            )
        )

    # Segments from the one holding the recovery point onwards are "unflushed".
    first_unflushed = len(segments)
    if not had_clean_shutdown:
        first_unflushed = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= recovery_point:
                first_unflushed = i

    for i, seg in enumerate(segments[:first_unflushed]):
        if seg.nothing_indexed():
            continue  # an empty segment: its indexes are made on first use
        if not seg.indexes_exist():
            logger.info("%s Rebuilding missing index files of segment %s", ident, seg.log_path)
            seg.delete_index_files()
            _rebuild(seg, ident)
        else:
            try:
                seg.sanity_check()
            except CorruptIndexError as exc:
                logger.warning(
                    "%s Found a corrupt index for log file %s (%s); deleting and rebuilding the index files",
                    ident,
                    seg.log_path,
                    exc,
                )
                seg.delete_index_files()
                _rebuild(seg, ident)
        if i < len(segments) - 1:
            seg.release_indexes()

    unflushed = segments[first_unflushed:]
    if unflushed:
        logger.info(
            "%s Recovering %d segment(s) from offset %d (no clean shutdown)",
            ident,
            len(unflushed),
            unflushed[0].base_offset,
        )
    for i, seg in enumerate(unflushed):
        seg.delete_index_files()
        before = seg.size
        truncated, reason = seg.recover()
        if truncated:
            logger.warning(
                "%s Found invalid bytes in log segment %s at byte position %d: %s. Truncated %d of %d bytes.",
                ident,
                seg.log_path,
                seg.size,
                reason,
                truncated,
                before,
            )
            for later in unflushed[i + 1 :]:
                logger.warning(
                    "%s Deleting segment %s: it follows the invalid tail of %s",
                    ident,
                    later.log_path,
                    seg.log_path.name,
                )
                later.delete()
                segments.remove(later)
            break
        if seg is not segments[-1]:
            seg.release_indexes()

    if not segments:
        segments.append(_new_segment(directory, max(log_start_offset, 0), config, time_ms))
    active = segments[-1]
    active.make_active()
    next_offset = active.read_next_offset()
    start = max(log_start_offset, segments[0].base_offset)
    if start > next_offset:
        logger.warning(
            "%s Log start offset %d is beyond the log end offset %d; starting the log at %d",
            ident,
            start,
            next_offset,
            start,
        )
        for seg in segments:
            seg.delete()
        segments = [_new_segment(directory, start, config, time_ms)]
        segments[0].make_active()
        next_offset = start
    point = next_offset if had_clean_shutdown else min(recovery_point, next_offset)
    return LoadedLog(segments, next_offset, start, max(point, start))
