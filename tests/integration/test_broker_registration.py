"""A broker's registration in ``/brokers/ids`` on a real ZooKeeper, two broker processes.

A broker killed with SIGKILL and started again at once finds its old registration still held by
the dead process's session: it waits for that session to expire (logged) and registers, instead
of refusing to start. A second process given a live broker's ``broker.id`` waits as long, then
exits with the duplicate-id error.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.cli.cluster import LocalCluster
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(120)]

SESSION_MS = 10000
"""Long enough that the restarted process (its start-up takes seconds on a loaded machine) registers
while the killed one's session is still alive."""


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    overrides = {"zookeeper.session.timeout.ms": str(SESSION_MS)}
    yield odradek_cluster_module(2, overrides=overrides, zookeeper_connect=zookeeper_server.chroot_connect())


def test_a_broker_restarted_right_after_kill_9_waits_for_its_old_session_and_registers(cluster: LocalCluster) -> None:
    victim = cluster.broker(2)
    starts = victim.log_path.read_text().count("broker 2 started in")
    cluster.kill9(2)
    started = time.monotonic()
    cluster.restart(2)  # listening; it registers once the old session is gone
    assert cluster.wait_until(lambda: "waiting for it to expire" in victim.log_tail(400), timeout_s=20)
    # registered (start-up completes after the registration)
    assert cluster.wait_until(lambda: victim.log_path.read_text().count("broker 2 started in") > starts, timeout_s=30)
    assert victim.alive()
    assert time.monotonic() - started < 1.5 * SESSION_MS / 1000 + 10


def test_a_duplicate_broker_id_still_fails_once_the_wait_is_over(cluster: LocalCluster, tmp_path: Path) -> None:
    live = cluster.broker(1)
    command = [
        sys.executable,
        "-m",
        "odradek.cli.main",
        "broker",
        "--override",
        f"zookeeper.connect={cluster.zookeeper_connect}",
        "--override",
        f"zookeeper.session.timeout.ms={SESSION_MS}",
        "--override",
        f"broker.id={live.broker_id}",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        f"log.dirs={tmp_path / 'data'}",
    ]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "already registered" in done.stderr and "unique broker.id" in done.stderr
    assert time.monotonic() - started >= 1.5 * SESSION_MS / 1000
    assert live.alive()
