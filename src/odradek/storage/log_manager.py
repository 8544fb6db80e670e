"""The broker's logs across its log directories (Kafka's ``LogManager``).

Each entry of ``log.dirs`` holds partition directories ``<topic>-<partition>`` and, at its root:

* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (high watermarks): see :mod:`odradek.storage.checkpoint`;
  written atomically by :meth:`LogManager.checkpoint`.
* ``.kafka_cleanshutdown``: an empty marker written by :meth:`LogManager.shutdown` after every log
  of the directory was flushed and closed, and removed once the directory has been loaded. When
  it is absent at start-up, segments after each log's recovery point are recovered.
* ``<topic>-<partition>.<id>-delete``: a deleted partition on its way out (removed at load).

Other entries (files, directories not named ``<topic>-<int>``) are ignored.

Threading: not thread-safe. All methods are synchronous and are called from the broker's asyncio
event-loop thread; the broker calls :meth:`cleanup_logs`, :meth:`flush_dirty_logs` and
:meth:`checkpoint` periodically from that loop.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from odradek.errors import InvalidTopicError, KafkaStorageError
from odradek.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from odradek.storage.config import LogConfig
from odradek.storage.log import Log, wall_clock_ms
from odradek.storage.log_loader import CLEAN_SHUTDOWN_FILE
from odradek.storage.topic_partition import TopicPartition, parse_topic_partition_dir

__all__ = ["DELETE_DIR_SUFFIX", "LogManager", "validate_topic_name"]

DELETE_DIR_SUFFIX = "-delete"
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
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)

    # --- loading ------------------------------------------------------------------------------

    def load_logs(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Open (and recover as needed) every partition directory of every log dir.

        ``topic_configs`` gives per-topic configs (the default config otherwise). Raises
        KafkaStorageError when a partition appears in two log dirs.
        """
        configs = topic_configs or {}
        for d in self.log_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            recovery_points = OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read()
            start_offsets = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read()
            high_watermarks = OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).read()
            logger.info("Loading logs from %s (%s shutdown)", d, "clean" if clean else "unclean")
            for child in sorted(d.iterdir()):
                if not child.is_dir():
                    continue
                if child.name.endswith(DELETE_DIR_SUFFIX):
                    logger.info("Removing deleted partition directory %s", child)
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
                    raise KafkaStorageError(f"error loading the log in {child}: {exc}") from exc
            if clean:
                marker.unlink(missing_ok=True)
                fsync_dir(d)
        logger.info("Loaded %d logs from %d log dir(s)", len(self._logs), len(self.log_dirs))

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
        validate_topic_name(tp.topic)
        if tp.partition < 0:
            raise InvalidTopicError(f"invalid partition {tp.partition} of topic {tp.topic}")
        target = self.log_dirs[0] if len(self.log_dirs) == 1 else self._least_loaded_dir()
        try:
            log = Log(
                target / tp.dir_name,
                config or self.default_config,
                time_ms=self._time_ms,
                topic_partition=tp,
                had_clean_shutdown=True,
            )
            fsync_dir(target)
        except OSError as exc:
            raise KafkaStorageError(f"error creating the log of {tp} in {target}: {exc}") from exc
        logger.info("Created log for partition %s in %s", tp, target)
        self._logs[tp] = log
        return log

    def _least_loaded_dir(self) -> Path:
        """The log dir holding the fewest partitions (the first of equals)."""
        counts = {d: 0 for d in self.log_dirs}
        for existing in self._logs.values():
            parent = existing.dir.parent
            if parent in counts:
                counts[parent] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

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
        logger.info("Deleted log for partition %s", tp)
        return True

    # --- periodic work ------------------------------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; return the number of segments deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        return sum(log.delete_old_segments(now) for log in self._logs.values())

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync rolled segments, and whole logs whose last flush is ``flush.ms`` old; return how
        many logs were flushed."""
        now = self._time_ms() if now_ms is None else now_ms
        flushed = 0
        for log in self._logs.values():
            did = log.flush_pending_rolls()
            if now - log.last_flush_time_ms >= log.config.flush_ms:
                log.flush()
                did = True
            flushed += did
        return flushed

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset and high-watermark checkpoints of every log dir."""
        for d in self.log_dirs:
            logs = [log for log in self._logs.values() if log.dir.parent == d]
            OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).write(
                {log.topic_partition: log.recovery_point for log in logs}
            )
            OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write(
                {log.topic_partition: log.log_start_offset for log in logs}
            )
            OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).write(
                {log.topic_partition: log.high_watermark for log in logs}
            )

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
        try:
            self.checkpoint()
        except OSError:
            logger.exception("Error writing checkpoints during shutdown")
            failed.update(self.log_dirs)
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
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(d)
        self._logs.clear()
        logger.info("Log manager shut down")
