"""Moving a replica between this broker's log dirs (AlterReplicaLogDirs; Kafka's
``ReplicaAlterLogDirsManager``).

:meth:`ReplicaAlterLogDirsManager.alter` checks the request and starts the move in the background
(the answer does not wait for it, as Kafka's):

- the path is not one of ``log.dirs``: LOG_DIR_NOT_FOUND; it is offline, or the partition is:
  KAFKA_STORAGE_ERROR;
- the broker hosts no replica of the partition: REPLICA_NOT_AVAILABLE, and the directory is
  remembered for when the replica is created (``LogManager.preferred_dirs``);
- already there, or already moving: nothing to do (NONE).

The move: the log's append lock is taken (produce appends wait, follower and coordinator appends
fail with KAFKA_STORAGE_ERROR and are retried), the log is flushed, its directory copied by an I/O
thread to ``<destination>/<topic>-<partition>.<id>-future``, then the copy replaces the original
(:meth:`LogManager.replace_log`) and the partition switches to it. Reads go on from the original
while it is copied. Unlike Kafka, which copies while appends continue and catches the copy up
with a ``ReplicaAlterLogDirsThread``, appends to the partition pause for the copy: fine for small
or quiet partitions, a pause of (size / disk bandwidth) for big busy ones. Produce requests waiting
for the lock when the log is swapped answer KAFKA_STORAGE_ERROR (retriable; clients resend).
An I/O error while copying removes the copy and takes the destination directory offline.

Runs on the broker's event loop (the copy on the replica manager's I/O threads).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.errors import KafkaStorageError, LogDirNotFoundError, ReplicaNotAvailableError
from odradek.storage import TopicPartition

if TYPE_CHECKING:
    from odradek.replication.replica_manager import ReplicaManager

__all__ = ["ReplicaAlterLogDirsManager"]

log = logging.getLogger(__name__)


class ReplicaAlterLogDirsManager:
    def __init__(self, replica_manager: ReplicaManager, executor: Executor) -> None:
        self.replica_manager = replica_manager
        self.executor = executor
        self.moving: dict[TopicPartition, Path] = {}
        """Partitions being moved, and where to."""
        self._tasks: set[asyncio.Task[None]] = set()

    def alter(self, tp: TopicPartition, path: str) -> None:
        """Start moving ``tp`` to ``path`` (see the module docstring for the errors raised)."""
        lm = self.replica_manager.log_manager
        destination = next((d for d in lm.log_dirs if str(d) == path or str(d.resolve()) == path), None)
        if destination is None:
            raise LogDirNotFoundError(f"{path} is not one of this broker's log dirs")
        if destination in lm.offline_dirs:
            raise KafkaStorageError(f"log dir {path} is offline")
        if tp in self.replica_manager.offline_partitions:
            raise KafkaStorageError(f"{tp.topic}-{tp.partition} is offline on this broker")
        partition = self.replica_manager.partitions.get(tp)
        if partition is None:
            lm.preferred_dirs[tp] = destination
            raise ReplicaNotAvailableError(f"this broker hosts no replica of {tp.topic}-{tp.partition} yet")
        if partition.log.dir.parent == destination or tp in self.moving:
            return
        self.moving[tp] = destination
        task = asyncio.get_running_loop().create_task(self._move(tp, destination), name=f"alter-log-dir-{tp}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _move(self, tp: TopicPartition, destination: Path) -> None:
        rm = self.replica_manager
        lm = rm.log_manager
        try:
            partition = rm.partitions.get(tp)
            if partition is None:
                return
            source = partition.log
            async with source.append_lock:
                if source.closed or rm.partitions.get(tp) is not partition:
                    return
                source.flush()
                source.take_producer_snapshot()  # the copy reopens with the producer state as it is now
                future = lm.future_dir(tp, destination)
                log.info("Moving %s-%d from %s to %s", tp.topic, tp.partition, source.dir.parent, destination)
                try:
                    await asyncio.get_running_loop().run_in_executor(self.executor, shutil.copytree, source.dir, future)
                except OSError as exc:
                    shutil.rmtree(future, ignore_errors=True)
                    lm.fail_dir(destination, f"copying {tp.topic}-{tp.partition} here: {exc}")
                    return
                if source.closed or rm.partitions.get(tp) is not partition:  # deleted or offline meanwhile
                    shutil.rmtree(future, ignore_errors=True)
                    return
                partition.replace_log(lm.replace_log(tp, future))
        except OSError as exc:
            log.error("Moving %s-%d to %s failed: %s", tp.topic, tp.partition, destination, exc)
        finally:
            self.moving.pop(tp, None)

    async def shutdown(self) -> None:
        """Wait for moves in progress (a copy is not interrupted half-way)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
