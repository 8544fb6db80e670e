"""Which log to clean next, and what was cleaned (Kafka's ``LogCleanerManager``).

State, all on the event loop:

* ``cleaner-offset-checkpoint`` in each log dir (Kafka's ``OffsetCheckpointFile`` format,
  version 0): per partition, the first dirty offset (where the last clean ended). Written after
  each clean; entries of logs no longer in the dir are dropped.
* truncation: a log truncated (replication) below its checkpoint gets the checkpoint lowered to
  the truncation offset at the next selection (Kafka's ``maybeTruncateCheckpoint``);
* in progress: partitions being cleaned (not offered again until done);
* uncleanable: partitions whose clean failed on their data (a corrupt batch): an error is logged
  and they are skipped while that log object lives (a log deleted, moved or reloaded is tried
  again; Kafka's ``uncleanablePartitions``), per log dir.

Selection (:meth:`LogCleanerManager.grab_filthiest_log`): among logs with ``cleanup.policy``
including ``compact``, not in progress and not uncleanable, compute the cleanable range
(:func:`~.offsets.cleanable_offsets`) and the dirty ratio; logs with nothing at all are skipped;
a log qualifies when its ratio exceeds ``min.cleanable.dirty.ratio`` or when
``max.compaction.lag.ms`` has passed for its oldest dirty segment (and it has cleanable bytes);
the one with the highest ratio wins. Nothing else makes a log cleanable: as in Kafka 3.9, a log
whose tombstones' delete horizons have passed but that has nothing dirty is not cleaned (the
"clean idle logs once their latest delete horizon passed" rule of the KIP-534 drafts was not
merged); its tombstones go at the next clean that dirty data or ``max.compaction.lag.ms`` brings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.cleaner.offsets import LogToClean, cleanable_offsets, max_compaction_delay
from odradek.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.storage.log import Log

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "LogCleanerManager"]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

logger = logging.getLogger("odradek.storage.cleaner")


class LogCleanerManager:
    """See the module docstring. ``logs`` lists the broker's current logs; ``last_stable_offset``
    gives a log's upper bound (its LSO; default its high watermark)."""

    def __init__(
        self,
        logs: Callable[[], Iterable[Log]],
        *,
        last_stable_offset: Callable[[Log], int] | None = None,
    ) -> None:
        self._logs = logs
        self._lso = last_stable_offset or (lambda log: log.high_watermark)
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: dict[Path, dict[TopicPartition, Log]] = {}
        self.dirtiest_ratio = 0.0
        self.max_compaction_delay_ms = 0

    # --- checkpoints ------------------------------------------------------------------------

    @staticmethod
    def checkpoint_file(log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in {log.dir.parent for log in self._logs()}:
            out.update(self.checkpoint_file(d).read())
        return out

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set (or with None remove) ``tp``'s first dirty offset in ``log_dir``'s checkpoint."""
        present = {log.topic_partition for log in self._logs() if log.dir.parent == log_dir}
        f = self.checkpoint_file(log_dir)
        entries = {k: v for k, v in f.read().items() if k in present}
        if offset is None:
            entries.pop(tp, None)
        else:
            entries[tp] = offset
        try:
            f.write(entries)
        except OSError as exc:
            logger.error("Cannot write the cleaner checkpoint of %s: %s", log_dir, exc)

    # --- selection --------------------------------------------------------------------------

    def is_uncleanable(self, log: Log) -> bool:
        return self.uncleanable.get(log.dir.parent, {}).get(log.topic_partition) is log

    def mark_uncleanable(self, log: Log) -> None:
        self.uncleanable.setdefault(log.dir.parent, {})[log.topic_partition] = log

    def maintain_uncleanable(self, logs: list[Log]) -> None:
        """Forget uncleanable logs that are gone (deleted, moved, reloaded: the new log is tried
        again), Kafka's ``maintainUncleanablePartitions``."""
        current = {id(log) for log in logs}
        for parts in self.uncleanable.values():
            for tp in [tp for tp, log in parts.items() if id(log) not in current or log.closed]:
                del parts[tp]

    @property
    def uncleanable_partitions_count(self) -> int:
        return sum(len(p) for p in self.uncleanable.values())

    def grab_filthiest_log(self, now_ms: int) -> LogToClean | None:
        """The log to clean now (marked in progress), or None."""
        logs = list(self._logs())
        self.maintain_uncleanable(logs)
        checkpoints = self.all_cleaner_checkpoints()
        candidates = []
        max_delay = 0
        for log in logs:
            tp = log.topic_partition
            if log.closed or not log.config.compacted or tp in self.in_progress or self.is_uncleanable(log):
                continue
            checkpoint = checkpoints.get(tp)
            cut = log.take_truncation_point()
            if cut is not None and checkpoint is not None and checkpoint > cut:
                checkpoint = cut
                self.update_checkpoint(log.dir.parent, tp, cut)
            first_dirty, uncleanable, force = cleanable_offsets(log, checkpoint, now_ms, self._lso(log))
            if force:
                self.update_checkpoint(log.dir.parent, tp, first_dirty)
            delay = max_compaction_delay(log, first_dirty, now_ms)
            max_delay = max(max_delay, delay)
            ltc = LogToClean.of(log, first_dirty, uncleanable, delay > 0)
            if ltc.total_bytes > 0:
                candidates.append(ltc)
        self.max_compaction_delay_ms = max_delay
        self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        cleanable = [
            c
            for c in candidates
            if (c.needs_compaction_now and c.cleanable_bytes > 0)
            or c.cleanable_ratio > float(c.log.config.get("min.cleanable.dirty.ratio"))
        ]
        if not cleanable:
            return None
        chosen = max(cleanable, key=lambda c: c.cleanable_ratio)
        self.in_progress.add(chosen.log.topic_partition)
        return chosen

    def done_cleaning(self, log: Log, end_offset: int | None) -> None:
        """The clean of ``log`` ended; ``end_offset`` (the next first dirty offset) is
        checkpointed when given."""
        self.in_progress.discard(log.topic_partition)
        if end_offset is not None and not log.closed:
            self.update_checkpoint(log.dir.parent, log.topic_partition, end_offset)
