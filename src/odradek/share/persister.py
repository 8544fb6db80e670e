"""Persisters: how a share-partition's leader reaches the share coordinator (Kafka's
``DefaultStatePersister``), and an in-memory one for tests.

:class:`DefaultStatePersister` implements :class:`~odradek.share.state.Persister`. Each call is
one share-partition; its coordinator key (``"groupId:topicId:partition"``) is located with the
``locate`` callable it was given:

- :class:`MetadataLocator` (inside a broker): the broker's share coordinator's ``find_coordinator``
  (which creates ``__share_group_state`` on first use) gives the leader of the key's partition,
  the broker's inter-broker endpoints where to reach it;
- :class:`FindCoordinatorLocator` (outside a broker, e.g. tools and tests): FindCoordinator v6
  with key type SHARE (2) sent to a bootstrap broker.

When the coordinator is this broker (``local_broker_id``) the local share coordinator is called
directly; otherwise the request (InitializeShareGroupState 83, ReadShareGroupState 84,
WriteShareGroupState 85 v0-v1, DeleteShareGroupState 86, ReadShareGroupStateSummary 87 v0-v1)
goes over a connection kept per broker (reopened after a failure or an address change, closed by
:meth:`~DefaultStatePersister.close`), at the highest version both sides speak.
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT, a
lost connection or no response are retried, located afresh each time, with a backoff doubling
from ``retry_backoff_ms`` up to ``retry_backoff_max_ms``, until ``max_wait_ms`` have passed;
then, as for any other error, :class:`~odradek.share.state.ShareStateError` is raised with the
last error code.

Results as the Persister protocol states them: a read of a share-partition never initialized
(the coordinator's INVALID_REQUEST "Read state called on uninitialized share partition.") is
None; a summary of one (start offset -1, leader epoch -1, state epoch 0) is None. A read's
``leader_epoch`` is the epoch the coordinator records after it (the request's, or for -1 the
kept one when read locally; ReadShareGroupState does not carry it over the wire, so -1 there).

:class:`InMemoryPersister` applies the same rules (the coordinator's shard, records applied at
once) with no log, no metadata and no network, for unit tests of share-partition leaders.

Event loop only (both persisters hold asyncio state).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from odradek.client.connection import KafkaConnection
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.coordinator.share.records import share_coordinator_key
from odradek.coordinator.share.shard import READ_UNINITIALIZED, ShareCoordinatorShard, ShareRecord, ShareSummary
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.share.state import (
    UNINITIALIZED_START_OFFSET,
    UNINITIALIZED_STATE_EPOCH,
    DeliveryState,
    SharePartitionKey,
    ShareState,
    ShareStateError,
    StateBatch,
)
from odradek.storage.log import wall_clock_ms

__all__ = [
    "RETRIABLE",
    "CoordinatorNode",
    "DefaultStatePersister",
    "FindCoordinatorLocator",
    "InMemoryPersister",
    "LocalShareCoordinator",
    "Locate",
    "MetadataLocator",
]

T = TypeVar("T")

SHARE_KEY_TYPE = 2
"""FindCoordinator's key type SHARE."""
RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.request_timed_out,
    }
)
_MAX_VERSIONS = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0,
    ApiKey.READ_SHARE_GROUP_STATE: 0,
    ApiKey.WRITE_SHARE_GROUP_STATE: 1,
    ApiKey.DELETE_SHARE_GROUP_STATE: 0,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 1,
}
_TOPIC_ENTITY = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: "InitializeStateData",
    ApiKey.READ_SHARE_GROUP_STATE: "ReadStateData",
    ApiKey.WRITE_SHARE_GROUP_STATE: "WriteStateData",
    ApiKey.DELETE_SHARE_GROUP_STATE: "DeleteStateData",
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: "ReadStateSummaryData",
}


@dataclass(frozen=True, slots=True)
class CoordinatorNode:
    """Where a share-partition's coordinator is: its broker id and (host, port)."""

    broker_id: int
    host: str
    port: int


Locate = Callable[[str], Awaitable[CoordinatorNode]]
"""``locate(coordinator_key)``: the key's coordinator; raises ShareStateError when it cannot tell."""


class LocalShareCoordinator(Protocol):
    """What the persister calls on this broker's share coordinator
    (:class:`odradek.coordinator.share.ShareCoordinator`)."""

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None: ...

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareState: ...

    async def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None: ...

    async def delete_state(self, key: SharePartitionKey) -> None: ...

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareSummary | None: ...


# --- locating the coordinator ---------------------------------------------------------------------------


class MetadataLocator:
    """Inside a broker: ``find_coordinator(key) -> (error, broker id)`` (the share coordinator's,
    which creates the topic on first use), ``endpoint_for(broker id)`` its inter-broker (host,
    port), ``local_address()`` this broker's own (for a broker the metadata cache lacks yet)."""

    def __init__(
        self,
        broker_id: int,
        find_coordinator: Callable[[str], Awaitable[tuple[ErrorCode, int]]],
        endpoint_for: Callable[[int], tuple[str, int] | None],
        local_address: Callable[[], tuple[str, int] | None] = lambda: None,
    ) -> None:
        self.broker_id = broker_id
        self._find_coordinator = find_coordinator
        self._endpoint_for = endpoint_for
        self._local_address = local_address

    async def __call__(self, key: str) -> CoordinatorNode:
        error, node = await self._find_coordinator(key)
        if error is not ErrorCode.none:
            raise ShareStateError(error)
        address = self._endpoint_for(node)
        if address is None and node == self.broker_id:
            address = self._local_address() or ("", -1)
        if address is None:
            raise ShareStateError(ErrorCode.coordinator_not_available, f"broker {node} has no known endpoint")
        return CoordinatorNode(node, address[0], address[1])


class FindCoordinatorLocator:
    """Outside a broker: FindCoordinator (key type SHARE) sent to one of the ``bootstrap`` brokers
    ((host, port) pairs), the next one after a failure to reach it."""

    def __init__(
        self,
        bootstrap: Sequence[tuple[str, int]],
        security: ClientSecurity = PLAINTEXT_SECURITY,
        request_timeout_ms: int = 5000,
    ) -> None:
        if not bootstrap:
            raise ValueError("no bootstrap broker")
        self.bootstrap = list(bootstrap)
        self.security = security
        self.request_timeout_ms = request_timeout_ms
        self._next = 0
        self._conn: KafkaConnection | None = None
        self._connecting = asyncio.Lock()

    async def _connection(self) -> KafkaConnection:
        async with self._connecting:
            if self._conn is None or self._conn.closed:
                host, port = self.bootstrap[self._next % len(self.bootstrap)]
                conn = KafkaConnection(host, port, request_timeout_ms=self.request_timeout_ms, security=self.security)
                await conn.connect()
                self._conn = conn
            return self._conn

    async def __call__(self, key: str) -> CoordinatorNode:
        conn: KafkaConnection | None = None
        try:
            conn = await self._connection()
            rb = conn.builder(ApiKey.FIND_COORDINATOR, 6)
            response = await conn.send(rb(key_type=SHARE_KEY_TYPE, coordinator_keys=(key,)))
        except (KafkaError, OSError) as exc:
            if conn is None or conn is self._conn:
                self._next += 1
                await self.close()
            raise ShareStateError(ErrorCode.coordinator_not_available, str(exc)) from None
        found = response.coordinators[0]
        if found.error_code != ErrorCode.none:
            raise ShareStateError(ErrorCode(found.error_code), found.error_message)
        return CoordinatorNode(int(found.node_id), found.host, int(found.port))

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


# --- the default persister -------------------------------------------------------------------------------


def _batches(items: Iterable[Any]) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(int(b.first_offset), int(b.last_offset), DeliveryState(b.delivery_state), int(b.delivery_count))
        for b in items
    )


def _summary_state(summary: ShareSummary | None) -> ShareState | None:
    if summary is None:
        return None
    return ShareState(summary.state_epoch, summary.start_offset, summary.leader_epoch)


class DefaultStatePersister:
    """See the module docstring. The broker's ``share_persister``."""

    def __init__(
        self,
        locate: Locate,
        *,
        local: LocalShareCoordinator | None = None,
        local_broker_id: int = -1,
        security: ClientSecurity = PLAINTEXT_SECURITY,
        client_id: str = "share-persister",
        request_timeout_ms: int = 5000,
        retry_backoff_ms: int = 50,
        retry_backoff_max_ms: int = 1000,
        max_wait_ms: int = 30000,
    ) -> None:
        self._locate = locate
        self.local = local
        self.local_broker_id = local_broker_id
        self.security = security
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.max_wait_ms = max_wait_ms
        self._connections: dict[int, KafkaConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    # --- the Persister protocol -------------------------------------------------------------------

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        await self._call(
            key,
            lambda c: c.initialize_state(key, state_epoch, start_offset),
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            {"state_epoch": state_epoch, "start_offset": start_offset},
            lambda _p: None,
        )

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        def answer(p: Any) -> ShareState:
            return ShareState(int(p.state_epoch), int(p.start_offset), leader_epoch, _batches(p.state_batches))

        try:
            return await self._call(
                key, lambda c: c.read_state(key, leader_epoch), ApiKey.READ_SHARE_GROUP_STATE,
                {"leader_epoch": leader_epoch}, answer,
            )  # fmt: skip
        except ShareStateError as exc:
            if exc.error_code is ErrorCode.invalid_request and exc.message == READ_UNINITIALIZED:
                return None
            raise

    async def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None:
        """The Persister's ``write_state``; ``delivery_complete_count`` (KIP-1226, -1: unknown)
        is sent with WriteShareGroupState v1 and kept by the coordinator."""
        fields = {
            "state_epoch": state_epoch,
            "leader_epoch": leader_epoch,
            "start_offset": start_offset,
            "delivery_complete_count": delivery_complete_count,
        }
        wire_batches = [(b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count) for b in batches]
        await self._call(
            key,
            lambda c: c.write_state(key, state_epoch, leader_epoch, start_offset, batches, delivery_complete_count),
            ApiKey.WRITE_SHARE_GROUP_STATE,
            fields,
            lambda _p: None,
            wire_batches,
        )

    async def delete_state(self, key: SharePartitionKey) -> None:
        await self._call(key, lambda c: c.delete_state(key), ApiKey.DELETE_SHARE_GROUP_STATE, {}, lambda _p: None)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        def answer(p: Any) -> ShareState | None:
            state_epoch, start_offset, epoch = int(p.state_epoch), int(p.start_offset), int(p.leader_epoch)
            if (state_epoch, start_offset, epoch) == (UNINITIALIZED_STATE_EPOCH, UNINITIALIZED_START_OFFSET, -1):
                return None
            return ShareState(state_epoch, start_offset, epoch)

        async def local(c: LocalShareCoordinator) -> ShareState | None:
            return _summary_state(await c.read_summary(key, leader_epoch))

        return await self._call(
            key, local, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, {"leader_epoch": leader_epoch}, answer
        )

    async def close(self) -> None:
        """Close every connection (and the locator's, when it has one)."""
        connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            await conn.close()
        close = getattr(self._locate, "close", None)
        if close is not None:
            await close()

    # --- one call, with retries ---------------------------------------------------------------------

    async def _call(
        self,
        key: SharePartitionKey,
        local: Callable[[LocalShareCoordinator], Awaitable[T]],
        api_key: ApiKey,
        fields: dict[str, Any],
        answer: Callable[[Any], T],
        batches: list[tuple[int, int, int, int]] | None = None,
    ) -> T:
        coordinator_key = share_coordinator_key(key)
        deadline = time.monotonic() + self.max_wait_ms / 1000
        backoff_ms = self.retry_backoff_ms
        while True:
            try:
                node = await self._locate(coordinator_key)
                if node.broker_id == self.local_broker_id and self.local is not None:
                    return await local(self.local)
                response = await self._send(node, key, api_key, fields, batches)
                return answer(response)
            except ShareStateError as exc:
                if exc.error_code not in RETRIABLE or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(min(backoff_ms, max(0.0, deadline - time.monotonic()) * 1000) / 1000)
            backoff_ms = min(backoff_ms * 2, self.retry_backoff_max_ms)

    async def _connection(self, node: CoordinatorNode) -> KafkaConnection:
        lock = self._connecting.setdefault(node.broker_id, asyncio.Lock())
        async with lock:
            conn = self._connections.get(node.broker_id)
            if conn is not None and not conn.closed and (conn.host, conn.port) == (node.host, node.port):
                return conn
            if conn is not None:
                await conn.close()
            conn = KafkaConnection(
                node.host,
                node.port,
                client_id=self.client_id,
                request_timeout_ms=self.request_timeout_ms,
                security=self.security,
            )
            await conn.connect()
            self._connections[node.broker_id] = conn
            return conn

    async def _send(
        self,
        node: CoordinatorNode,
        key: SharePartitionKey,
        api_key: ApiKey,
        fields: dict[str, Any],
        batches: list[tuple[int, int, int, int]] | None,
    ) -> Any:
        """The one partition result of a request about ``key``; ShareStateError for its error."""
        conn: KafkaConnection | None = None
        try:
            conn = await self._connection(node)
            rb = conn.builder(api_key, 0, _MAX_VERSIONS[api_key])
            partition_fields = dict(fields)
            if batches is not None:
                partition_fields["state_batches"] = tuple(
                    rb.make("StateBatch", first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                    for f, la, s, c in batches
                )
            partition = rb.make("PartitionData", partition=key.partition, **partition_fields)
            topic = rb.make(_TOPIC_ENTITY[api_key], topic_id=key.topic_id, partitions=(partition,))
            response = await conn.send(rb(group_id=key.group_id, topics=(topic,)))
        except (KafkaError, OSError) as exc:
            if conn is not None and self._connections.get(node.broker_id) is conn:
                del self._connections[node.broker_id]
            if conn is not None:
                await conn.close()
            raise ShareStateError(ErrorCode.coordinator_not_available, f"broker {node.broker_id}: {exc}") from None
        result = response.results[0].partitions[0]
        if result.error_code != ErrorCode.none:
            raise ShareStateError(ErrorCode(result.error_code), result.error_message)
        return result


# --- in memory ----------------------------------------------------------------------------------------------


class InMemoryPersister:
    """The coordinator's rules over one in-memory shard; every record is applied at once (no
    log, no metadata check). ``records`` lists what a coordinator would have written."""

    def __init__(self, records_per_snapshot: int = 500, time_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.shard = ShareCoordinatorShard(records_per_snapshot, time_ms)
        self.records: list[ShareRecord] = []

    def _apply(self, record: ShareRecord | None) -> None:
        if record is not None:
            self.shard.replay(len(self.records), *record)
            self.records.append(record)

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        self._apply(self.shard.initialize(key, state_epoch, start_offset))

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        try:
            state, record = self.shard.read(key, leader_epoch)
        except ShareStateError as exc:
            if exc.error_code is ErrorCode.invalid_request and exc.message == READ_UNINITIALIZED:
                return None
            raise
        self._apply(record)
        return state

    async def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None:
        self._apply(self.shard.write(key, state_epoch, leader_epoch, start_offset, batches, delivery_complete_count))

    async def delete_state(self, key: SharePartitionKey) -> None:
        self._apply(self.shard.delete(key))

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        return _summary_state(self.shard.read_summary(key))
