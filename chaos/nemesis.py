"""Nemeses: the faults a campaign injects, and schedules of them.

A fault is a :class:`Nemesis` with ``inject()`` and ``heal()``; :func:`run_fault` records it in
the history (:class:`~chaos.history.Fault`, start at injection, end at heal). Faults:

- ``zk-isolate``: one broker cut from ZooKeeper only (clients and brokers still reach it: the
  zombie leader case when it leads partitions).
- ``leader-isolate``: the leader of a partition cut from its followers only.
- ``partition-minority`` / ``partition-majority``: the brokers split in two groups cut from each
  other (ZooKeeper reachable from both); the named side holds the workload's leader.
- ``client-leader``: the clients (``client`` and ``solo``) cut from the leader of a partition.
- ``solo-client-leader``: one client alone (the producer of node ``solo``, see
  :data:`~chaos.cluster.SOLO_CLIENT`) cut from the leader of a partition; the others still reach it.
- ``controller-pause``: the controller (``/controller``) SIGSTOPped past the ZooKeeper session
  timeout, then SIGCONTed.
- ``leader-pause``: a partition leader SIGSTOPped past the session timeout.
- ``kill-leader``: a partition leader killed (SIGKILL) and restarted.
- ``kill-follower``: a follower of the partition (one of its replicas, not its leader) killed
  (SIGKILL) and restarted.
- ``zk-restart``: ZooKeeper killed (SIGKILL) and restarted on its port and data after the hold.
- ``rolling-restart``: every broker in turn stopped (controlled shutdown) and started, waiting
  until its partitions' ISRs are full again.
- ``slow-link``: 100 ms latency and 1 MB/s between the leader and its followers.
- ``clock-skew`` (needs libfaketime): a partition leader stopped (controlled shutdown) and started
  again with its clocks 10-60 s ahead or behind (libfaketime), then, at the heal, restarted with
  the true clock: the cluster runs with one broker's clock off, and that broker's clock jumps
  back (or forward) across the restart over the timestamps it wrote.

Schedules (:data:`SCHEDULES`): one fault kind repeated, or ``mixed`` (seeded random choice).
Runs on the campaign's main thread.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from chaos.cluster import SOLO_CLIENT, ChaosCluster
from chaos.history import Fault, History
from chaos.proxy import CLIENT

__all__ = ["CLOCK_KINDS", "KINDS", "SCHEDULES", "Nemesis", "make_nemesis", "run_fault"]

KINDS = (
    "zk-isolate",
    "leader-isolate",
    "partition-minority",
    "partition-majority",
    "client-leader",
    "solo-client-leader",
    "controller-pause",
    "leader-pause",
    "kill-leader",
    "kill-follower",
    "zk-restart",
    "rolling-restart",
    "slow-link",
)
CLOCK_KINDS = ("clock-skew",)
"""Faults that need libfaketime (:func:`~chaos.cluster.faketime_available`): not in :data:`KINDS`,
a campaign adds them when it may."""
SCHEDULES = (*KINDS, *CLOCK_KINDS, "mixed")


@dataclass
class Nemesis:
    kind: str
    targets: str
    inject: Callable[[], None]
    heal: Callable[[], None]
    hold_s: float
    """How long the fault stays before it is healed (0: ``inject`` does the whole fault)."""
    moved: Callable[[], bool] | None = None
    """For a fault that takes a partition's leader away: whether ZooKeeper names another leader
    (polled during the hold; the time it first does is the fault's ``elected_s``)."""
    partition: tuple[str, int] | None = None
    """The partition the fault aims at (its window is measured there); None: every partition."""


def _brokers(cluster: ChaosCluster) -> list[int]:
    return sorted(cluster.brokers)


PARTITION_FAULTS = frozenset(
    (
        "zk-isolate",
        "leader-isolate",
        "client-leader",
        "solo-client-leader",
        "slow-link",
        "leader-pause",
        "kill-leader",
        "kill-follower",
        "clock-skew",
    )
)
"""Faults aimed at one partition's leader or follower: their window is measured on that partition."""


def make_nemesis(
    kind: str, cluster: ChaosCluster, topic: str, rng: random.Random, hold_s: float, history: History | None = None
) -> Nemesis:
    """The fault ``kind`` against an ``rng``-chosen partition of ``topic`` (leaders read from
    ZooKeeper). A rolling restart records each broker's controlled shutdown in ``history`` as a
    ``controlled-shutdown`` fault of its own."""
    partition = rng.randrange(2)
    leader = cluster.leader(topic, partition) or rng.choice(_brokers(cluster))
    nemesis = _nemesis(kind, cluster, topic, rng, hold_s, history, partition, leader)
    if kind in PARTITION_FAULTS or (kind == "controller-pause" and nemesis.moved is not None):
        nemesis.partition = (topic, partition)
    return nemesis


def _nemesis(
    kind: str,
    cluster: ChaosCluster,
    topic: str,
    rng: random.Random,
    hold_s: float,
    history: History | None,
    partition: int,
    leader: int,
) -> Nemesis:
    others = [b for b in _brokers(cluster) if b != leader]
    session = cluster.session_timeout_s
    proxy = cluster.proxy

    def moved() -> bool:
        return cluster.leader(topic, partition) not in (None, leader)

    if kind == "zk-isolate":
        return Nemesis(kind, f"b{leader}", lambda: proxy.cut(f"b{leader}", "zk"), proxy.heal, hold_s, moved)
    if kind == "leader-isolate":
        return Nemesis(
            kind,
            f"b{leader}|{others}",
            lambda: proxy.partition([f"b{leader}"], [f"b{o}" for o in others]),
            proxy.heal,
            hold_s,
        )
    if kind in ("partition-minority", "partition-majority"):
        shuffled = others[:]
        rng.shuffle(shuffled)
        small = (len(_brokers(cluster)) - 1) // 2
        minority = [leader, *shuffled[: small - 1]] if kind == "partition-minority" else shuffled[:small]
        majority = [b for b in _brokers(cluster) if b not in minority]
        a, b = [f"b{x}" for x in minority], [f"b{x}" for x in majority]
        return Nemesis(kind, f"{minority}|{majority}", lambda: proxy.partition(a, b), proxy.heal, hold_s)
    if kind == "client-leader":

        def cut_clients() -> None:
            for client in (CLIENT, SOLO_CLIENT):
                proxy.cut(client, f"b{leader}")

        return Nemesis(kind, f"client|b{leader}", cut_clients, proxy.heal, hold_s)
    if kind == "solo-client-leader":
        return Nemesis(kind, f"solo|b{leader}", lambda: proxy.cut(SOLO_CLIENT, f"b{leader}"), proxy.heal, hold_s)
    if kind == "slow-link":

        def slow() -> None:
            for o in others:
                proxy.slow(f"b{leader}", f"b{o}", latency_s=0.1, bandwidth_bps=1_000_000)

        return Nemesis(kind, f"b{leader}~{others}", slow, proxy.heal, hold_s)
    if kind in ("controller-pause", "leader-pause"):
        target = (cluster.controller() or leader) if kind == "controller-pause" else leader
        broker = cluster.brokers[target]
        return Nemesis(
            kind,
            f"b{target}",
            lambda: broker.signal(signal.SIGSTOP),
            lambda: broker.signal(signal.SIGCONT),
            max(hold_s, session + 2.0),
            moved if target == leader else None,
        )
    if kind == "kill-leader":
        return Nemesis(
            kind, f"b{leader}", lambda: cluster.kill9(leader), lambda: cluster.start_broker(leader), hold_s, moved
        )
    if kind == "kill-follower":
        follower = rng.choice([r for r in cluster.replicas(topic, partition) if r != leader] or others)
        return Nemesis(
            kind, f"b{follower}", lambda: cluster.kill9(follower), lambda: cluster.start_broker(follower), hold_s
        )
    if kind == "clock-skew":
        offset = rng.choice((-1, 1)) * rng.uniform(10.0, 60.0)

        def skewed() -> None:
            cluster.stop_broker(leader)
            cluster.start_broker(leader, clock_offset_s=offset)

        def restarted() -> None:
            cluster.stop_broker(leader)
            cluster.start_broker(leader)

        return Nemesis(kind, f"b{leader}{offset:+.0f}s", skewed, restarted, hold_s)
    if kind == "zk-restart":
        return Nemesis(kind, "zk", cluster.kill_zookeeper, cluster.restart_zookeeper, hold_s)
    if kind == "rolling-restart":
        return Nemesis(kind, "all", lambda: _rolling_restart(cluster, topic, history), lambda: None, 0.0)
    raise ValueError(f"unknown fault {kind!r}; one of {', '.join(KINDS)}")


def _rolling_restart(cluster: ChaosCluster, topic: str, history: History | None) -> None:
    for broker_id in _brokers(cluster):
        shutdown = Fault("controlled-shutdown", f"b{broker_id}", history.now() if history else 0.0)
        if history is not None:
            history.faults.append(shutdown)
        cluster.stop_broker(broker_id)
        cluster.start_broker(broker_id)
        shutdown.end = history.now() if history else 0.0
        cluster.wait_for(lambda: _isr_full(cluster, topic), 60)


def _isr_full(cluster: ChaosCluster, topic: str) -> bool:
    assignment = cluster.read_json(f"/brokers/topics/{topic}")
    if not assignment:
        return False
    for p, replicas in assignment["partitions"].items():
        state = cluster.partition_state(topic, int(p))
        if state is None or sorted(state["isr"]) != sorted(replicas):
            return False
    return True


def run_fault(history: History, nemesis: Nemesis, stopping: Callable[[], bool] = lambda: False) -> Fault:
    fault = Fault(nemesis.kind, nemesis.targets, history.now(), partition=nemesis.partition)
    history.faults.append(fault)
    nemesis.inject()
    deadline = time.monotonic() + nemesis.hold_s
    while time.monotonic() < deadline and not stopping():
        if nemesis.moved is not None and fault.elected_s is None and nemesis.moved():
            fault.elected_s = history.now() - fault.start
        time.sleep(0.1)
    nemesis.heal()
    fault.end = history.now()
    return fault


def isr_full(cluster: ChaosCluster, topic: str) -> bool:
    """Whether every partition of ``topic`` has all its replicas in sync (read from ZooKeeper)."""
    return _isr_full(cluster, topic)
