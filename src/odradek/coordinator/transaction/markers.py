"""Writing a transaction's markers on its partitions' leaders (Kafka's ``TransactionMarkerChannelManager``).

One WriteTxnMarkers v1 request per leader, over the wire (also when the leader is this broker),
naming every partition of the transaction that broker leads. The connection to each leader is kept
open between transactions (one per broker id, reopened after an error or an address change, closed
by :meth:`MarkerWriter.close`): a transaction's commit then costs one round trip per leader, not a
connect and an ApiVersions exchange as well. Partitions answered
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, a lost connection or without a
known leader are retried with the leaders the metadata cache knows then, every
``RETRY_BACKOFF_S``, until every marker is written (SEEDS §5 step 7) or this broker stops being the
transaction's coordinator. A partition whose topic was deleted (UNKNOWN_TOPIC_OR_PARTITION and no
longer in the metadata cache) is given up, as Kafka does.

The coordinator sees it as a :class:`MarkerChannel`; :class:`MarkerWriter` takes the broker id
(its client id), the metadata view (leaders and their addresses) and this broker's own address
(for a leader the metadata cache does not list yet); a broker also gives the leaders' inter-broker
endpoints (``endpoint_for``, else the metadata view's first listener) and how to connect to them
(``security``, :func:`odradek.client.security.inter_broker_client_security`). Event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from odradek.client import write_txn_markers
from odradek.client.connection import KafkaConnection
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.client.write_txn_markers import TxnMarkerEntry
from odradek.coordinator.runtime import MetadataView
from odradek.errors import ErrorCode
from odradek.storage.topic_partition import TopicPartition

__all__ = ["MarkerChannel", "MarkerWriter"]

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_MS = 40_000


class MarkerChannel(Protocol):
    """How the transaction coordinator has a transaction's markers written."""

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[tuple[str, int]],
        still_owner: Callable[[], bool],
    ) -> bool:
        """True once every partition has its marker; False if ``still_owner()`` turned false first."""
        ...

    async def close(self) -> None: ...


class MarkerWriter:
    """:class:`MarkerChannel` over WriteTxnMarkers requests (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        metadata: MetadataView,
        local_address: Callable[[], tuple[str, int] | None],
        security: ClientSecurity = PLAINTEXT_SECURITY,
        endpoint_for: Callable[[int], tuple[str, int] | None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self._local_address = local_address
        self.security = security
        self._endpoint_for = endpoint_for
        self._connections: dict[int, KafkaConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    async def _connection(self, leader: int, address: tuple[str, int]) -> KafkaConnection:
        """The open connection to ``leader`` at ``address``, opened if needed (one at a time per leader)."""
        lock = self._connecting.setdefault(leader, asyncio.Lock())
        async with lock:
            conn = self._connections.get(leader)
            if conn is not None and not conn.closed and (conn.host, conn.port) == address:
                return conn
            if conn is not None:
                await conn.close()
            conn = KafkaConnection(
                address[0],
                address[1],
                client_id=f"broker-{self.broker_id}-txn-markers",
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                security=self.security,
            )
            await conn.connect()
            self._connections[leader] = conn
            return conn

    async def _drop(self, leader: int, conn: KafkaConnection | None) -> None:
        if conn is not None and self._connections.get(leader) is conn:
            del self._connections[leader]
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        """Close every leader connection (coordinator shutdown)."""
        connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            await conn.close()

    def _leader_address(self, leader: int) -> tuple[str, int] | None:
        endpoint_for = self._endpoint_for or self.metadata.broker_address
        address = endpoint_for(leader)
        if address is None and leader == self.broker_id:
            return self._local_address()
        return address

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[tuple[str, int]],
        still_owner: Callable[[], bool],
    ) -> bool:
        remaining = {TopicPartition(t, p) for t, p in partitions}
        while remaining:
            if not still_owner():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                if self.metadata.partition_count(tp.topic) is None:
                    log.info("marker for %s-%d given up: the topic is gone", tp.topic, tp.partition)
                    remaining.discard(tp)
                    continue
                leader = self.metadata.leader_of(tp)
                if leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            results = await asyncio.gather(
                *(
                    self._send(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch)
                    for leader, tps in by_leader.items()
                )
            )
            for done in results:
                remaining -= done
            if remaining:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return True

    async def _send(
        self,
        leader: int,
        tps: list[TopicPartition],
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> set[TopicPartition]:
        """The partitions whose marker ``leader`` wrote (or refused for good)."""
        address = self._leader_address(leader)
        if address is None:
            return set()
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp)
        partitions = tuple(tp for group in by_topic.values() for tp in group)
        conn: KafkaConnection | None = None
        try:
            conn = await self._connection(leader, address)
            version = conn.version_for(
                write_txn_markers.API_KEY, write_txn_markers.MIN_VERSION, write_txn_markers.MAX_VERSION
            )
            entry = TxnMarkerEntry(producer_id, producer_epoch, coordinator_epoch, commit, partitions)
            response = await conn.send(write_txn_markers.encode([entry], version))
        except Exception as exc:
            log.info("markers to broker %d: %s; retrying", leader, exc)
            await self._drop(leader, conn)
            return set()
        done: set[TopicPartition] = set()
        for tp, error in write_txn_markers.decode_response(response)[0]:
            if error == ErrorCode.none:
                done.add(tp)
            elif error in (ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced):
                log.warning("marker for %s-%d refused: %s", tp.topic, tp.partition, error.name)
                done.add(tp)  # a newer epoch or coordinator owns it: nothing to retry
            else:
                log.info("marker for %s-%d: %s; retrying", tp.topic, tp.partition, error.name)
        return done
