"""A small asyncio producer: record batches to partition leaders, optionally idempotent or transactional.

``await producer.send(topic, value, key=key)`` appends one record; :meth:`Producer.send_batch`
appends many, one RecordBatch v2 per partition (built with
:func:`odradek.protocol.records.build_batch`, compressed with ``compression``: ``none``,
``gzip``, ``snappy``, ``lz4`` or ``zstd``), all partitions of a leader in one Produce request.

Partitioning as Kafka's default partitioner: an explicit ``partition`` wins; a record with a key
goes to ``murmur2(key) % partitions`` (the same partition a Java or librdkafka "murmur2_random"
producer picks); records without a key are spread round-robin per call.

Produce errors are answered per partition; retriable ones (NOT_LEADER_OR_FOLLOWER, a lost
connection...) are retried after a metadata refresh, so without idempotence a retried batch may
be written twice (at-least-once). Other errors raise the matching :mod:`odradek.errors`
exception, e.g. ``RecordTooLargeError``; an unknown topic raises ``UnknownTopicOrPartitionError``
(unless the broker auto-creates it). With ``acks=0`` nothing is awaited and offsets are -1.

``enable_idempotence=True`` (needs acks=-1) asks for a producer id on first use and numbers every
batch per partition, so the broker stores a retried batch once. ``transactional_id`` adds Kafka's
transactions (:mod:`odradek.client.transactions`): ``await init_transactions()`` once (fences an
earlier producer with the same id), then ``begin_transaction()``, sends,
``await send_offsets_to_transaction(offsets, group_id)``, ``await commit_transaction()`` or
``await abort_transaction()``; batches are sent only inside a transaction.

Belongs to the event loop that created it; call it only from that loop.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.client.cluster import Cluster, TopicPartition, group_by_topic
from odradek.client.connection import KafkaConnection
from odradek.client.errors import error_for
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.client.transactions import TransactionManager
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.records import Record, build_batch
from odradek.protocol.records_compression import CODEC_NAMES

__all__ = ["Producer", "Record", "RecordMetadata", "compression_codec", "murmur2"]


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (32-bit MurmurHash2, seed 0x9747b28c) as a signed int."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    full = length - length % 4
    for i in range(0, full, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[full + 2] << 16
    if rest >= 2:
        h ^= data[full + 1] << 8
    if rest >= 1:
        h ^= data[full]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's ``toPositive(murmur2(key)) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def compression_codec(name: str | int) -> int:
    """``gzip`` -> 1 ... (``none``/``uncompressed`` -> 0); ValueError for an unknown codec."""
    if isinstance(name, int):
        if name not in CODEC_NAMES:
            raise ValueError(f"unknown compression codec {name}")
        return name
    lowered = name.lower()
    if lowered == "uncompressed":
        return 0
    for codec, codec_name in CODEC_NAMES.items():
        if codec_name == lowered:
            return codec
    raise ValueError(f"unknown compression codec {name!r}: expected none, gzip, snappy, lz4 or zstd")


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record was written (offset -1 with acks=0)."""

    topic: str
    partition: int
    offset: int


class Producer:
    """Sends records to one cluster; ``await close()`` (or ``async with``) when done."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        acks: int = -1,
        compression: str | int = "none",
        client_id: str = "odradek-producer",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        retries: int = 5,
        allow_auto_create: bool = True,
        enable_idempotence: bool = False,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        cluster: Cluster | None = None,
        security: ClientSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, not {acks}")
        idempotent = enable_idempotence or transactional_id is not None
        if idempotent and acks != -1:
            raise ValueError("an idempotent or transactional producer needs acks=-1 (all)")
        self.acks = acks
        self.compression = compression_codec(compression)
        self.request_timeout_ms = request_timeout_ms
        self.allow_auto_create = allow_auto_create
        self.cluster = cluster or Cluster(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            retries=retries,
            security=security,
        )
        """Where metadata comes from: the bootstrap servers, or ``cluster`` when given (e.g. a
        ZooKeeper-backed one, :class:`odradek.zkclients.ZkBrokerPartitionInfo`)."""
        self._round_robin = itertools.count()
        self.transactions = (
            TransactionManager(self.cluster, transactional_id, transaction_timeout_ms) if idempotent else None
        )

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()

    async def init_transactions(self) -> None:
        """InitProducerId for the transactional id: this producer's id and a new epoch, which
        fences any earlier producer with the same id (its open transaction is aborted first)."""
        if self.transactions is None or self.transactions.transactional_id is None:
            raise RuntimeError("init_transactions needs a transactional_id")
        await self.transactions.init_producer_id()

    def begin_transaction(self) -> None:
        if self.transactions is None:
            raise RuntimeError("begin_transaction needs a transactional_id")
        self.transactions.begin()

    async def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, int], group_id: str, metadata: str = ""
    ) -> None:
        """Commit a consumer group's ``offsets`` with the open transaction (consume-transform-produce)."""
        if self.transactions is None:
            raise RuntimeError("send_offsets_to_transaction needs a transactional_id")
        await self.transactions.send_offsets(offsets, group_id, metadata)

    async def commit_transaction(self) -> None:
        if self.transactions is None:
            raise RuntimeError("commit_transaction needs a transactional_id")
        await self.transactions.end(commit=True)

    async def abort_transaction(self) -> None:
        if self.transactions is None:
            raise RuntimeError("abort_transaction needs a transactional_id")
        await self.transactions.end(commit=False)

    async def partitions_for(self, topic: str) -> int:
        """The partition count of ``topic``, waiting briefly for an auto-created topic's leaders.

        Raises UnknownTopicOrPartitionError / InvalidTopicError (or the topic's other error).
        """
        known = self.cluster.topics.get(topic)
        if known is not None and known.partitions:
            return len(known.partitions)
        code: int = ErrorCode.none
        for attempt in range(self.cluster.retries + 1):
            answered = await self.cluster.refresh([topic], allow_auto_create=self.allow_auto_create)
            desc = answered.get(topic)
            code = desc.error_code if desc is not None else ErrorCode.unknown_topic_or_partition
            if code == ErrorCode.none and desc is not None and desc.partitions:
                return len(desc.partitions)
            # LEADER_NOT_AVAILABLE: being created; UNKNOWN_TOPIC_OR_PARTITION once when it may be.
            creating = code == ErrorCode.unknown_topic_or_partition and self.allow_auto_create and attempt == 0
            if code not in (ErrorCode.leader_not_available, ErrorCode.none) and not creating:
                break
            await asyncio.sleep(self.cluster.retry_backoff_ms / 1000)
        raise error_for(code or ErrorCode.leader_not_available, None, topic)

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """Append one record and return where it was written."""
        [meta] = await self.send_batch(topic, [Record(key, value, headers, timestamp_ms)], partition=partition)
        return meta

    async def send_batch(
        self, topic: str, records: Sequence[Record], *, partition: int | None = None
    ) -> list[RecordMetadata]:
        """Append ``records`` (one batch per partition); their metadata in the order given.

        Raises the first partition's error (a KafkaError subclass) if any partition failed.
        """
        if not records:
            return []
        count = await self.partitions_for(topic)
        if partition is not None and not 0 <= partition < count:
            raise error_for(
                ErrorCode.unknown_topic_or_partition, f"{topic} has {count} partitions", f"{topic}-{partition}"
            )
        start = next(self._round_robin)
        placed: dict[TopicPartition, list[int]] = {}
        for i, record in enumerate(records):
            if partition is not None:
                p = partition
            elif record.key is not None:
                p = partition_for_key(record.key, count)
            else:
                p = (start + i) % count
            placed.setdefault(TopicPartition(topic, p), []).append(i)
        batches = await self._build(placed, records)
        answers = await self.cluster.route(batches, self._produce)
        out: list[RecordMetadata | None] = [None] * len(records)
        for tp, indexes in placed.items():
            code, base = answers[tp]
            if code:
                raise error_for(code, base if isinstance(base, str) else None, str(tp))
            base_offset = int(base) if isinstance(base, int) else -1
            for n, i in enumerate(indexes):
                out[i] = RecordMetadata(topic, tp.partition, base_offset + n if base_offset >= 0 else -1)
        return [m for m in out if m is not None]

    async def _build(
        self, placed: dict[TopicPartition, list[int]], records: Sequence[Record]
    ) -> dict[TopicPartition, bytes]:
        """One batch per partition; numbered (and added to the open transaction) when idempotent."""
        txn = self.transactions
        if txn is None:
            return {
                tp: build_batch([records[i] for i in ix], compression=self.compression) for tp, ix in placed.items()
            }
        if txn.transactional_id is not None:
            if not txn.in_transaction:
                raise RuntimeError("a transactional producer sends only inside a transaction: begin_transaction()")
            await txn.add_partitions(placed)
        elif not txn.initialized:
            await txn.init_producer_id()
        return {
            tp: build_batch(
                [records[i] for i in ix],
                compression=self.compression,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                base_sequence=txn.next_sequence(tp, len(ix)),
                is_transactional=txn.transactional_id is not None,
            )
            for tp, ix in placed.items()
        }

    async def _produce(
        self, conn: KafkaConnection, group: dict[TopicPartition, bytes]
    ) -> dict[TopicPartition, tuple[int, Any]]:
        rb = conn.builder(ApiKey.PRODUCE, 3, 11)
        txn_id = self.transactions.transactional_id if self.transactions is not None else None
        request = rb(
            transactional_id=txn_id,
            acks=self.acks,
            timeout=datetime.timedelta(milliseconds=self.request_timeout_ms),
            topic_data=tuple(
                rb.make(
                    "TopicProduceData",
                    name=topic,
                    partition_data=tuple(rb.make("PartitionProduceData", index=p, records=batch) for p, batch in parts),
                )
                for topic, parts in group_by_topic(group.items()).items()
            ),
        )
        response = await conn.send(request)
        if response is None:  # acks=0
            return {tp: (ErrorCode.none, -1) for tp in group}
        answers: dict[TopicPartition, tuple[int, Any]] = {}
        for t in response.responses:
            for p in t.partition_responses:
                code = int(p.error_code)
                value: Any = getattr(p, "error_message", None) if code else int(p.base_offset)
                answers[TopicPartition(t.name, int(p.index))] = (code, value)
        return answers
