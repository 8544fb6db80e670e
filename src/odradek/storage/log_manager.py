"""The broker's logs across its log directories (Kafka's ``LogManager``).

Each entry of ``log.dirs`` holds partition directories ``<topic>-<partition>`` and, at its root:

* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (high watermarks): see :mod:`odradek.storage.checkpoint`;
  written atomically by :meth:`LogManager.checkpoint`.
* ``cleaner-offset-checkpoint``: where each compacted log's dirty section starts, kept by the log
  cleaner (:mod:`odradek.storage.cleaner.manager`); a deleted log's entry is removed here.
* ``.kafka_cleanshutdown``: an empty marker written by :meth:`LogManager.shutdown` after every log
  of the directory was flushed and closed, and removed once the directory has been loaded. When
  it is absent at start-up, segments after each log's recovery point are recovered.
* ``<topic>-<partition>.<id>-delete``: a deleted partition on its way out (removed at load).
* ``<topic>-<partition>.<id>-future``: the copy of a log moving here from another log dir
  (AlterReplicaLogDirs); renamed to ``<topic>-<partition>`` when complete, removed at load if a
  crash interrupted the copy (the original is still in its old directory).

Other entries (files, directories not named ``<topic>-<int>``) are ignored.

**Offline log dirs** (Kafka's ``LogDirFailureChannel``): an I/O error in a directory (a failed
checkpoint, flush, retention pass or load here; a failed append reported by the replica manager
through :meth:`fail_dir`) takes the whole directory offline: its logs are closed and forgotten
(their files stay), no log is created there again, and :attr:`on_dir_failure` is called so the
broker can tell the controller. The broker keeps serving from its other directories; with all of
them offline it stops. A directory that cannot be created or read at start-up starts offline.

Threading: not thread-safe. Every method is called from the broker's asyncio event-loop thread;
all are synchronous but :meth:`create_logs`, which builds logs on an executor's threads (each
thread its own partitions' directories) and registers them on the loop. The broker calls
:meth:`cleanup_logs`, :meth:`flush_dirty_logs` and :meth:`checkpoint` periodically from that loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path

from odradek.errors import InvalidTopicError, KafkaStorageError
from odradek.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from odradek.storage.cleaner.manager import CLEANER_OFFSET_CHECKPOINT
from odradek.storage.config import LogConfig
from odradek.storage.log import Log, wall_clock_ms
from odradek.storage.log_loader import CLEAN_SHUTDOWN_FILE
from odradek.storage.topic_partition import TopicPartition, parse_topic_partition_dir

__all__ = ["DELETE_DIR_SUFFIX", "LogManager", "validate_topic_name"]

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
CREATE_CHUNK = 64
"""Logs one thread of :meth:`LogManager.create_logs` creates in a row."""
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

logger = logging.getLogger("odradek.storage.log_manager")


def validate_topic_name(topic: str) -> None:
    """Raise InvalidTopicError unless ``topic`` is a legal Kafka topic name."""
    if topic in (".", "..") or not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicError(
            f"Topic name {topic!r} is illegal: it must be 1-249 characters of ASCII letters, digits, '.', '_', '-'"
        )


class LogManager:
    """Creates, loads, cleans, flushes, checkpoints and closes the partition logs of one broker."""

    def __init__(
        self,
        log_dirs: Sequence[str | os.PathLike[str]],
        default_config: LogConfig,
        *,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._time_ms = time_ms or wall_clock_ms
        self._logs: dict[TopicPartition, Log] = {}
        self.offline_dirs: set[Path] = set()
        self.preferred_dirs: dict[TopicPartition, Path] = {}
        """Where a partition not hosted yet should be created (AlterReplicaLogDirs before it exists)."""
        self._creating: set[TopicPartition] = set()
        """Partitions whose logs :meth:`create_logs` is creating on other threads."""
        self.on_dir_failure: Callable[[Path, list[TopicPartition]], None] | None = None
        """Called (on the loop) with a directory that just went offline and the partitions it held."""
        self.on_log_start_moved: Callable[[TopicPartition], None] | None = None
        """Called (on the loop) with a partition whose retention deleted segments (its log start moved)."""
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                logger.error("Failed to create or validate data directory %s: %s; it is offline", d, exc)
                self.offline_dirs.add(d)
        if not self.online_dirs:
            raise KafkaStorageError(f"none of the log directories {', '.join(map(str, self.log_dirs))} is usable")

    def reconfigure_default_config(self, default_config: LogConfig) -> None:
        """The broker's log defaults changed (a dynamic ``log.*`` key): logs created from now on
        take ``default_config``; open logs are reconfigured by their owner (the replica manager),
        which knows their topic overrides. Event loop only."""
        self.default_config = default_config

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def fail_dir(self, directory: Path, reason: str) -> list[TopicPartition]:
        """Take ``directory`` offline (see the module docstring); the partitions it held. A
        directory already offline, or not one of ``log.dirs``, changes nothing."""
        if directory in self.offline_dirs or directory not in self.log_dirs:
            return []
        self.offline_dirs.add(directory)
        logger.error(
            "Error in log dir %s: %s. The dir is offline, and its partitions on this broker",
            directory,
            reason,
        )
        gone = [tp for tp, log in self._logs.items() if log.dir.parent == directory]
        for tp in gone:
            log = self._logs.pop(tp)
            try:
                log.close()
            except Exception as exc:  # closing a log of a failed disk may fail too
                logger.warning("Error closing the log of %s in offline dir %s: %s", tp, directory, exc)
        if self.on_dir_failure is not None:
            self.on_dir_failure(directory, gone)
        return gone

    def dir_of(self, tp: TopicPartition) -> Path | None:
        log = self._logs.get(tp)
        return log.dir.parent if log is not None else None

    # --- loading ------------------------------------------------------------------------------

    def load_logs(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Open (and recover as needed) every partition directory of every log dir.

        ``topic_configs`` gives per-topic configs (the default config otherwise). Raises
        KafkaStorageError when a partition appears in two log dirs.
        """
        configs = topic_configs or {}
        for d in self.online_dirs:
            try:
                self._load_dir(d, configs)
            except OSError as exc:
                for tp in [tp for tp, log in self._logs.items() if log.dir.parent == d]:
                    self._logs.pop(tp).close()
                logger.error("Error loading log dir %s: %s; it is offline", d, exc)
                self.offline_dirs.add(d)
        if not self.online_dirs:
            raise KafkaStorageError(f"none of the log directories {', '.join(map(str, self.log_dirs))} could be loaded")
        logger.info("Loaded %d logs from %d log dir(s)", len(self._logs), len(self.online_dirs))

    def _load_dir(self, d: Path, configs: Mapping[str, LogConfig]) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read()
        start_offsets = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read()
        high_watermarks = OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).read()
        logger.info("Loading logs from %s (%s shutdown)", d, "clean" if clean else "unclean")
        for child in sorted(d.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                logger.info("Removing deleted or unfinished partition directory %s", child)
                shutil.rmtree(child, ignore_errors=True)
                continue
            tp = parse_topic_partition_dir(child.name)
            if tp is None:
                logger.debug("Ignoring %s: not a partition directory", child)
                continue
            if tp in self._logs:
                raise KafkaStorageError(
                    f"Duplicate log directories for {tp} are found: {self._logs[tp].dir} and {child}"
                )
            try:
                self._logs[tp] = Log(
                    child,
                    configs.get(tp.topic, self.default_config),
                    log_start_offset=start_offsets.get(tp, 0),
                    recovery_point=recovery_points.get(tp, 0),
                    high_watermark=high_watermarks.get(tp),
                    had_clean_shutdown=clean,
                    time_ms=self._time_ms,
                    topic_partition=tp,
                )
            except OSError as exc:
                raise OSError(f"error loading the log in {child}: {exc}") from exc
        if clean:
            marker.unlink(missing_ok=True)
            fsync_dir(d)

    # --- lookup and lifecycle of logs ---------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def __contains__(self, tp: object) -> bool:
        return tp in self._logs

    def __len__(self) -> int:
        return len(self._logs)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The log of ``tp``, created empty in the log dir with the fewest partitions if missing.

        Raises InvalidTopicError for an illegal topic name or a negative partition.
        """
        log = self._logs.get(tp)
        if log is not None:
            return log
        if tp in self._creating:
            raise KafkaStorageError(f"the log of {tp} is being created")
        validate_topic_name(tp.topic)
        if tp.partition < 0:
            raise InvalidTopicError(f"invalid partition {tp.partition} of topic {tp.topic}")
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(f"no online log dir to create the log of {tp} in")
        preferred = self.preferred_dirs.pop(tp, None)
        target = preferred if preferred in online else self._least_loaded_dir()
        try:
            log = Log(
                target / tp.dir_name,
                config or self.default_config,
                time_ms=self._time_ms,
                topic_partition=tp,
                had_clean_shutdown=True,
            )  # the new directory's entry is fsynced by the log's first flush
        except OSError as exc:
            self.fail_dir(target, f"creating the log of {tp}: {exc}")
            raise KafkaStorageError(f"error creating the log of {tp} in {target}: {exc}") from exc
        logger.info("Created log for partition %s in %s", tp, target)
        self._logs[tp] = log
        return log

    async def create_logs(self, wanted: Mapping[TopicPartition, LogConfig], executor: Executor) -> int:
        """Create the missing logs of ``wanted`` (partition -> its config) on ``executor``'s threads,
        :data:`CREATE_CHUNK` at a time per thread, and register them here (on the loop); returns
        how many were created. Creating a log is a handful of file-system calls that each wait on
        the journal (about 2.5 ms a log on the machine measured); threads overlap those waits, so a
        LeaderAndIsr of thousands of new partitions is not one long wait of the loop. Best effort:
        a partition named by an invalid name, given a preferred dir, or whose log fails to be
        created here is left to :meth:`get_or_create_log`, which answers it precisely. The
        partitions being created are refused by :meth:`get_or_create_log` meanwhile."""
        online = self.online_dirs
        if not online:
            return 0
        counts = {d: 0 for d in online}
        for existing in self._logs.values():
            if existing.dir.parent in counts:
                counts[existing.dir.parent] += 1
        jobs: list[tuple[TopicPartition, Path, LogConfig]] = []
        for tp, config in wanted.items():
            if tp in self._logs or tp in self._creating or tp in self.preferred_dirs or tp.partition < 0:
                continue
            try:
                validate_topic_name(tp.topic)
            except InvalidTopicError:
                continue
            target = min(counts, key=lambda d: counts[d])
            counts[target] += 1
            jobs.append((tp, target, config))
        if not jobs:
            return 0
        time_ms = self._time_ms

        def build(chunk: Sequence[tuple[TopicPartition, Path, LogConfig]]) -> list[Log]:
            logs = []
            for tp, target, config in chunk:
                try:
                    logs.append(
                        Log(target / tp.dir_name, config, time_ms=time_ms, topic_partition=tp, had_clean_shutdown=True)
                    )
                except Exception as exc:
                    logger.debug("creating the log of %s in a batch failed: %s", tp, exc)
            return logs

        self._creating.update(tp for tp, _, _ in jobs)
        loop = asyncio.get_running_loop()
        try:
            chunks = [jobs[i : i + CREATE_CHUNK] for i in range(0, len(jobs), CREATE_CHUNK)]
            built = await asyncio.gather(*(loop.run_in_executor(executor, build, c) for c in chunks))
        finally:
            self._creating.difference_update(tp for tp, _, _ in jobs)
        created = 0
        for log in (log for logs in built for log in logs):
            self._logs[log.topic_partition] = log
            created += 1
        logger.info("Created %d logs in %s", created, ", ".join(str(d) for d in online))
        return created

    def _least_loaded_dir(self) -> Path:
        """The online log dir holding the fewest partitions (the first of equals)."""
        if len(self.online_dirs) == 1:
            return self.online_dirs[0]
        counts = {d: 0 for d in self.online_dirs}
        for existing in self._logs.values():
            parent = existing.dir.parent
            if parent in counts:
                counts[parent] += 1
        return min(counts, key=lambda d: counts[d])

    def future_dir(self, tp: TopicPartition, destination: Path) -> Path:
        """Where the copy of ``tp``'s log moving to ``destination`` is made."""
        return destination / f"{tp.dir_name}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"

    def replace_log(self, tp: TopicPartition, copied: Path) -> Log:
        """Finish a move: close ``tp``'s log (flushed, and unchanged since ``copied`` was made from
        it), rename the copy to ``<its dir>/<topic>-<partition>``, open it, delete the original.
        Raises OSError when the copy cannot be opened (it is removed and the original reopened)."""
        old = self._logs[tp]
        final = copied.parent / tp.dir_name

        def reopen(directory: Path) -> Log:
            return Log(
                directory,
                old.config,
                log_start_offset=old.log_start_offset,
                recovery_point=old.log_end_offset,
                high_watermark=old.high_watermark,
                had_clean_shutdown=True,
                time_ms=self._time_ms,
                topic_partition=tp,
            )

        old.close()
        try:
            os.replace(copied, final)
            fsync_dir(final.parent)
            new = reopen(final)
        except OSError:
            shutil.rmtree(copied, ignore_errors=True)
            shutil.rmtree(final, ignore_errors=True)
            self._logs[tp] = reopen(old.dir)
            raise
        self._logs[tp] = new
        doomed = old.dir.with_name(f"{old.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            os.replace(old.dir, doomed)
        except OSError:
            doomed = old.dir
        shutil.rmtree(doomed, ignore_errors=True)
        logger.info("Moved the log of %s from %s to %s", tp, old.dir.parent, final.parent)
        return new

    def delete_log(self, tp: TopicPartition) -> bool:
        """Close and remove the log of ``tp`` (renamed ``*-delete`` first); False if there is none."""
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        log.close()
        doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            os.replace(log.dir, doomed)
            fsync_dir(log.dir.parent)
        except OSError:
            doomed = log.dir
        shutil.rmtree(doomed, ignore_errors=True)
        self._forget_cleaner_checkpoint(log.dir.parent, tp)
        logger.info("Deleted log for partition %s", tp)
        return True

    @staticmethod
    def _forget_cleaner_checkpoint(log_dir: Path, tp: TopicPartition) -> None:
        """Drop ``tp`` from the dir's ``cleaner-offset-checkpoint`` (a topic created again with this
        name starts dirty)."""
        checkpoint = OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)
        entries = checkpoint.read()
        if entries.pop(tp, None) is not None:
            try:
                checkpoint.write(entries)
            except OSError as exc:
                logger.warning("Cannot update %s after deleting %s: %s", checkpoint.path, tp, exc)

    # --- periodic work ------------------------------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; return the number of segments deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        deleted = 0
        for log in list(self._logs.values()):
            try:
                removed = log.delete_old_segments(now)
                if removed and self.on_log_start_moved is not None:
                    self.on_log_start_moved(log.topic_partition)
                deleted += removed
            except OSError as exc:
                self.fail_dir(log.dir.parent, f"retention of {log.topic_partition}: {exc}")
        return deleted

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync rolled segments, and whole logs whose last flush is ``flush.ms`` old; return how
        many logs were flushed."""
        now = self._time_ms() if now_ms is None else now_ms
        flushed = 0
        for log in list(self._logs.values()):
            try:
                did = log.flush_pending_rolls()
                if now - log.last_flush_time_ms >= log.config.flush_ms:
                    log.flush()
                    did = True
            except OSError as exc:
                self.fail_dir(log.dir.parent, f"flushing {log.topic_partition}: {exc}")
                continue
            flushed += did
        return flushed

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset and high-watermark checkpoints of every
        online log dir; a directory whose checkpoint cannot be written goes offline."""
        for d in self.online_dirs:
            logs = [log for log in self._logs.values() if log.dir.parent == d]
            try:
                OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).write(
                    {log.topic_partition: log.recovery_point for log in logs}
                )
                OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write(
                    {log.topic_partition: log.log_start_offset for log in logs}
                )
                OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).write(
                    {log.topic_partition: log.high_watermark for log in logs}
                )
            except OSError as exc:
                self.fail_dir(d, f"writing checkpoints: {exc}")

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, then mark each log dir as cleanly shut down.

        A log dir where a flush failed gets no marker, so its logs are recovered next time.
        """
        failed: set[Path] = set()
        for log in self._logs.values():
            try:
                log.flush()
            except Exception:
                logger.exception("Error flushing the log of %s during shutdown", log.topic_partition)
                failed.add(log.dir.parent)
        self.on_dir_failure = None  # shutting down: nobody to tell
        self.checkpoint()
        failed.update(self.offline_dirs)
        for log in self._logs.values():
            try:
                log.close()
            except Exception:
                logger.exception("Error closing the log of %s during shutdown", log.topic_partition)
                failed.add(log.dir.parent)
        for d in self.log_dirs:
            if d in failed:
                continue
            marker = d / CLEAN_SHUTDOWN_FILE
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                fsync_dir(d)
            except OSError as exc:
                logger.error("Error marking log dir %s as cleanly shut down: %s", d, exc)
        self._logs.clear()
        logger.info("Log manager shut down")
