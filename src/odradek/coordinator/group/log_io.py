"""How the group coordinator reads and writes ``__consumer_offsets``: :class:`OffsetsLog`.

The coordinator only needs four things from the partitions it leads: append a batch, wait until
it is durable, read stored batches from an offset, and the log's bounds. :class:`OffsetsLog` is
that interface; :class:`ReplicaOffsetsLog` implements it over the broker's replica manager and
unit tests use an in-memory one.

Durability follows the topic's acks rule: writes are appended with acks=-1 (so
``min.insync.replicas`` applies) and a commit is acknowledged once the partition's high
watermark has passed its record, i.e. every in-sync replica has it. Failures come back as Kafka
error codes, never as exceptions. Event loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from odradek.errors import ErrorCode, KafkaError
from odradek.storage.topic_partition import TopicPartition

__all__ = ["GROUP_METADATA_TOPIC", "AppendResult", "OffsetsLog", "ReplicaOffsetsLog"]

GROUP_METADATA_TOPIC = "__consumer_offsets"

AppendResult = tuple[ErrorCode, int]
"""(error, offset of the last record appended; -1 on error)."""


class OffsetsLog(Protocol):
    def append(self, partition: int, records: bytes) -> AppendResult:
        """Append one record batch as leader (acks=-1)."""
        ...

    async def wait_durable(self, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        """Wait until ``last_offset`` is below the high watermark; REQUEST_TIMED_OUT after
        ``timeout_ms``, NOT_LEADER_OR_FOLLOWER if leadership was lost meanwhile."""
        ...

    def bounds(self, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset); raises KafkaError if the partition is not here."""
        ...

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        """Whole stored batches from the one holding ``offset`` (at least one batch if any)."""
        ...


class ReplicaOffsetsLog:
    """:class:`OffsetsLog` over ``replica_manager()`` (a getter: the broker creates its replica
    manager at start-up, after the coordinator)."""

    def __init__(self, replica_manager: Callable[[], Any], topic: str = GROUP_METADATA_TOPIC) -> None:
        self._replica_manager = replica_manager
        self.topic = topic

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def append(self, partition: int, records: bytes) -> AppendResult:
        try:
            info = self._replica_manager().append_records(self._tp(partition), records, -1)
        except KafkaError as exc:
            return exc.error_code, -1
        return ErrorCode.none, int(info.last_offset)

    async def wait_durable(self, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        while True:
            try:
                p = self._replica_manager().get_partition(self._tp(partition))
            except KafkaError as exc:
                return exc.error_code
            if not p.is_leader:
                return ErrorCode.not_leader_or_follower
            if p.high_watermark > last_offset:
                return ErrorCode.none
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.request_timed_out
            waiter: asyncio.Future[None] = loop.create_future()
            p.add_waiter(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                pass
            finally:
                p.remove_waiter(waiter)

    def bounds(self, partition: int) -> tuple[int, int]:
        log = self._replica_manager().get_partition(self._tp(partition)).log
        return int(log.log_start_offset), int(log.log_end_offset)

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        log = self._replica_manager().get_partition(self._tp(partition)).log
        info = log.read(offset, max_bytes, None, True)
        return bytes(info.records_bytes())
