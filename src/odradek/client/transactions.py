"""The producer's idempotence and transactions (Kafka's ``TransactionManager``, client side).

State per producer: the producer id and epoch from InitProducerId, the next sequence number of
every partition written to (a batch takes ``count`` numbers when it is built, so a retried batch
keeps its numbers and the broker recognises it), and, with a ``transactional_id``, the transaction
coordinator and the partitions and groups added to the open transaction.

Requests and their retries, as the Java producer:

- FindCoordinator (key type 1) for the transactional id; NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE
  find it again, COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS wait and retry;
- InitProducerId (with the transactional id and ``transaction_timeout_ms``; without one, any
  broker hands out an idempotent producer id): a second producer with the same transactional id
  bumps the epoch, and the first one's next request is answered PRODUCER_FENCED /
  INVALID_PRODUCER_EPOCH, raised as the matching :mod:`odradek.errors` exception;
- AddPartitionsToTxn (v3 and below form) before the first batch to a partition in a transaction;
- AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator, for ``send_offsets``;
- EndTxn (commit or abort).

Belongs to the event loop of its producer.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from odradek.client.cluster import Cluster, TopicPartition, group_by_topic
from odradek.client.connection import KafkaConnection
from odradek.client.errors import error_for
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey

__all__ = ["TransactionManager"]

GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
_SEQ_MAX = 2**31 - 1

_REFIND = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
    }
)
_WAIT = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions})


class TransactionManager:
    """Producer id, epoch, sequences and the open transaction of one producer."""

    def __init__(self, cluster: Cluster, transactional_id: str | None, transaction_timeout_ms: int) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[TopicPartition, int] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self.in_transaction = False
        self._partitions: set[TopicPartition] = set()
        self._started = False
        """Something was added to the open transaction (EndTxn is sent only then, as the Java client)."""
        self._lock = asyncio.Lock()

    @property
    def initialized(self) -> bool:
        return self.producer_id >= 0

    def next_sequence(self, tp: TopicPartition, count: int) -> int:
        """The base sequence of a new batch of ``count`` records to ``tp`` (wraps after 2^31-1)."""
        base = self._sequences.get(tp, 0)
        self._sequences[tp] = (base + count) % (_SEQ_MAX + 1)
        return base

    # --- coordinator calls ---------------------------------------------------------------------

    async def _coordinator(self, key_type: int, key: str, refresh: bool = False) -> KafkaConnection:
        if refresh or (key_type, key) not in self._coordinators:
            conn = await self.cluster.any_connection()
            rb = conn.builder(ApiKey.FIND_COORDINATOR, 4, 4)
            response = await conn.send(rb(key_type=key_type, coordinator_keys=(key,)))
            entry = response.coordinators[0]
            code = ErrorCode(entry.error_code)
            if code != ErrorCode.none:
                raise error_for(code, entry.error_message, key)
            self._coordinators[(key_type, key)] = int(entry.node_id)
        return await self.cluster.connection(self._coordinators[(key_type, key)])

    async def _call(
        self, key_type: int, key: str, send: Callable[[KafkaConnection], Awaitable[tuple[ErrorCode, Any]]]
    ) -> Any:
        """``send`` to the coordinator of ``key`` until it answers something other than a
        coordinator move or a wait; raises that answer's error, else returns its value."""
        refresh = False
        for _attempt in range(max(20, self.cluster.retries * 4)):
            try:
                conn = await self._coordinator(key_type, key, refresh)
                code, value = await send(conn)
            except KafkaError as exc:
                code, value = exc.error_code, None
            refresh = code in _REFIND
            if code not in _REFIND and code not in _WAIT:
                if code != ErrorCode.none:
                    raise error_for(code, None, key)
                return value
            await asyncio.sleep(self.cluster.retry_backoff_ms / 1000)
        raise error_for(code, "gave up retrying", key)

    async def init_producer_id(self) -> None:
        """InitProducerId: a new producer id (idempotent), or the transactional id's id with its
        epoch bumped (fencing any earlier producer with the same transactional id)."""

        async def send(conn: KafkaConnection) -> tuple[ErrorCode, Any]:
            rb = conn.builder(ApiKey.INIT_PRODUCER_ID, 3, 4)
            response = await conn.send(
                rb(
                    transactional_id=self.transactional_id,
                    transaction_timeout=datetime.timedelta(milliseconds=self.transaction_timeout_ms),
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                )
            )
            return ErrorCode(response.error_code), (int(response.producer_id), int(response.producer_epoch))

        if self.transactional_id is None:
            conn = await self.cluster.any_connection()
            code, value = await send(conn)
            if code != ErrorCode.none:
                raise error_for(code, None, "InitProducerId")
        else:
            value = await self._call(TRANSACTION_KEY_TYPE, self.transactional_id, send)
        self.producer_id, self.producer_epoch = value
        self._sequences.clear()

    def _simple(self, api_key: int, **fields: Any) -> Callable[[KafkaConnection], Awaitable[tuple[ErrorCode, Any]]]:
        """A coordinator request of the transactional id, producer id and epoch plus ``fields``
        (AddOffsetsToTxn, EndTxn), answered by one error code."""

        async def send(conn: KafkaConnection) -> tuple[ErrorCode, Any]:
            rb = conn.builder(api_key, 0, 3)
            ids = {"transactional_id": self.transactional_id, "producer_id": self.producer_id}
            response = await conn.send(rb(**ids, producer_epoch=self.producer_epoch, **fields))
            return ErrorCode(response.error_code), None

        return send

    # --- the transaction -------------------------------------------------------------------------

    def begin(self) -> None:
        if self.transactional_id is None:
            raise RuntimeError("begin_transaction needs a transactional_id")
        if not self.initialized:
            raise RuntimeError("call init_transactions() first")
        if self.in_transaction:
            raise RuntimeError("a transaction is already open")
        self.in_transaction = True
        self._started = False
        self._partitions = set()

    async def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for the partitions not yet in the open transaction."""
        new = sorted(set(tps) - self._partitions)
        if not new or self.transactional_id is None:
            return
        txn_id = self.transactional_id

        async def send(conn: KafkaConnection) -> tuple[ErrorCode, Any]:
            rb = conn.builder(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3)
            response = await conn.send(
                rb(
                    v3_and_below_transactional_id=txn_id,
                    v3_and_below_producer_id=self.producer_id,
                    v3_and_below_producer_epoch=self.producer_epoch,
                    v3_and_below_topics=tuple(
                        rb.make("AddPartitionsToTxnTopic", name=t, partitions=tuple(p for p, _ in parts))
                        for t, parts in group_by_topic((tp, None) for tp in new).items()
                    ),
                )
            )
            codes = [
                ErrorCode(p.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
            ]
            failed = [c for c in codes if c not in (ErrorCode.none, ErrorCode.operation_not_attempted)]
            return (failed[0] if failed else ErrorCode.none), None

        async with self._lock:
            await self._call(TRANSACTION_KEY_TYPE, txn_id, send)
            self._partitions.update(new)
            self._started = True

    async def send_offsets(self, offsets: Mapping[TopicPartition, int], group_id: str, metadata: str = "") -> None:
        """Commit ``offsets`` for ``group_id`` as part of the open transaction (visible on commit)."""
        if not self.in_transaction or self.transactional_id is None:
            raise RuntimeError("send_offsets_to_transaction needs an open transaction")
        txn_id = self.transactional_id

        async def commit(conn: KafkaConnection) -> tuple[ErrorCode, Any]:
            rb = conn.builder(ApiKey.TXN_OFFSET_COMMIT, 0, 3)
            topics = tuple(
                rb.make(
                    "TxnOffsetCommitRequestTopic",
                    name=t,
                    partitions=tuple(
                        rb.make(
                            "TxnOffsetCommitRequestPartition",
                            partition_index=p,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata=metadata,
                        )
                        for p, offset in parts
                    ),
                )
                for t, parts in group_by_topic(offsets.items()).items()
            )
            response = await conn.send(
                rb(
                    transactional_id=txn_id,
                    group_id=group_id,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    generation_id=-1,
                    member_id="",
                    group_instance_id=None,
                    topics=topics,
                )
            )
            codes = [ErrorCode(p.error_code) for t in response.topics for p in t.partitions]
            failed = [c for c in codes if c != ErrorCode.none]
            return (failed[0] if failed else ErrorCode.none), None

        await self._call(TRANSACTION_KEY_TYPE, txn_id, self._simple(ApiKey.ADD_OFFSETS_TO_TXN, group_id=group_id))
        self._started = True
        await self._call(GROUP_KEY_TYPE, group_id, commit)

    async def end(self, commit: bool) -> None:
        """EndTxn: commit or abort the open transaction."""
        if not self.in_transaction or self.transactional_id is None:
            raise RuntimeError("no open transaction")
        if self._started:
            send = self._simple(ApiKey.END_TXN, committed=commit)
            await self._call(TRANSACTION_KEY_TYPE, self.transactional_id, send)
        self.in_transaction = False
        self._partitions = set()
