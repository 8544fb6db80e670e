"""A minimal asyncio consumer of assigned partitions (no consumer group, no committed offsets).

``await consumer.assign([tp, ...])`` sets the partitions and their starting positions (the
``auto_offset_reset`` policy: ``earliest`` = log start offset, ``latest`` = high watermark);
:meth:`Consumer.seek` moves a position to an offset, ``"earliest"`` or ``"latest"``.
:meth:`Consumer.poll` sends one Fetch (v4..v12) per partition leader, concurrently, long-polling
up to ``max_wait_ms``, and returns the decoded records (:func:`odradek.protocol.records.iter_batches`
and :func:`~odradek.protocol.records.decode_records`) from each partition's position on, in
offset order per partition. Control batches (transaction markers) are skipped;
read_uncommitted only (aborted transactional records are returned).

Errors per partition: OFFSET_OUT_OF_RANGE resets the position by ``auto_offset_reset`` (or
raises ``OffsetOutOfRangeError`` when it is ``none``); NOT_LEADER_OR_FOLLOWER and other
retriable errors refresh metadata and retry; anything else (e.g. UNKNOWN_TOPIC_OR_PARTITION for
a deleted topic) raises the matching :mod:`odradek.errors` exception. A batch cut off by the
fetch size is left for the next fetch.

Belongs to the event loop that created it; call it only from that loop.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.client.admin import EARLIEST, LATEST
from odradek.client.cluster import Cluster, TopicPartition, group_by_topic
from odradek.client.connection import KafkaConnection
from odradek.client.errors import error_for
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.records import LOG_OVERHEAD, decode_records, iter_batches

__all__ = ["Consumer", "ConsumerRecord"]


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: int = 0
    """0 CreateTime, 1 LogAppendTime (the batch's timestampType)."""


@dataclass(slots=True)
class _Fetched:
    records: list[ConsumerRecord]
    next_offset: int
    high_watermark: int


def decode_fetched(tp: TopicPartition, data: bytes | None, position: int) -> tuple[list[ConsumerRecord], int]:
    """Records at or after ``position`` in fetched ``data`` and the next position.

    Control batches advance the position without returning records; a truncated trailing batch
    is ignored (fetched again next time).
    """
    out: list[ConsumerRecord] = []
    next_offset = position
    if not data:
        return out, next_offset
    view = memoryview(data)
    for pos, header in iter_batches(view):
        if header.next_offset <= position:
            continue
        if not header.is_control:
            for r in decode_records(view[pos : pos + header.batch_length + LOG_OVERHEAD]):
                if r.offset >= position:
                    out.append(
                        ConsumerRecord(
                            tp.topic,
                            tp.partition,
                            r.offset,
                            r.timestamp_ms,
                            r.key,
                            r.value,
                            tuple(r.headers),
                            header.timestamp_type,
                        )
                    )
        next_offset = max(next_offset, header.next_offset)
    return out, next_offset


class Consumer:
    """Reads assigned partitions of one cluster; ``await close()`` (or ``async with``) when done."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        auto_offset_reset: str = "latest",
        client_id: str = "odradek-consumer",
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_partition_fetch_bytes: int = 1024 * 1024,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        retries: int = 5,
        cluster: Cluster | None = None,
        security: ClientSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}")
        self.auto_offset_reset = auto_offset_reset
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.cluster = cluster or Cluster(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            retries=retries,
            security=security,
        )
        self.positions: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic``; raises UnknownTopicOrPartitionError (or the topic's error)."""
        desc = (await self.cluster.refresh([topic])).get(topic)
        if desc is None or desc.error_code != ErrorCode.none:
            code = desc.error_code if desc is not None else ErrorCode.unknown_topic_or_partition
            message = f"Topic '{topic}' does not exist." if code == ErrorCode.unknown_topic_or_partition else None
            raise error_for(code, message, topic)
        return sorted(desc.partitions)

    async def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``, each from the ``auto_offset_reset`` position
        (positions already set by :meth:`seek` are kept)."""
        wanted = list(dict.fromkeys(partitions))
        self.positions = {tp: pos for tp, pos in self.positions.items() if tp in wanted}
        missing = [tp for tp in wanted if tp not in self.positions]
        if missing:
            await self._reset(missing, self.auto_offset_reset)

    def assignment(self) -> list[TopicPartition]:
        return sorted(self.positions)

    def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def seek(self, tp: TopicPartition, offset: int | str) -> None:
        """Set the position of ``tp`` to an offset, ``"earliest"`` or ``"latest"`` (assigning it)."""
        if isinstance(offset, str):
            await self._reset([tp], offset)
        else:
            self.positions[tp] = offset

    async def offsets(self, partitions: Sequence[TopicPartition], which: str) -> dict[TopicPartition, int]:
        """The ``earliest`` or ``latest`` offset of each partition (raises on per-partition errors)."""
        timestamp = EARLIEST if which == "earliest" else LATEST

        async def call(
            conn: KafkaConnection, group: dict[TopicPartition, int]
        ) -> dict[TopicPartition, tuple[int, Any]]:
            rb = conn.builder(ApiKey.LIST_OFFSETS, 1, 8)
            response = await conn.send(
                rb(
                    replica_id=-1,
                    isolation_level=0,
                    topics=tuple(
                        rb.make(
                            "ListOffsetsTopic",
                            name=topic,
                            partitions=tuple(
                                rb.make(
                                    "ListOffsetsPartition", partition_index=p, current_leader_epoch=-1, timestamp=ts
                                )
                                for p, ts in parts
                            ),
                        )
                        for topic, parts in group_by_topic(group.items()).items()
                    ),
                )
            )
            return {
                TopicPartition(t.name, int(p.partition_index)): (int(p.error_code), int(p.offset))
                for t in response.topics
                for p in t.partitions
            }

        answers = await self.cluster.route({tp: timestamp for tp in partitions}, call)
        out = {}
        for tp, (code, offset) in answers.items():
            if code:
                raise error_for(code, None, str(tp))
            out[tp] = int(offset or 0)
        return out

    async def _reset(self, partitions: Sequence[TopicPartition], policy: str) -> None:
        if policy not in ("earliest", "latest"):
            raise error_for(
                ErrorCode.offset_out_of_range,
                "no position and auto_offset_reset is none",
                ", ".join(map(str, partitions)),
            )
        self.positions.update(await self.offsets(partitions, policy))

    async def poll(self, timeout_ms: int | None = None) -> list[ConsumerRecord]:
        """The next records of the assigned partitions, waiting up to ``timeout_ms`` (default
        ``max_wait_ms``) for some to arrive; an empty list when none did."""
        if not self.positions:
            await asyncio.sleep((timeout_ms if timeout_ms is not None else self.max_wait_ms) / 1000)
            return []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_ms if timeout_ms is not None else self.max_wait_ms) / 1000
        while True:
            wait_ms = max(0, min(self.max_wait_ms, int((deadline - loop.time()) * 1000)))
            records = await self._fetch_once(wait_ms)
            if records or loop.time() >= deadline:
                return records

    async def _fetch_once(self, wait_ms: int) -> list[ConsumerRecord]:
        async def call(
            conn: KafkaConnection, group: dict[TopicPartition, int]
        ) -> dict[TopicPartition, tuple[int, Any]]:
            rb = conn.builder(ApiKey.FETCH, 4, 12)
            response = await conn.send(
                rb(
                    replica_id=-1,
                    max_wait=datetime.timedelta(milliseconds=wait_ms),
                    min_bytes=self.min_bytes,
                    max_bytes=self.fetch_max_bytes,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=tuple(
                        rb.make(
                            "FetchTopic",
                            topic=topic,
                            partitions=tuple(
                                rb.make(
                                    "FetchPartition",
                                    partition=p,
                                    current_leader_epoch=-1,
                                    fetch_offset=offset,
                                    last_fetched_epoch=-1,
                                    log_start_offset=-1,
                                    partition_max_bytes=self.max_partition_fetch_bytes,
                                )
                                for p, offset in parts
                            ),
                        )
                        for topic, parts in group_by_topic(group.items()).items()
                    ),
                    forgotten_topics_data=(),
                    rack_id="",
                ),
                timeout_ms=wait_ms + self.cluster.request_timeout_ms,
            )
            if getattr(response, "error_code", 0):
                return {tp: (int(response.error_code), None) for tp in group}
            answers: dict[TopicPartition, tuple[int, Any]] = {}
            for t in response.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, int(p.partition_index))
                    code = int(p.error_code)
                    if code or tp not in group:
                        answers[tp] = (code, None)
                        continue
                    records, next_offset = decode_fetched(tp, p.records, group[tp])
                    answers[tp] = (0, _Fetched(records, next_offset, int(p.high_watermark)))
            return answers

        answers = await self.cluster.route(dict(self.positions), call)
        out: list[ConsumerRecord] = []
        for tp, (code, fetched) in sorted(answers.items()):
            if tp not in self.positions:
                continue
            if code == ErrorCode.offset_out_of_range:
                await self._reset([tp], self.auto_offset_reset)
                continue
            if code:
                raise error_for(code, None, str(tp))
            assert isinstance(fetched, _Fetched)
            out.extend(fetched.records)
            self.positions[tp] = fetched.next_offset
            self.high_watermarks[tp] = fetched.high_watermark
        return out
