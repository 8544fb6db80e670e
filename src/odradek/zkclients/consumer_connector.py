"""The ZooKeeper-coordinated consumer group (seed 004; Kafka 0.8's ``ZookeeperConsumerConnector``).

Znodes (SEEDS §1), all under ``/consumers/<group>``:

- ``ids/<consumer id>`` (ephemeral): ``{"version":1,"subscription":{"t":2},"pattern":"static",
  "timestamp":"..."}``; a wildcard subscription stores ``{"<regex>": streams}`` with pattern
  ``white_list`` or ``black_list``. The id is ``<group>_<host>-<epoch ms>-<uuid8>`` unless given.
- ``owners/<t>/<p>`` (ephemeral): ``<consumer id>-<thread index>``, the consumer thread that owns
  the partition;
- ``offsets/<t>/<p>`` (persistent): the next offset to consume, decimal text.

**Rebalance** (``ZKRebalancerListener.syncedRebalance``), run on start, on every change of
``ids`` (a consumer joins or leaves), of ``/brokers/ids``, of a subscribed topic's znode (new
partitions), of ``/brokers/topics`` for wildcard subscriptions, and after a session expiry (the
registration is written again first). Fetching stops while it runs. Each attempt:

1. read the consumers' subscriptions and the topics' partitions;
2. compute the assignment (``partition.assignment.strategy``: ``range`` or ``roundrobin``, see
   :mod:`.assignors`) and keep this consumer's threads' share; when it is what this consumer
   already owns (and its owner znodes are still there) nothing else happens;
3. commit the owned partitions' positions (``auto.commit.enable``) and release them (delete their
   owner znodes), so others can claim them;
4. claim each partition by creating its owner znode; if one still exists (its previous owner has
   not released it yet) every claim of this attempt is undone and the attempt fails;
5. start fetching each claimed partition at its committed offset, or per ``auto.offset.reset``
   (``smallest``/``earliest`` or ``largest``/``latest``) when there is none.

A failed attempt is retried after ``rebalance.backoff.ms``, ``rebalance.max.retries`` times; then
:class:`ConsumerRebalanceFailedError` is raised by the next :meth:`poll`. A consumer that closes
commits, deletes its owner znodes and its registration at once, so the others rebalance without
waiting for its session to expire; a killed one's znodes go when its session expires
(``zookeeper.session.timeout.ms``).

**Offsets** (``offsets.storage``): ``zookeeper`` writes ``offsets/<t>/<p>``; ``kafka`` commits
with OffsetCommit v1 (generation -1) to the group's coordinator and reads with OffsetFetch v1;
with ``dual.commit.enabled`` a ``kafka`` consumer writes ZooKeeper too and, reading, takes the
larger of the two (Kafka 0.8.2's migration path). ``auto.commit.enable`` commits every
``auto.commit.interval.ms``; :meth:`commit_offsets` on demand.

Belongs to one event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.client.cluster import TopicPartition
from odradek.client.consumer import Consumer, ConsumerRecord
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity, is_security_key
from odradek.metadata.errors import CoordinationError, NodeExistsError, NoNodeError
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.store import SessionState, WatchHandle
from odradek.metadata.znodes import ConsumerIdZNode, ConsumerOwnerZNode
from odradek.security.zookeeper_tls import ZK_TLS_CONFIGS, zk_tls_config
from odradek.zkclients.assignors import STRATEGIES, thread_ids
from odradek.zkclients.broker_partition_info import ZkBrokerPartitionInfo
from odradek.zkclients.group_znodes import consumer_ids, delete_owner, owner
from odradek.zkclients.kafka_offsets import KafkaOffsetStorage

__all__ = ["ConsumerConfig", "ConsumerRebalanceFailedError", "ZookeeperConsumerConnector"]

log = logging.getLogger(__name__)

RESETS = {"smallest": "earliest", "earliest": "earliest", "largest": "latest", "latest": "latest"}


class ConsumerRebalanceFailedError(Exception):
    """No rebalance attempt of ``rebalance.max.retries`` succeeded."""


@dataclass
class ConsumerConfig:
    """The old consumer's keys, with Kafka 0.8.2's defaults."""

    group_id: str
    zookeeper_connect: str
    consumer_id: str | None = None
    zookeeper_session_timeout_ms: int = 6000
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = 60000
    auto_offset_reset: str = "largest"
    rebalance_max_retries: int = 4
    rebalance_backoff_ms: int = 2000
    partition_assignment_strategy: str = "range"
    offsets_storage: str = "zookeeper"
    dual_commit_enabled: bool = True
    fetch_wait_max_ms: int = 100
    security: ClientSecurity = PLAINTEXT_SECURITY
    """How the fetch (and Kafka offset storage) connections reach the brokers: the client keys
    ``security.protocol``, ``ssl.*`` and ``sasl.*`` as :mod:`odradek.client.security` reads them;
    built by :meth:`from_properties`, closed by whoever built the config (an OAUTHBEARER login)."""
    zookeeper_tls: ssl.SSLContext | None = None
    """TLS to ZooKeeper: built from the broker's ``zookeeper.ssl.*`` and ``zookeeper.clientCnxnSocket``
    keys when the properties hold them (:mod:`odradek.security.zookeeper_tls`)."""

    @classmethod
    def from_properties(cls, group_id: str, zookeeper_connect: str, props: Mapping[str, str]) -> ConsumerConfig:
        """Kafka's property names (``auto.commit.enable`` ...) and the client security keys;
        unknown keys raise ValueError, a bad security key InvalidConfigError."""
        config = cls(group_id, zookeeper_connect)
        config.security = ClientSecurity.from_properties({k: v for k, v in props.items() if is_security_key(k)})
        zk_tls = {k: v for k, v in props.items() if k in ZK_TLS_CONFIGS}
        if zk_tls:
            config.zookeeper_tls = zk_tls_config(zk_tls).ssl_context()
        for key, value in props.items():
            if is_security_key(key) or key in zk_tls:
                continue
            name = key.replace(".", "_")
            if name in ("group_id", "zookeeper_connect", "consumer_id"):
                setattr(config, name, value)
                continue
            current: object = getattr(config, name, None)
            if isinstance(current, bool):
                setattr(config, name, value.strip().lower() == "true")
            elif isinstance(current, int):
                setattr(config, name, int(value))
            elif isinstance(current, str):
                setattr(config, name, value.strip())
            else:
                raise ValueError(f"unknown consumer property {key!r}")
        if config.auto_offset_reset not in RESETS:
            raise ValueError(f"auto.offset.reset must be smallest or largest, not {config.auto_offset_reset!r}")
        if config.partition_assignment_strategy not in STRATEGIES:
            raise ValueError("partition.assignment.strategy must be range or roundrobin")
        if config.offsets_storage not in ("zookeeper", "kafka"):
            raise ValueError("offsets.storage must be zookeeper or kafka")
        return config


class ZookeeperConsumerConnector:
    """One consumer of a ZooKeeper group; ``topic_count`` {topic: streams}, or ``whitelist`` /
    ``blacklist`` (a regex over topic names) with ``streams`` threads."""

    def __init__(
        self,
        config: ConsumerConfig,
        topic_count: Mapping[str, int] | None = None,
        *,
        whitelist: str | None = None,
        blacklist: str | None = None,
        streams: int = 1,
    ) -> None:
        if (topic_count is None) == (whitelist is None and blacklist is None):
            raise ValueError("subscribe to topics (topic_count) or to a whitelist / blacklist, not both")
        self.config = config
        self.group = config.group_id
        self.consumer_id = config.consumer_id or ConsumerIdZNode.new_consumer_id(self.group, socket.gethostname())
        self.topic_count = dict(topic_count or {})
        self.pattern = "static" if topic_count is not None else ("white_list" if whitelist else "black_list")
        self.regex = whitelist or blacklist or ""
        self.streams = streams
        self.info = ZkBrokerPartitionInfo(
            config.zookeeper_connect,
            zookeeper_session_timeout_ms=config.zookeeper_session_timeout_ms,
            security=config.security,
            zookeeper_tls=config.zookeeper_tls,
        )
        self.consumer = Consumer(
            "",
            cluster=self.info,
            auto_offset_reset=RESETS[config.auto_offset_reset],
            max_wait_ms=config.fetch_wait_max_ms,
        )
        self.kafka_offsets = KafkaOffsetStorage(self.info, self.group) if config.offsets_storage == "kafka" else None
        self.owned: dict[TopicPartition, str] = {}
        """The partitions this consumer owns -> the owning thread id."""
        self.committed: dict[TopicPartition, int] = {}
        self.rebalances = 0
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._error: Exception | None = None
        self._watches: list[WatchHandle] = []
        self._topic_watches: dict[str, WatchHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> ZookeeperConsumerConnector:
        zk = await self.info.start()
        store = zk.store
        await self._register(zk)
        self._watches += [
            store.watch_children(f"/consumers/{self.group}/ids", self._changed),
            store.watch_children("/brokers/ids", self._changed),
            store.watch_session(self._session),
        ]
        if self.pattern != "static":
            self._watches.append(store.watch_children("/brokers/topics", self._changed))
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._rebalancer(), name=f"rebalance-{self.consumer_id}"))
        if self.config.auto_commit_enable:
            self._tasks.append(loop.create_task(self._auto_commit(), name=f"auto-commit-{self.consumer_id}"))
        await self.rebalance()
        return self

    async def __aenter__(self) -> ZookeeperConsumerConnector:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit (if auto commit is on), release the partitions and deregister, at once."""
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        for handle in [*self._watches, *self._topic_watches.values()]:
            handle.cancel()
        try:
            async with self._lock:
                if self.config.auto_commit_enable:
                    await self._commit_owned()
                await self._release()
                zk = await self.info.start()
                try:
                    await zk.store.delete(ConsumerIdZNode.path(self.group, self.consumer_id))
                except NoNodeError:
                    pass
        except CoordinationError as exc:
            log.warning("consumer %s: leaving the group cleanly failed: %s", self.consumer_id, exc)
        await self.consumer.close()
        await self.info.close()

    async def _register(self, zk: KafkaZkClient) -> None:
        subscription = self.topic_count if self.pattern == "static" else {self.regex: self.streams}
        data = ConsumerIdZNode.encode(subscription, self.pattern)
        path = ConsumerIdZNode.path(self.group, self.consumer_id)
        try:
            await zk.store.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:  # our own registration from before a reconnect
            await zk.store.set(path, data)
        log.info("consumer %s registered in group %s: %s", self.consumer_id, self.group, subscription)

    async def _changed(self, _path: str) -> None:
        self._wake.set()

    async def _session(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED and not self._closed:
            log.warning("consumer %s: ZooKeeper session expired; registering again", self.consumer_id)
            self.owned.clear()  # the owner znodes went with the session
            await self._register(await self.info.start())
            self._wake.set()

    # --- consuming ---------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 500) -> list[ConsumerRecord]:
        """Records of the owned partitions (none while a rebalance runs)."""
        if self._error is not None:
            raise self._error
        async with self._lock:
            if self.owned:
                return await self.consumer.poll(timeout_ms)
        await asyncio.sleep(timeout_ms / 1000)
        return []

    async def commit_offsets(self) -> None:
        """Commit the position of every owned partition (see the module docstring)."""
        async with self._lock:
            await self._commit_owned()

    async def _commit_owned(self) -> None:
        offsets = {tp: self.consumer.position(tp) for tp in self.owned if tp in self.consumer.positions}
        changed = {tp: o for tp, o in offsets.items() if self.committed.get(tp) != o}
        if not changed:
            return
        if self.kafka_offsets is None or self.config.dual_commit_enabled:
            zk = await self.info.start()
            for tp, offset in changed.items():
                await zk.set_consumer_offset(self.group, tp, offset)
        if self.kafka_offsets is not None:
            await self.kafka_offsets.commit(changed)
        self.committed.update(changed)

    async def _fetch_committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        if self.kafka_offsets is None or self.config.dual_commit_enabled:
            zk = await self.info.start()
            for tp in partitions:
                offset = await zk.get_consumer_offset(self.group, tp)
                if offset is not None:
                    out[tp] = offset
        if self.kafka_offsets is not None:
            for tp, offset in (await self.kafka_offsets.fetch(partitions)).items():
                out[tp] = max(offset, out.get(tp, -1))
        return out

    async def _auto_commit(self) -> None:
        while True:
            await asyncio.sleep(self.config.auto_commit_interval_ms / 1000)
            try:
                await self.commit_offsets()
            except Exception as exc:
                log.warning("consumer %s: auto commit failed: %s", self.consumer_id, exc)

    # --- rebalance ---------------------------------------------------------------------------

    async def _rebalancer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.rebalance()
            except ConsumerRebalanceFailedError as exc:
                self._error = exc
                log.error("consumer %s: %s", self.consumer_id, exc)

    async def rebalance(self) -> None:
        """``syncedRebalance``: attempts until one succeeds (see the module docstring)."""
        for attempt in range(self.config.rebalance_max_retries):
            async with self._lock:
                try:
                    if await self._rebalance_once():
                        self.rebalances += 1
                        return
                except CoordinationError as exc:
                    log.warning("consumer %s: rebalance attempt %d failed: %s", self.consumer_id, attempt + 1, exc)
            await asyncio.sleep(self.config.rebalance_backoff_ms / 1000)
        raise ConsumerRebalanceFailedError(
            f"{self.consumer_id} can't rebalance after {self.config.rebalance_max_retries} retries"
        )

    async def _subscriptions(self, zk: KafkaZkClient, topics: list[str]) -> dict[str, dict[str, int]]:
        """consumer id -> {topic: threads} for every registered consumer of the group."""
        out: dict[str, dict[str, int]] = {}
        for cid in await consumer_ids(zk, self.group):
            try:
                data, _ = await zk.store.get(ConsumerIdZNode.path(self.group, cid))
            except NoNodeError:
                continue
            raw = json.loads(data)
            pattern, sub = raw.get("pattern", "static"), {str(k): int(v) for k, v in raw["subscription"].items()}
            if pattern == "static":
                out[cid] = sub
                continue
            regex, threads = next(iter(sub.items()))
            matches = re.compile(regex).fullmatch
            wanted = [t for t in topics if not t.startswith("__") and bool(matches(t)) == (pattern == "white_list")]
            out[cid] = dict.fromkeys(wanted, threads)
        return out

    async def _rebalance_once(self) -> bool:
        zk = await self.info.start()
        if not await zk.get_all_broker_ids():
            log.info("consumer %s: no broker is registered; waiting for one", self.consumer_id)
            await self._release()
            return True
        all_topics = await zk.get_all_topics()
        subscriptions = await self._subscriptions(zk, all_topics)
        subscriptions.setdefault(self.consumer_id, {})
        mine = subscriptions[self.consumer_id]
        partitions: dict[str, list[int]] = {}
        for topic in sorted({t for sub in subscriptions.values() for t in sub}):
            replicas, _ = await zk.get_topic_assignment(topic)
            partitions[topic] = sorted(replicas) if replicas else []
        for topic in mine:
            if topic not in self._topic_watches:
                self._topic_watches[topic] = zk.store.watch_data(f"/brokers/topics/{topic}", self._changed)
        assignment = STRATEGIES[self.config.partition_assignment_strategy](subscriptions, partitions)
        wanted = {
            TopicPartition(t, p): tid
            for tid in thread_ids(self.consumer_id, max(mine.values(), default=0))
            for t, p in assignment.get(tid, [])
        }
        if wanted == self.owned and await self._still_own(zk):
            return True  # nothing changed for this consumer: keep fetching
        if self.config.auto_commit_enable:
            await self._commit_owned()
        await self._release()
        claimed: list[TopicPartition] = []
        for tp, tid in sorted(wanted.items()):
            try:
                path = ConsumerOwnerZNode.path(self.group, tp.topic, tp.partition)
                await zk.store.create(path, tid.encode(), ephemeral=True, makepath=True)
                claimed.append(tp)
            except NodeExistsError:
                log.info("consumer %s: %s-%d is still owned by another consumer", self.consumer_id, *tp)
                for done in claimed:
                    await delete_owner(zk, self.group, done)
                return False
        committed = await self._fetch_committed(claimed)
        for tp in claimed:
            if tp in committed:
                await self.consumer.seek(tp, committed[tp])
        await self.consumer.assign(claimed)
        self.owned = dict(wanted)
        self.committed = {tp: o for tp, o in committed.items() if tp in wanted}
        log.info(
            "consumer %s owns %s", self.consumer_id, ", ".join(f"{t}-{p}" for t, p in sorted(self.owned)) or "nothing"
        )
        return True

    async def _still_own(self, zk: KafkaZkClient) -> bool:
        """Every owned partition's owner znode still names this consumer's thread."""
        for tp, tid in self.owned.items():
            if await owner(zk, self.group, tp) != tid:
                return False
        return True

    async def _release(self) -> None:
        """Stop fetching and delete the owner znodes of the owned partitions."""
        zk = await self.info.start()
        for tp in sorted(self.owned):
            await delete_owner(zk, self.group, tp)
        self.owned = {}
        await self.consumer.assign([])
