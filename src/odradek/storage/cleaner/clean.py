"""Planning a clean of a :class:`~odradek.storage.log.Log`, applying its result, and
:func:`clean_log` (a synchronous, in-process clean for tests and benchmarks).

A clean is planned on the event loop (:func:`plan_clean`: the segments as they are, the offsets
to clean), run anywhere (:func:`~odradek.storage.cleaner.segment_cleaner.run_clean`, in a
worker process for the broker), and applied on the loop (:func:`apply_result`): only when the
log still has exactly the planned segments, unchanged, is each cleaned segment swapped in
(``Log.replace_segments``); otherwise (truncation, retention, deletion, a roll of a planned
segment) the ``.cleaned`` files are discarded.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from odradek.storage.cleaner.config import CleanerConfig
from odradek.storage.cleaner.offsets import cleanable_offsets
from odradek.storage.cleaner.segment_cleaner import CleanerStats, CleanPlan, CleanResult, SegmentRef, run_clean
from odradek.storage.cleaner.swap import CLEANED_SUFFIX, remove_suffixed

if TYPE_CHECKING:
    from odradek.storage.log import Log

__all__ = ["apply_result", "clean_log", "discard_result", "plan_clean"]

logger = logging.getLogger("odradek.storage.cleaner")


def plan_clean(
    log: Log,
    *,
    first_dirty_offset: int,
    upper_bound: int,
    now_ms: int,
    config: CleanerConfig,
    retain_offsets: Collection[int] | None = None,
) -> CleanPlan:
    """The plan of a clean of ``log`` covering ``[log start, upper_bound)``, the dirty section
    starting at ``first_dirty_offset``. Runs on the loop (reads only segment metadata)."""
    segs = log.segments
    refs = []
    for i, seg in enumerate(segs[:-1]):  # never the active segment
        if seg.base_offset >= upper_bound:
            break
        refs.append(SegmentRef(seg.base_offset, str(seg.log_path), seg.size, segs[i + 1].base_offset))
    lc = log.config
    return CleanPlan(
        directory=str(log.dir),
        segments=tuple(refs),
        first_dirty_offset=first_dirty_offset,
        upper_bound=upper_bound,
        now_ms=now_ms,
        delete_retention_ms=int(lc.get("delete.retention.ms")),
        map_capacity_bytes=config.map_capacity_bytes,
        max_segment_bytes=lc.segment_bytes,
        index_interval_bytes=lc.index_interval_bytes,
        max_index_bytes=lc.segment_index_bytes,
        retain_offsets=frozenset(retain_offsets) if retain_offsets is not None else None,
        io_max_bytes_per_second=config.io_bytes_per_second_per_thread,
        txn_index_paths=tuple(str(seg.txn_index.path) for seg in segs),
    )


def discard_result(plan: CleanPlan, result: CleanResult) -> None:
    for group in result.groups:
        remove_suffixed(plan.directory, group.base_offset, CLEANED_SUFFIX)


def apply_result(log: Log, plan: CleanPlan, result: CleanResult) -> bool:
    """Swap the cleaned segments of ``result`` into ``log`` if it still has the planned segments
    unchanged (same objects at the same paths, same sizes, none active); else discard them.
    True when swapped. Runs on the loop."""
    if log.closed:
        discard_result(plan, result)
        return False
    by_base = {s.base_offset: s for s in log.segments[:-1]}
    active = log.active_segment
    groups = []
    for group in result.groups:
        olds = []
        for ref in group.replaces:
            seg = by_base.get(ref.base_offset)
            if seg is None or seg is active or seg.size != ref.size or str(seg.log_path) != ref.log_path:
                logger.info(
                    "%s: segment %d changed while it was cleaned; discarding the clean",
                    log.topic_partition,
                    ref.base_offset,
                )
                discard_result(plan, result)
                return False
            olds.append(seg)
        groups.append((group.base_offset, olds))
    for i, (base, olds) in enumerate(groups):
        try:
            log.replace_segments(base, olds)
        except BaseException:
            for later, _ in groups[i + 1 :]:
                remove_suffixed(plan.directory, later, CLEANED_SUFFIX)
            raise
    return True


def clean_log(
    log: Log,
    *,
    now_ms: int,
    config: CleanerConfig,
    upper_bound_offset: int | None = None,
    first_dirty_offset: int | None = None,
    retain_offsets: Collection[int] | None = None,
) -> CleanerStats:
    """Clean ``log`` now, in this process: build the map, rewrite, swap.

    The cleanable range follows Kafka (active segment, high watermark, ``min.compaction.lag.ms``),
    further bounded by ``upper_bound_offset`` (e.g. the last stable offset). The dirty section
    starts at ``first_dirty_offset`` (default: the log start, so the whole cleanable log is
    mapped). ``retain_offsets``: last offsets of the active producers' last batches (default:
    every producer id's last batch in the log). Returns the stats; ``end_offset`` is where the
    next clean's dirty section starts (the first dirty offset when nothing was cleanable).
    Raises what the clean raises (e.g. CorruptRecordError); the log is then unchanged.
    """
    first_dirty, uncleanable, _ = cleanable_offsets(
        log, first_dirty_offset, now_ms, log.high_watermark if upper_bound_offset is None else upper_bound_offset
    )
    if uncleanable <= first_dirty:
        return CleanerStats(end_offset=first_dirty, first_dirty_offset=first_dirty)
    plan = plan_clean(
        log,
        first_dirty_offset=first_dirty,
        upper_bound=uncleanable,
        now_ms=now_ms,
        config=config,
        retain_offsets=retain_offsets,
    )
    result = run_clean(plan)
    if not apply_result(log, plan, result):
        result.stats.end_offset = first_dirty
    return result.stats
