"""The broker's log cleaner (Kafka's ``LogCleaner``): ``log.cleaner.threads`` cleaners, each an
asyncio task that picks the filthiest log (:class:`~.manager.LogCleanerManager`), cleans it in a
worker process and swaps the result in on the event loop.

Why processes: a clean is CPU work on every record; in a thread it would hold the GIL and starve
the event loop. The tasks plan on the loop (segment metadata only), hand the plan to a
``ProcessPoolExecutor`` (``forkserver`` context: the broker is threaded and must not be forked)
whose workers read the segment files by path and write ``.cleaned`` files
(:func:`~.segment_cleaner.run_clean`), then validate and swap on the loop (:func:`~.clean.apply_result`).
Each worker is throttled to ``log.cleaner.io.max.bytes.per.second / log.cleaner.threads``.
No process outlives the broker: the workers watch a pipe from it and exit when it is gone (also
after ``kill -9``), and the forkserver and the resource tracker follow (:mod:`~.lifeline`).

Failures: a clean that fails on the log's data (a corrupt batch) marks the partition
uncleanable with an ERROR log; an I/O error in the worker (e.g. a full disk: ENOSPC while the
``.cleaned`` files are written) is logged and the log is tried again after
``log.cleaner.backoff.ms``; in both cases the ``.cleaned`` files are removed and the log is as
it was. A worker process that dies (killed, out of memory) fails the clean the same way: the
pool is replaced and the log, untouched, is cleaned on a later round. An I/O error during the
swap (on the loop, after the first rename) may leave the log half swapped: as Kafka
(``maybeHandleIOException`` -> ``LogDirFailureChannel``) the log dir is taken offline
(``log_dir_failure``: its logs are closed, the replica manager moves its partitions offline and
the controller is told); the next start completes or undoes the swap from the files
(:func:`~.swap.recover_swaps`). Without ``log_dir_failure`` (tools, tests) the partition is
marked uncleanable. The broker never stops for the cleaner.

Metrics (Kafka's): :attr:`LogCleaner.max_dirty_percent`, :attr:`LogCleaner.time_since_last_run_ms`,
:attr:`LogCleaner.uncleanable_partitions_count` (and per dir), ``max_buffer_utilization_percent``,
``max_clean_time_secs``, ``max_compaction_delay_secs``.

Lifecycle: :meth:`LogCleaner.startup` and :meth:`LogCleaner.shutdown` on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.storage.cleaner.clean import apply_result, plan_clean
from odradek.storage.cleaner.config import CleanerConfig
from odradek.storage.cleaner.lifeline import broker_lifeline, hold_lifeline
from odradek.storage.cleaner.manager import LogCleanerManager
from odradek.storage.cleaner.segment_cleaner import CleanerStats, CleanPlan, CleanResult, run_clean
from odradek.storage.cleaner.swap import CLEANED_SUFFIX, remove_suffixed

if TYPE_CHECKING:
    from odradek.storage.log import Log

__all__ = ["LogCleaner"]

logger = logging.getLogger("odradek.storage.cleaner")

_WORKER_MODULES = ["odradek.storage.cleaner.segment_cleaner", "odradek.storage.cleaner.lifeline"]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class LogCleaner:
    """Cleans the compacted logs of ``logs()``; see the module docstring.

    ``last_stable_offset(log)`` bounds the clean (the partition's LSO; default its high
    watermark); ``retain_offsets(log)`` gives the last offsets of the active producers' batches
    (None: each producer id's last batch in the log). ``log_dir_failure(dir, message)`` takes a
    log dir offline (Kafka's ``LogDirFailureChannel.maybeAddOfflineLogDir``; the broker passes
    ``LogManager.fail_dir``).
    """

    def __init__(
        self,
        config: CleanerConfig,
        logs: Callable[[], Iterable[Log]],
        *,
        last_stable_offset: Callable[[Log], int] | None = None,
        retain_offsets: Callable[[Log], Collection[int] | None] | None = None,
        time_ms: Callable[[], int] | None = None,
        log_dir_failure: Callable[[Path, str], object] | None = None,
        in_process: bool = False,
    ) -> None:
        self.config = config
        self._log_dir_failure = log_dir_failure
        self._in_process = in_process
        """Clean on the calling thread instead of worker processes (unit tests only: it blocks the loop)."""
        self.manager = LogCleanerManager(logs, last_stable_offset=last_stable_offset)
        self._lso = last_stable_offset or (lambda log: log.high_watermark)
        self._retain = retain_offsets or (lambda log: None)
        self._time_ms = time_ms or _wall_ms
        self._executor: ProcessPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._last_run_ms = self._time_ms()
        self.last_stats: CleanerStats | None = None
        self.max_buffer_utilization_percent = 0.0
        self.max_clean_time_secs = 0.0
        self.cleans = 0
        self._wakeup = asyncio.Event()

    # --- metrics ----------------------------------------------------------------------------

    @property
    def max_dirty_percent(self) -> int:
        return int(100 * self.manager.dirtiest_ratio)

    @property
    def time_since_last_run_ms(self) -> int:
        return max(self._time_ms() - self._last_run_ms, 0)

    @property
    def uncleanable_partitions_count(self) -> int:
        return self.manager.uncleanable_partitions_count

    def uncleanable_partitions_count_by_dir(self) -> dict[Path, int]:
        return {d: len(p) for d, p in self.manager.uncleanable.items()}

    @property
    def max_compaction_delay_secs(self) -> int:
        return self.manager.max_compaction_delay_ms // 1000

    # --- lifecycle --------------------------------------------------------------------------

    def _new_executor(self) -> ProcessPoolExecutor:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_WORKER_MODULES)
        return ProcessPoolExecutor(
            max_workers=self.config.num_threads,
            mp_context=ctx,
            initializer=hold_lifeline,
            initargs=(broker_lifeline(),),
        )

    def startup(self) -> None:
        """Start the cleaner tasks (on the running loop); nothing when ``log.cleaner.enable`` is false."""
        if not self.config.enable_cleaner or self._tasks:
            return
        if not self._in_process:
            self._executor = self._new_executor()
        loop = asyncio.get_running_loop()
        for i in range(self.config.num_threads):
            self._tasks.append(loop.create_task(self._run(), name=f"kafka-log-cleaner-thread-{i}"))
        logger.info("Starting the log cleaner with %d thread(s)", self.config.num_threads)

    def wakeup(self) -> None:
        """Look for a log to clean now instead of at the end of the backoff (tests, config changes)."""
        self._wakeup.set()

    async def shutdown(self) -> None:
        """Stop the tasks (a swap is synchronous on the loop, so none is cut short) and the
        worker processes (their ``.cleaned`` files are removed at the next load)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                logger.exception("log cleaner task failed while stopping")
        executor, self._executor = self._executor, None
        if executor is not None:
            # A clean in progress is abandoned: its worker is stopped (its .cleaned files are
            # removed at the next load) rather than waited for.
            for process in list(getattr(executor, "_processes", {}).values()):
                process.terminate()
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: executor.shutdown(wait=True, cancel_futures=True)
            )

    async def reconfigure(self, config: CleanerConfig) -> None:
        """Kafka's ``LogCleaner.reconfigure`` (a dynamic ``log.cleaner.*`` change): stop the tasks and
        workers and start them again with ``config``. A clean in progress is abandoned and tried again
        later; the manager's state (checkpoints, uncleanable partitions) is kept. On the loop."""
        await self.shutdown()
        self.config = config
        self.startup()

    # --- cleaning ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                cleaned = await self.clean_filthiest_log()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("log cleaner failed; going on")
                cleaned = False
            if not cleaned:
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), self.config.backoff_ms / 1000)
                except TimeoutError:
                    pass

    async def clean_filthiest_log(self) -> bool:
        """Clean the filthiest log if one qualifies; True when one was cleaned (or tried)."""
        now = self._time_ms()
        self._last_run_ms = now
        ltc = self.manager.grab_filthiest_log(now)
        if ltc is None:
            return False
        log = ltc.log
        end: int | None = None
        try:
            plan = plan_clean(
                log,
                first_dirty_offset=ltc.first_dirty_offset,
                upper_bound=ltc.first_uncleanable_offset,
                now_ms=now,
                config=self.config,
                retain_offsets=self._retain(log),
            )
            if not plan.segments:
                return False
            result = await self._in_worker(plan)
            if not result.groups:
                logger.error(
                    "Log cleaner: the offset map of %d bytes holds none of the dirty keys of %s "
                    "(log.cleaner.dedupe.buffer.size too small?); marking the partition uncleanable",
                    plan.map_capacity_bytes,
                    log.topic_partition,
                )
                self.manager.mark_uncleanable(log)
            elif self._swap(log, plan, result):
                end = result.stats.end_offset
                self._record(log, result.stats)
        except (CorruptRecordError, InvalidRecordError) as exc:
            logger.error(
                "Unexpected exception thrown when cleaning log %s (%s). Marking its partition (%s) as uncleanable",
                log.dir,
                exc,
                log.topic_partition,
            )
            self.manager.mark_uncleanable(log)
        except OSError as exc:
            logger.error("I/O error cleaning log %s: %s; the log is unchanged, trying again later", log.dir, exc)
        finally:
            self.manager.done_cleaning(log, end)
        return end is not None

    def _swap(self, log: Log, plan: CleanPlan, result: CleanResult) -> bool:
        """:func:`~.clean.apply_result`; an I/O error there takes the log dir offline."""
        try:
            return apply_result(log, plan, result)
        except OSError as exc:
            directory = log.dir.parent
            msg = f"Failed to clean up log for {log.topic_partition} in dir {directory} due to IOException: {exc}"
            self.manager.mark_uncleanable(log)
            if self._log_dir_failure is None:
                logger.error("%s; the log may be half swapped until it is loaded again", msg)
            else:
                self._log_dir_failure(directory, msg)
            return False

    async def _in_worker(self, plan: CleanPlan) -> CleanResult:
        if self._in_process:
            return run_clean(plan)
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = self._new_executor()
        try:
            return await loop.run_in_executor(self._executor, run_clean, plan)
        except BrokenProcessPool:
            logger.error("a log cleaner worker process died; starting a new one")
            broken, self._executor = self._executor, self._new_executor()
            broken.shutdown(wait=False, cancel_futures=True)
            for ref in plan.segments:  # whatever the dead worker left: groups start at segment bases
                remove_suffixed(plan.directory, ref.base_offset, CLEANED_SUFFIX)
            raise OSError("the log cleaner worker process died") from None

    def _record(self, log: Log, stats: CleanerStats) -> None:
        self.cleans += 1
        self.last_stats = stats
        self.max_buffer_utilization_percent = 100 * stats.map_utilization
        self.max_clean_time_secs = stats.elapsed_s
        mb = 1024 * 1024
        logger.info(
            "Log cleaner: cleaned %s up to offset %d: %.1f MB read, %.1f MB written, %d of %d records kept "
            "in %.3f s (%.1f MB/s), map %d keys (%.1f%% full)",
            log.topic_partition,
            stats.end_offset,
            stats.bytes_read / mb,
            stats.bytes_written / mb,
            stats.records_retained,
            stats.records_read,
            stats.elapsed_s,
            stats.bytes_read / mb / stats.elapsed_s if stats.elapsed_s else 0.0,
            stats.map_entries,
            100 * stats.map_utilization,
        )
