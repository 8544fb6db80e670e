"""A failed log dir, from the broker to the controller (Kafka's ``LogDirFailureChannel`` handling).

When the log manager takes a directory offline (an I/O error; see
:mod:`odradek.storage.log_manager`) the replica manager drops its partitions (they answer
KAFKA_STORAGE_ERROR from then on) and calls :meth:`LogDirFailureHandler.on_failure`, which

- with no online directory left, logs it and halts the process (exit status 1), as Kafka does:
  a broker without storage must not keep its registration;
- otherwise writes ``/log_dir_event_notification/log_dir_event_<seq>`` (retried until written).

The controller then sends this broker LeaderAndIsr for every replica it hosts; the partitions of
the failed directory answer KAFKA_STORAGE_ERROR, and the controller moves their leadership to other
ISR replicas and drops this broker from their ISR. A broker that starts with an offline directory
writes the notification once registered. Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from odradek.metadata.errors import CoordinationError
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.storage import LogManager

__all__ = ["LogDirFailureHandler"]

log = logging.getLogger(__name__)
RETRY_BACKOFF_S = 0.5


class LogDirFailureHandler:
    def __init__(self, broker_id: int, zk: KafkaZkClient, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.log_manager = log_manager
        self._tasks: set[asyncio.Task[None]] = set()

    def on_failure(self, directory: Path) -> None:
        if not self.log_manager.online_dirs:
            log.critical(
                "Shutdown broker %d because all log dirs in %s have failed",
                self.broker_id,
                ", ".join(str(d) for d in self.log_manager.log_dirs),
            )
            logging.shutdown()
            os._exit(1)
        log.warning("broker %d: log dir %s is offline; notifying the controller", self.broker_id, directory)
        task = asyncio.get_running_loop().create_task(self.notify())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def notify_if_offline(self) -> None:
        """At start-up: directories that could not be loaded are reported once registered."""
        if self.log_manager.offline_dirs:
            await self.notify()

    async def notify(self) -> None:
        while True:
            try:
                await self.zk.propagate_log_dir_event(self.broker_id)
                return
            except (CoordinationError, OSError) as exc:
                log.warning("broker %d: log dir event not written yet (%s); retrying", self.broker_id, exc)
                await asyncio.sleep(RETRY_BACKOFF_S)
