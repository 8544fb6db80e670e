"""Brokers and partitions read from ZooKeeper (seed 004's ``ZKBrokerPartitionInfo``).

A :class:`odradek.client.cluster.Cluster` whose metadata comes from ZooKeeper instead of Metadata
requests, so a client needs only ``zookeeper.connect``:

- brokers from ``/brokers/ids/<id>``: the endpoint of a listener whose security protocol
  (``listener_security_protocol_map``) is the client's ``security.protocol`` (the listener named
  like the protocol first), else the ``PLAINTEXT`` endpoint, else the first one
  (:func:`client_endpoint`);
- a topic's partitions and replicas from ``/brokers/topics/<t>``, leader, leader epoch and ISR
  from ``/brokers/topics/<t>/partitions/<p>/state``;
- watches on ``/brokers/ids`` and ``/brokers/topics`` (children) and on each known topic's znode
  (data) read the map again at once (the known topics; a new partition count is seen without a
  send failing first), as does a session expiry (the store re-arms its watches on the new
  session); :meth:`refresh` also reads it on every produce retry and unknown leader, so sends
  follow leader changes (partition state znodes are not watched, as in seed 004).
- a request to "any broker" (FindCoordinator for ``offsets.storage=kafka``) reads the brokers
  first when none is known yet;
- an unknown topic with ``allow_auto_create`` is created as a broker would: one Metadata request
  (with auto-creation) to any broker read from ZooKeeper, then ZooKeeper is read again.

Connections and request routing are the base class's. Belongs to one event loop.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterable
from typing import Any

from odradek.client.cluster import BrokerNode, Cluster, PartitionInfo, TopicDescription
from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.store import SessionState, WatchHandle
from odradek.metadata.znodes import BrokerInfo
from odradek.metadata.zookeeper import ZooKeeperStore

__all__ = ["ZkBrokerPartitionInfo", "client_endpoint"]

log = logging.getLogger(__name__)


def client_endpoint(info: BrokerInfo, security_protocol: str) -> tuple[str, int]:
    """Where a client speaking ``security_protocol`` reaches a registered broker (module docstring)."""
    endpoints = info.endpoint_map()
    protocols = {name: info.listener_security_protocol_map.get(name, name).upper() for name in endpoints}
    matching = [name for name, protocol in protocols.items() if protocol == security_protocol]
    if matching:
        return endpoints[security_protocol if security_protocol in matching else matching[0]]
    return endpoints.get("PLAINTEXT") or next(iter(endpoints.values()))


class ZkBrokerPartitionInfo(Cluster):
    """Cluster metadata from ``zookeeper_connect`` (``host:port[,host:port][/chroot]``);
    ``zookeeper_tls`` (a context from ``zookeeper.ssl.*`` keys) makes the ZooKeeper session TLS."""

    def __init__(
        self,
        zookeeper_connect: str,
        *,
        zookeeper_session_timeout_ms: int = 6000,
        zookeeper_tls: ssl.SSLContext | None = None,
        **cluster: Any,
    ) -> None:
        super().__init__("unused:1", **cluster)  # brokers come from ZooKeeper: no bootstrap servers
        self.bootstrap = []
        self.zookeeper_connect = zookeeper_connect
        self.session_timeout_ms = zookeeper_session_timeout_ms
        self.zookeeper_tls = zookeeper_tls
        self.store: ZooKeeperStore | None = None
        self.zk: KafkaZkClient | None = None
        self.reads = 0
        """How many times the map was read from ZooKeeper (tests and logs)."""
        self._watches: list[WatchHandle] = []
        self._topic_watches: dict[str, WatchHandle] = {}

    async def start(self) -> KafkaZkClient:
        """Connect to ZooKeeper (once) and set the watches."""
        if self.zk is not None:
            return self.zk
        store = ZooKeeperStore(
            self.zookeeper_connect, session_timeout_ms=self.session_timeout_ms, tls=self.zookeeper_tls
        )
        await store.start()
        self.store, self.zk = store, KafkaZkClient(store)
        self._watches += [
            store.watch_children("/brokers/ids", self._changed),
            store.watch_children("/brokers/topics", self._changed),
            store.watch_session(self._session),
        ]
        return self.zk

    async def _changed(self, _path: str) -> None:
        await self._reload()

    async def _session(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED:
            log.warning("ZooKeeper session expired; reading the broker and partition map again")
            await self._reload()

    async def _reload(self) -> None:
        if self.zk is None:
            return
        try:
            await self.refresh(list(self.topics))
        except Exception as exc:  # a watch callback must not die; the next send refreshes again
            log.warning("reading the broker and partition map from ZooKeeper failed: %s", exc)

    async def read_brokers(self) -> dict[int, BrokerNode]:
        zk = await self.start()
        out = {}
        for info in await zk.get_all_brokers():
            host, port = client_endpoint(info, self.security.security_protocol)
            out[info.id] = BrokerNode(info.id, host, port, info.rack)
        return out

    async def any_connection(self) -> KafkaConnection:
        """A connection to any broker registered in ZooKeeper (read first when none is known yet:
        a group request may be this client's first)."""
        if not self.brokers:
            self.brokers = await self.read_brokers()
        return await super().any_connection()

    async def read_topic(self, topic: str) -> TopicDescription | None:
        """``topic`` as ZooKeeper has it, or None when it does not exist (its data watch set)."""
        zk = await self.start()
        assignment, topic_id = await zk.get_topic_assignment(topic)
        if assignment is None:
            return None
        if topic not in self._topic_watches and self.store is not None:
            self._topic_watches[topic] = self.store.watch_data(f"/brokers/topics/{topic}", self._changed)
        states = await zk.get_partition_states(topic)
        partitions = {}
        for p, replicas in sorted(assignment.items()):
            state = states.get(p)
            led = state is not None and state.leader >= 0
            partitions[p] = PartitionInfo(
                partition=p,
                leader=state.leader if state is not None else -1,
                leader_epoch=state.leader_epoch if state is not None else -1,
                replicas=list(replicas),
                isr=list(state.isr) if state is not None else [],
                error_code=ErrorCode.none if led else ErrorCode.leader_not_available,
            )
        return TopicDescription(name=topic, topic_id=topic_id, partitions=partitions)

    async def refresh(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> dict[str, TopicDescription]:
        """Read brokers and ``topics`` (None: every topic) from ZooKeeper; see the module docstring."""
        zk = await self.start()
        self.reads += 1
        self.brokers = await self.read_brokers()
        names = await zk.get_all_topics() if topics is None else list(topics)
        answered: dict[str, TopicDescription] = {}
        for name in names:
            desc = await self.read_topic(name)
            if desc is None and allow_auto_create and self.brokers:
                await super().refresh([name], allow_auto_create=True)  # a broker creates it
                self.brokers = await self.read_brokers()
                desc = await self.read_topic(name)
            if desc is None:
                answered[name] = TopicDescription(name=name, error_code=ErrorCode.unknown_topic_or_partition)
                self.topics.pop(name, None)
                continue
            answered[name] = self.topics[name] = desc
        if topics is None:
            self.topics = {n: d for n, d in self.topics.items() if n in answered}
        return answered

    async def close(self) -> None:
        for handle in [*self._watches, *self._topic_watches.values()]:
            handle.cancel()
        self._watches.clear()
        self._topic_watches.clear()
        await super().close()
        if self.store is not None:
            await self.store.close()
        self.store = self.zk = None
