"""What a client knows about a cluster: brokers, controller, topics and their leaders, plus a
pool of connections, one per broker address.

:class:`Cluster` starts from ``bootstrap_servers`` (``"host:port,host:port"``; IPv6 as
``[::1]:9092``), learns the rest with Metadata requests, and routes requests:

- :meth:`Cluster.any_connection`: the first bootstrap server (or known broker) that answers;
- :meth:`Cluster.connection` to one broker id; :meth:`Cluster.controller_connection`;
- :meth:`Cluster.route`: a per-partition request split by partition leader, sent to the leaders
  concurrently, and retried (after a metadata refresh and ``retry_backoff_ms``) for partitions
  that answered a retriable error (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, a lost
  connection...), at most ``retries`` times. A partition of a topic the metadata does not have is
  answered UNKNOWN_TOPIC_OR_PARTITION at once, without retries.

Every connection speaks ``security`` (:class:`~odradek.client.security.ClientSecurity`: TLS and
SASL from Kafka's client keys; PLAINTEXT by default). A refused login
(:class:`~odradek.client.errors.KafkaAuthenticationError`) is raised at once, never tried on the
next broker nor turned into a partition's error code: every broker would refuse the same
credentials.

Used by the admin client, the producer and the consumer. Belongs to one event loop; call it only
from that loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.client.connection import KafkaConnection
from odradek.client.errors import KafkaAuthenticationError, KafkaConnectionError, KafkaTimeoutError
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "BrokerNode",
    "Cluster",
    "PartitionInfo",
    "TopicDescription",
    "TopicPartition",
    "parse_bootstrap_servers",
]

ZERO_UUID = uuid.UUID(int=0)

V = TypeVar("V")
R = TypeVar("R")

RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
        ErrorCode.not_controller,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_enough_replicas,
        ErrorCode.kafka_storage_error,
    }
)


def parse_bootstrap_servers(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` (or a list of ``host:port``) -> [(host, port)]; ValueError if malformed."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"invalid bootstrap server {item!r}: expected host:port")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


@dataclass(frozen=True, slots=True)
class BrokerNode:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    error_code: ErrorCode = ErrorCode.none


@dataclass(slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID = ZERO_UUID
    is_internal: bool = False
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error_code: ErrorCode = ErrorCode.none


class Cluster:
    """Metadata and connections for one cluster. ``await cluster.close()`` when done."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "odradek",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        retries: int = 5,
        retry_backoff_ms: int = 100,
        security: ClientSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        self.bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self.security = security
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.brokers: dict[int, BrokerNode] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self.topics: dict[str, TopicDescription] = {}
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self._connecting: dict[tuple[str, int], asyncio.Future[KafkaConnection]] = {}

    # --- connections -------------------------------------------------------------------------

    async def _connect(self, address: tuple[str, int]) -> KafkaConnection:
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        waiting = self._connecting.get(address)
        if waiting is not None:
            return await asyncio.shield(waiting)
        future: asyncio.Future[KafkaConnection] = asyncio.get_running_loop().create_future()
        self._connecting[address] = future
        try:
            conn = await KafkaConnection(
                address[0],
                address[1],
                client_id=self.client_id,
                request_timeout_ms=self.request_timeout_ms,
                connect_timeout_ms=self.connect_timeout_ms,
                security=self.security,
            ).connect()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waits
            raise
        finally:
            self._connecting.pop(address, None)
        self._connections[address] = conn
        future.set_result(conn)
        return conn

    async def any_connection(self) -> KafkaConnection:
        """A connection to any broker: known brokers first, then the bootstrap servers.

        Raises KafkaConnectionError naming every address tried.
        """
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        addresses = [(b.host, b.port) for b in self.brokers.values()] + self.bootstrap
        failures = []
        for address in dict.fromkeys(addresses):
            try:
                return await self._connect(address)
            except KafkaAuthenticationError:
                raise
            except KafkaConnectionError as exc:
                failures.append(str(exc))
        raise KafkaConnectionError("; ".join(failures) or "no broker to connect to")

    async def connection(self, broker_id: int) -> KafkaConnection:
        """A connection to broker ``broker_id`` (metadata refreshed if it is not known)."""
        if broker_id not in self.brokers:
            await self.refresh(topics=[])
        node = self.brokers.get(broker_id)
        if node is None:
            raise KafkaConnectionError(f"broker {broker_id} is not in the cluster metadata")
        return await self._connect((node.host, node.port))

    async def controller_connection(self) -> KafkaConnection:
        """A connection to the controller, or to any broker while none is known."""
        if self.controller_id < 0:
            await self.refresh(topics=[])
        if self.controller_id >= 0:
            try:
                return await self.connection(self.controller_id)
            except KafkaAuthenticationError:
                raise
            except KafkaConnectionError:
                pass
        return await self.any_connection()

    async def close(self) -> None:
        conns, self._connections = list(self._connections.values()), {}
        for conn in conns:
            await conn.close()

    # --- metadata ----------------------------------------------------------------------------

    async def refresh(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> dict[str, TopicDescription]:
        """Fetch metadata for ``topics`` (None: all topics; empty: brokers only).

        Updates ``brokers``, ``controller_id``, ``cluster_id`` and ``topics`` (a topic answered
        UNKNOWN_TOPIC_OR_PARTITION is removed) and returns the descriptions answered.
        """
        conn = await self.any_connection()
        rb = conn.builder(ApiKey.METADATA, 1, 12)
        names = None if topics is None else list(topics)
        request_topics = (
            None if names is None else tuple(rb.make("MetadataRequestTopic", topic_id=ZERO_UUID, name=n) for n in names)
        )
        response = await conn.send(
            rb(
                topics=request_topics,
                allow_auto_topic_creation=allow_auto_create,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
        )
        self.brokers = {
            int(b.node_id): BrokerNode(int(b.node_id), b.host, int(b.port), b.rack) for b in response.brokers
        }
        self.controller_id = int(getattr(response, "controller_id", -1))
        self.cluster_id = getattr(response, "cluster_id", None)
        answered: dict[str, TopicDescription] = {}
        if names is None:
            self.topics.clear()
        for t in response.topics:
            if t.name is None:
                continue
            desc = TopicDescription(
                name=t.name,
                topic_id=getattr(t, "topic_id", None) or ZERO_UUID,
                is_internal=bool(getattr(t, "is_internal", False)),
                error_code=ErrorCode(t.error_code),
                partitions={
                    int(p.partition_index): PartitionInfo(
                        partition=int(p.partition_index),
                        leader=int(p.leader_id),
                        leader_epoch=int(getattr(p, "leader_epoch", -1)),
                        replicas=[int(r) for r in p.replica_nodes],
                        isr=[int(r) for r in p.isr_nodes],
                        offline_replicas=[int(r) for r in getattr(p, "offline_replicas", ())],
                        error_code=ErrorCode(p.error_code),
                    )
                    for p in t.partitions
                },
            )
            answered[t.name] = desc
            if desc.error_code == ErrorCode.unknown_topic_or_partition:
                self.topics.pop(t.name, None)
            else:
                self.topics[t.name] = desc
        return answered

    def leader_of(self, tp: TopicPartition) -> int:
        """The known leader of ``tp`` or -1."""
        topic = self.topics.get(tp.topic)
        info = topic.partitions.get(tp.partition) if topic else None
        return info.leader if info is not None else -1

    # --- routing -----------------------------------------------------------------------------

    async def route(
        self,
        items: Mapping[TopicPartition, V],
        call: Callable[[KafkaConnection, dict[TopicPartition, V]], Awaitable[Mapping[TopicPartition, tuple[int, R]]]],
    ) -> dict[TopicPartition, tuple[int, R | None]]:
        """Send ``items`` to their leaders with ``call(conn, group)``; (error code, result) per partition.

        ``call`` answers each partition of its group with (error code, value). Partitions
        answered with a retriable code, or whose leader could not be reached, are retried after a
        metadata refresh; the last answer is kept when retries run out.
        """
        remaining = dict(items)
        results: dict[TopicPartition, tuple[int, R | None]] = {}
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            unknown = {tp.topic for tp in remaining if self.leader_of(tp) < 0}
            if attempt > 0 or unknown:
                await self.refresh({tp.topic for tp in remaining})
            groups: dict[int, dict[TopicPartition, V]] = {}
            retry: dict[TopicPartition, V] = {}
            for tp, value in remaining.items():
                leader = self.leader_of(tp)
                if leader >= 0:
                    groups.setdefault(leader, {})[tp] = value
                    continue
                topic = self.topics.get(tp.topic)
                if topic is None or (topic.partitions and tp.partition not in topic.partitions):
                    results[tp] = (ErrorCode.unknown_topic_or_partition, None)
                else:
                    results[tp] = (ErrorCode.leader_not_available, None)
                    retry[tp] = value
            answers = await asyncio.gather(
                *(self._call_leader(leader, group, call) for leader, group in groups.items())
            )
            for group_answer, group in zip(answers, groups.values()):
                for tp, value in group.items():
                    code, result = group_answer.get(tp, (ErrorCode.unknown_server_error, None))
                    results[tp] = (code, result)
                    if code in RETRIABLE:
                        retry[tp] = value
            remaining = {} if last else retry
            if not remaining:
                break
            await asyncio.sleep(self.retry_backoff_ms / 1000)
        return results

    async def _call_leader(
        self,
        leader: int,
        group: dict[TopicPartition, V],
        call: Callable[[KafkaConnection, dict[TopicPartition, V]], Awaitable[Mapping[TopicPartition, tuple[int, R]]]],
    ) -> Mapping[TopicPartition, tuple[int, R | None]]:
        try:
            conn = await self.connection(leader)
            return await call(conn, group)
        except KafkaAuthenticationError:
            raise
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            return {tp: (exc.error_code, None) for tp in group}
        except KafkaError as exc:
            return {tp: (exc.error_code, None) for tp in group}


def group_by_topic(partitions: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[tuple[int, Any]]]:
    """[(tp, value)] -> {topic: [(partition, value)]} in first-seen order (request layout helper)."""
    out: dict[str, list[tuple[int, Any]]] = {}
    for tp, value in partitions:
        out.setdefault(tp.topic, []).append((tp.partition, value))
    return out
