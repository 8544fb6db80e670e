"""Pytest plugin and helpers to run real odradek brokers in tests.

Registered as a pytest plugin (entry point ``pytest11: odradek``), so any project that installs
odradek gets the fixtures:

- ``odradek_broker``: a fresh single broker on a free 127.0.0.1 port with a temporary data dir,
  function-scoped; yields a :class:`BrokerRunner` (``.bootstrap_servers`` is ``"127.0.0.1:PORT"``).
- ``odradek_broker_factory``: a callable ``factory(data_dir=None, overrides={...}) -> BrokerRunner``
  for tests that need particular settings; everything it started is stopped at the end of the test.

- ``odradek_cluster``: a factory ``odradek_cluster(brokers=3, overrides={...},
  zookeeper_connect=None) -> LocalCluster`` starting broker *processes* (ids 1..N) on one real
  Apache ZooKeeper (Debian's package, one per factory call unless ``zookeeper_connect`` names a
  running one; a fresh chroot either way) with short timeouts (:data:`CLUSTER_DEFAULTS`);
  everything it started is stopped at the end of the fixture's scope. Function-scoped;
  ``odradek_cluster_module`` is the same factory module-scoped, for a test module that shares
  one cluster. The cluster has ``bootstrap_servers``, ``kill9(id)``, ``sigstop(id)``,
  ``sigcont(id)``, ``restart(id)``, ``read_znode(path)`` and ``wait_until(condition, timeout_s)``.
- ``zookeeper_server``: one Apache ZooKeeper (:class:`odradek.testing_zk.ZooKeeperServer`) for the
  whole test session; ``zookeeper_connect``: a ``127.0.0.1:<port>/test-<hex>`` connect string on it
  with a chroot unique to the test, so tests never see each other's znodes. If ZooKeeper or Java is
  missing they fail, never skip, with a message saying to run ``make test``, which installs them.

The first two yield :class:`odradek.server.runner.BrokerRunner` (a broker on its own thread and event loop;
see that module). Test brokers start with :data:`TEST_DEFAULTS`: a free port, no initial
rebalance delay, and internal topics with replication factor 1 and 5 partitions.

Only this module imports pytest: :mod:`odradek.cli.cluster` and :mod:`odradek.testing_zk` run
after a plain install.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from odradek.cli.cluster import LocalCluster
from odradek.server.runner import TEST_DEFAULTS, BrokerRunner
from odradek.testing_zk import ZooKeeperNotInstalled, ZooKeeperServer

__all__ = [
    "CLUSTER_DEFAULTS",
    "TEST_DEFAULTS",
    "BrokerRunner",
    "LocalCluster",
    "odradek_broker",
    "odradek_broker_factory",
    "odradek_cluster",
    "odradek_cluster_module",
    "zookeeper_connect",
    "zookeeper_server",
]

CLUSTER_DEFAULTS = {
    **{k: v for k, v in TEST_DEFAULTS.items() if k != "listeners"},
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "2000",
    "controller.socket.timeout.ms": "5000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.fetch.backoff.ms": "200",
}
"""Settings of every ``odradek_cluster`` broker: short ZooKeeper session and ISR lag timeouts, so
a killed broker is noticed within seconds."""


@pytest.fixture
def odradek_broker(tmp_path: Any) -> Iterator[BrokerRunner]:
    """A single broker on a free port with a temporary data dir."""
    runner = BrokerRunner(str(tmp_path / "broker")).start()
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture
def odradek_broker_factory(tmp_path: Any) -> Iterator[Callable[..., BrokerRunner]]:
    """``factory(data_dir=None, overrides={"num.partitions": "3"})``: start brokers with given settings."""
    started: list[BrokerRunner] = []
    counter = [0]

    def factory(data_dir: str | None = None, overrides: Mapping[str, str] | None = None) -> BrokerRunner:
        counter[0] += 1
        d = data_dir or str(tmp_path / f"broker-{counter[0]}")
        runner = BrokerRunner(d, overrides).start()
        started.append(runner)
        return runner

    try:
        yield factory
    finally:
        for runner in started:
            runner.stop()


def _cluster_factory(base: Any) -> Iterator[Callable[..., LocalCluster]]:
    started: list[LocalCluster] = []

    def factory(
        brokers: int = 3,
        overrides: Mapping[str, str] | None = None,
        zookeeper_connect: str | None = None,
        log_dirs: int = 1,
        broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
    ) -> LocalCluster:
        directory = base / f"cluster-{len(started) + 1}"
        overrides = {**CLUSTER_DEFAULTS, **(overrides or {})}
        cluster = LocalCluster(
            brokers,
            directory,
            zookeeper_connect,
            overrides=overrides,
            log_dirs=log_dirs,
            broker_overrides=broker_overrides,
        )
        started.append(cluster)
        return cluster.start()

    try:
        yield factory
    finally:
        for cluster in started:
            cluster.close()


@pytest.fixture
def odradek_cluster(tmp_path: Any) -> Iterator[Callable[..., LocalCluster]]:
    """``odradek_cluster(brokers=3, overrides=None) -> LocalCluster``: broker processes on a real ZooKeeper."""
    yield from _cluster_factory(tmp_path)


@pytest.fixture(scope="module")
def odradek_cluster_module(tmp_path_factory: Any) -> Iterator[Callable[..., LocalCluster]]:
    """The same factory, module-scoped: a test module starts its cluster once and shares it."""
    yield from _cluster_factory(tmp_path_factory.mktemp("cluster"))


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """One Apache ZooKeeper for the test session (fails, never skips, if not installed)."""
    try:
        ZooKeeperServer.check_installed()
    except ZooKeeperNotInstalled as e:
        pytest.fail(str(e), pytrace=False)
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture
def zookeeper_connect(zookeeper_server: ZooKeeperServer) -> str:
    """A connect string with a chroot unique to this test: ``127.0.0.1:<port>/test-<hex>``."""
    return zookeeper_server.chroot_connect()
