"""The campaign's cluster: one ZooKeeper and N broker processes whose every connection crosses the
:class:`~chaos.proxy.FaultProxy`.

Addressing (all on this machine's loopback, 127/8):

- broker ``i`` is node ``b<i>`` with its own address ``127.0.0.<10+i>``. It listens on
  ``127.0.0.1:<real port>`` and advertises ``127.0.0.<10+i>:<proxy port>`` where the proxy listens,
  so every client and every other broker reaches it through the proxy. Its own outgoing
  connections (fetchers, controller channels, transaction markers) bind ``127.0.0.<10+i>``
  (``odradek.broker.source.address``), which tells the proxy who is calling.
- ZooKeeper is node ``zk``; broker ``i``'s ``zookeeper.connect`` is its own proxy port
  ``127.0.0.<10+i>:<zk port i>`` (kazoo cannot bind a source address), so ``b<i> -> zk`` is a
  link of its own.
- the ZooKeeper consumer group reaches ZooKeeper through ``127.0.0.10:<port>`` (link ``client -> zk``);
- clients connect from ``127.0.0.1`` (librdkafka cannot bind a source address): they are the node
  ``client``; cutting ``client`` from ``b<i>`` cuts every workload client of the ``PLAINTEXT``
  listener from that broker.
- one client (:data:`SOLO_CLIENT`, the second idempotent producer) bootstraps from every broker's
  second listener, ``SOLO``, advertised at a proxy port of its own: Kafka answers Metadata with the
  endpoints of the listener it was asked on, so all that client's connections cross those ports and
  the proxy names their source ``solo``; ``solo`` can be cut from one broker while ``client`` is not.

The campaign itself reads ZooKeeper directly (not through the proxy). Drive it from one thread.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from chaos.proxy import FaultProxy, Route
from odradek.cli.cluster import ClusterBroker, wait_port_free
from odradek.free_ports import free_port

__all__ = ["SOLO_CLIENT", "ChaosCluster", "faketime_available", "faketime_env", "node_address"]

CHAOS_BROKER_DEFAULTS = {
    "zookeeper.session.timeout.ms": "6000",
    "zookeeper.connection.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "controller.socket.timeout.ms": "5000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.fetch.backoff.ms": "200",
    "replica.socket.timeout.ms": "5000",
    "request.timeout.ms": "5000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "5",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.record.lock.duration.ms": "15000",
    "group.share.delivery.count.limit": "5",
    "share.coordinator.state.topic.num.partitions": "5",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
}
"""Broker settings of a campaign: the session and lag timeouts the figures are measured against.
Consumer-protocol and share group members get the classic members' 10 s session and 1 s heartbeat
(Kafka's defaults are 45 s and 5 s, which would hide a member's loss behind a whole fault); a share
group's records stay locked 15 s (``group.share.min.record.lock.duration.ms``, the shortest
Kafka's defaults allow) and are delivered at most 5 times (Kafka's default); the share-partitions'
state topic ``__share_group_state`` is replicated like the other internal topics."""


SOLO_CLIENT = "solo"
"""The node of the one client that reaches the brokers through a listener of its own (``SOLO``),
so a fault can cut that client alone from a broker while the others (node ``client``) still reach
it: librdkafka cannot bind a source address, but it connects to whatever a broker advertises on
the listener it asked, and each broker advertises its ``SOLO`` listener at a proxy port whose
connections all come from this node."""

CLIENT_ADDRESS = "127.0.0.10"
"""Where the clients' own ZooKeeper port listens (the ZooKeeper consumer group's link ``client -> zk``)."""


LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
"""Debian's libfaketime (package ``faketime``); clock faults need it."""


def faketime_available() -> bool:
    return LIBFAKETIME.exists()


def faketime_env(offset_s: float) -> dict[str, str]:
    """The environment that starts a process with its clocks ``offset_s`` seconds off."""
    return {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": f"{offset_s:+.0f}s", "FAKETIME_DONT_FAKE_MONOTONIC": "0"}


def node_address(broker_id: int) -> str:
    """Broker ``broker_id``'s own loopback address."""
    return f"127.0.0.{10 + broker_id}"


def _free_port_on(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ChaosCluster:
    """ZooKeeper, the proxy and ``brokers`` broker processes under ``base_dir``."""

    def __init__(self, brokers: int, base_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.count = brokers
        self.base_dir = Path(base_dir)
        self.overrides = {**CHAOS_BROKER_DEFAULTS, **(overrides or {})}
        self.chroot = "/chaos"
        self.zookeeper: Any = None
        self.proxy = FaultProxy(sources={node_address(i): f"b{i}" for i in range(1, brokers + 1)})
        self.brokers: dict[int, ClusterBroker] = {}
        self.advertised: dict[int, tuple[str, int]] = {}
        self.client_zookeeper_connect = ""
        """``zookeeper.connect`` of the clients (through the proxy, link ``client -> zk``)."""
        self.solo_advertised: dict[int, tuple[str, int]] = {}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.advertised.values())

    @property
    def solo_bootstrap_servers(self) -> str:
        """The bootstrap of the :data:`SOLO_CLIENT` (its own listener on every broker)."""
        return ",".join(f"{h}:{p}" for h, p in self.solo_advertised.values())

    @property
    def session_timeout_s(self) -> float:
        return int(self.overrides["zookeeper.session.timeout.ms"]) / 1000

    def start(self) -> ChaosCluster:
        from odradek.testing_zk import ZooKeeperServer

        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.zookeeper = ZooKeeperServer()
        self.zookeeper.start()
        self.proxy.start()
        self._create_chroot()
        client_zk_port = _free_port_on(CLIENT_ADDRESS)
        self.proxy.add_route(
            Route((CLIENT_ADDRESS, client_zk_port), ("127.0.0.1", self.zookeeper.port), "zk", "client")
        )
        self.client_zookeeper_connect = f"{CLIENT_ADDRESS}:{client_zk_port}{self.chroot}"
        for i in range(1, self.count + 1):
            host = node_address(i)
            real_port = free_port()
            proxy_port = _free_port_on(host)
            zk_port = _free_port_on(host)
            self.proxy.add_route(Route((host, proxy_port), ("127.0.0.1", real_port), f"b{i}"))
            self.proxy.add_route(Route((host, zk_port), ("127.0.0.1", self.zookeeper.port), "zk", source=f"b{i}"))
            solo_port, solo_proxy_port = free_port(), _free_port_on(host)
            self.proxy.add_route(Route((host, solo_proxy_port), ("127.0.0.1", solo_port), f"b{i}", SOLO_CLIENT))
            self.advertised[i] = (host, proxy_port)
            self.solo_advertised[i] = (host, solo_proxy_port)
            props = {
                **self.overrides,
                "zookeeper.connect": f"{host}:{zk_port}{self.chroot}",
                "listeners": f"PLAINTEXT://127.0.0.1:{{port}},SOLO://127.0.0.1:{solo_port}",
                "advertised.listeners": f"PLAINTEXT://{host}:{proxy_port},SOLO://{host}:{solo_proxy_port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SOLO:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "odradek.broker.source.address": host,
            }
            broker = ClusterBroker(i, self.base_dir / f"broker-{i}", props)
            broker.port = real_port
            self.brokers[i] = broker
        for broker in self.brokers.values():
            broker.spawn()
        for broker in self.brokers.values():
            broker.wait_listening(60)
        return self

    def _create_chroot(self) -> None:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper.connect_string, timeout=10)
        zk.start(10)
        try:
            zk.ensure_path(self.chroot)
        finally:
            zk.stop()
            zk.close()

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.kill()
        self.proxy.close()
        if self.zookeeper is not None:
            self.zookeeper.close()
            self.zookeeper = None

    # --- process faults ---------------------------------------------------------------------

    def kill9(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def start_broker(self, broker_id: int, clock_offset_s: float | None = None) -> None:
        """Start a stopped broker; with ``clock_offset_s``, under libfaketime with its wall clock
        (and its monotonic clock, which must move with it: libfaketime breaks Python's
        ``time.sleep`` otherwise) that many seconds off, constant for the process's life."""
        broker = self.brokers[broker_id]
        if broker.alive():
            return
        wait_port_free(broker.port)
        broker.spawn(None if clock_offset_s is None else faketime_env(clock_offset_s))
        broker.wait_listening(60)

    def stop_broker(self, broker_id: int) -> None:
        """SIGTERM: a controlled shutdown."""
        self.brokers[broker_id].stop()

    def kill_zookeeper(self) -> None:
        process = self.zookeeper._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def zookeeper_alive(self) -> bool:
        process = None if self.zookeeper is None else self.zookeeper._process
        return process is not None and process.poll() is None

    def restart_zookeeper(self) -> None:
        self.zookeeper.restart()

    # --- reading the cluster's state (direct ZooKeeper reads) --------------------------------

    def _zk(self) -> Any:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper.connect_string + self.chroot, timeout=5)
        zk.start(5)
        return zk

    def read_json(self, path: str) -> Any:
        """The JSON of ``path`` under the chroot, None if absent or ZooKeeper is down."""
        try:
            zk = self._zk()
        except Exception:
            return None
        try:
            if zk.exists(path) is None:
                return None
            data, _ = zk.get(path)
            return json.loads(data) if data else None
        except Exception:
            return None
        finally:
            zk.stop()
            zk.close()

    def controller(self) -> int | None:
        data = self.read_json("/controller")
        return None if data is None else int(data["brokerid"])

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        state = self.read_json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return state if isinstance(state, dict) else None

    def replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's assigned replicas (``/brokers/topics/<topic>``); empty if unreadable."""
        assignment = self.read_json(f"/brokers/topics/{topic}")
        return [int(r) for r in (assignment or {}).get("partitions", {}).get(str(partition), [])]

    def leader(self, topic: str, partition: int) -> int | None:
        state = self.partition_state(topic, partition)
        return None if state is None or state["leader"] < 0 else int(state["leader"])

    def wait_for(self, condition: Any, timeout_s: float, interval_s: float = 0.25) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if condition():
                    return True
            except Exception:
                pass
            time.sleep(interval_s)
        return False

    def create_topic(
        self, topic: str, partitions: int, replication: int = 3, configs: dict[str, str] | None = None
    ) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics(
            [NewTopic(topic, partitions, replication, config=configs or {})], request_timeout=30
        )
        futures[topic].result(60)
        self.wait_for(lambda: all(self.leader(topic, p) is not None for p in range(partitions)), 30)
