"""Two registry processes on a real ZooKeeper: one leads writes through the ephemeral znode
``/schema_registry/schema_registry_master``, the other forwards writes to it; after the leader is
killed -9 the other takes over once the session expires, and global ids stay unique."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from tests.integration.schema_registry_support import avro_record, call, wait_until

from odradek.free_ports import free_port
from odradek.server.runner import BrokerRunner

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("sr-leader"))).start()
    try:
        yield runner
    finally:
        runner.stop()


def _spawn(broker: BrokerRunner, zk: str, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek.cli.main",
            "schema-registry",
            "--bootstrap-server",
            broker.bootstrap_servers,
            "--listen",
            f"127.0.0.1:{port}",
            "--zookeeper",
            zk,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _leader(zk: KazooClient, path: str) -> str | None:
    try:
        data, _ = zk.get(path)
    except Exception:
        return None
    obj = json.loads(data)
    assert obj["master_eligibility"] is True and obj["version"] == 1
    return f"{obj['scheme']}://{obj['host']}:{obj['port']}"


def test_writes_go_through_one_leader_and_survive_its_kill(broker: BrokerRunner, zookeeper_connect: str) -> None:
    ports = [free_port(), free_port()]
    procs = [_spawn(broker, zookeeper_connect, p) for p in ports]
    hosts, chroot = zookeeper_connect.split("/", 1)
    zk = KazooClient(hosts=hosts)  # the chroot is created by the registries, later
    leader_path = f"/{chroot}/schema_registry/schema_registry_master"
    zk.start(10)
    try:
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().startswith("schema registry listening")
        leader = wait_until(lambda: _leader(zk, leader_path), 20, "a leader")
        assert leader in urls
        follower = next(u for u in urls if u != leader)
        ids = set()
        # writes sent to either instance: the follower forwards them to the leader
        for i in range(6):
            target = urls[i % 2]
            status, body = call(target, "POST", f"/subjects/lead-{i}/versions", {"schema": avro_record(f"L{i}", [])})
            assert status == 200, body
            ids.add(body["id"])
        assert len(ids) == 6
        # the follower has read every write back from _schemas
        assert wait_until(lambda: len(call(follower, "GET", "/subjects")[1]) >= 6, 10, "the follower to catch up")
        os.kill(procs[urls.index(leader)].pid, signal.SIGKILL)
        procs[urls.index(leader)].wait(10)
        # until the dead leader's session expires, writes to the follower fail with Confluent's codes
        status, body = call(follower, "POST", "/subjects/during/versions", {"schema": avro_record("D", [])})
        assert status in (200, 500) and (status == 200 or body["error_code"] in (50003, 50004))
        assert wait_until(lambda: _leader(zk, leader_path) == follower, 30, "the follower to take over")

        def register(i: int) -> int | None:
            status, body = call(follower, "POST", f"/subjects/lead-{i}/versions", {"schema": avro_record(f"L{i}", [])})
            # 50004 while the new leader reads _schemas to its end before taking writes
            assert status == 200 or body["error_code"] == 50004, body
            return int(body["id"]) if status == 200 else None

        for i in range(6, 10):
            schema_id = wait_until(lambda i=i: register(i), 20, "a registration on the new leader")
            assert schema_id not in ids
            ids.add(schema_id)
        assert len(ids) == 10
        everything = call(follower, "GET", "/schemas")[1]
        by_id: dict[int, str] = {}
        for s in everything:
            assert by_id.setdefault(s["id"], s["schema"]) == s["schema"]  # one schema per id
    finally:
        zk.stop()
        zk.close()  # stop leaves kazoo's wake-up socket pair open
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(15)
