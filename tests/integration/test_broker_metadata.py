"""The broker on its metadata store: the seeds' znode layout, restart, session expiry, and a
broker running on a real Apache ZooKeeper."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.zk import main as zk_main
from odradek.testing import BrokerRunner


def _roundtrip(bootstrap: str, topic: str, n: int = 50) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=b"m%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    got: list[bytes] = []
    deadline = time.time() + 15
    while len(got) < n and time.time() < deadline:
        got += [m.value() for m in c.consume(100, 0.2) if m.error() is None]
    c.close()
    return got


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config={"retention.ms": "3600000"})])[topic].result(10)


def test_znode_layout_matches_the_seeds(odradek_broker: BrokerRunner) -> None:
    _create(odradek_broker.bootstrap_servers, "page_visits", 5)
    store = odradek_broker.broker.store  # type: ignore[union-attr]

    async def read(path: str) -> bytes:
        data, _ = await store.get(path)
        return bytes(data)

    def get(path: str) -> bytes:
        return odradek_broker.call(lambda: read(path))  # type: ignore[no-any-return]

    broker = json.loads(get("/brokers/ids/0"))
    assert {"version", "host", "port", "jmx_port", "timestamp"} <= set(broker)
    assert broker["host"] == "127.0.0.1" and broker["port"] == odradek_broker.port
    assert isinstance(broker["timestamp"], str)
    topic = json.loads(get("/brokers/topics/page_visits"))
    assert topic["partitions"] == {str(p): [0] for p in range(5)}
    state = json.loads(get("/brokers/topics/page_visits/partitions/3/state"))
    assert state == {"controller_epoch": 1, "leader": 0, "version": 1, "leader_epoch": 0, "isr": [0]}
    assert json.loads(get("/controller"))["brokerid"] == 0
    assert get("/controller_epoch") == b"1"
    assert json.loads(get("/config/topics/page_visits"))["config"] == {"retention.ms": "3600000"}


def test_topics_and_configs_survive_restart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = str(tmp_path / "d")
    with BrokerRunner(data) as b:
        _create(b.bootstrap_servers, "keep", 2)
        assert sorted(_roundtrip(b.bootstrap_servers, "keep")) == sorted(b"m%d" % i for i in range(50))
    with BrokerRunner(data) as b:
        meta = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=10)
        assert len(meta.topics["keep"].partitions) == 2
        assert b.broker.log_config_for("keep").retention_ms == 3600000  # type: ignore[union-attr]
        got = _roundtrip(b.bootstrap_servers, "keep")
        assert len(got) == 100  # the 50 from before the restart and 50 new
    assert zk_main(["--data-dir", data, "get", "/controller_epoch"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[0] == "2"  # one election per start


def test_session_expiry_registers_again_and_reelects(odradek_broker: BrokerRunner) -> None:
    store = odradek_broker.broker.store  # type: ignore[union-attr]

    async def expire_and_check() -> tuple[bool, bytes]:
        await store.expire()  # type: ignore[attr-defined]
        for _ in range(200):
            stat = await store.exists("/brokers/ids/0")
            if stat is not None and await store.exists("/controller") is not None:
                epoch, _ = await store.get("/controller_epoch")
                return True, bytes(epoch)
            await asyncio.sleep(0.01)
        return False, b""

    ok, epoch = odradek_broker.call(expire_and_check)
    assert ok and epoch == b"2"
    _create(odradek_broker.bootstrap_servers, "after-expiry", 2)
    assert len(_roundtrip(odradek_broker.bootstrap_servers, "after-expiry")) == 50


@pytest.mark.zookeeper
def test_broker_on_real_zookeeper(zookeeper_connect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with BrokerRunner(str(tmp_path / "zk-broker"), {"zookeeper.connect": zookeeper_connect}) as b:
        _create(b.bootstrap_servers, "on-zk", 2)
        assert sorted(_roundtrip(b.bootstrap_servers, "on-zk")) == sorted(b"m%d" % i for i in range(50))
        assert zk_main(["--zookeeper", zookeeper_connect, "get", "/brokers/topics/on-zk/partitions/1/state"]) == 0
        state = json.loads(capsys.readouterr().out.strip().splitlines()[0])
        assert state["leader"] == 0 and state["isr"] == [0]
    assert not list((tmp_path / "zk-broker").glob("metadata/znodes.json")), "embedded store must not be used"


def test_unreachable_zookeeper_fails_fast(tmp_path: Path) -> None:
    runner = BrokerRunner(
        str(tmp_path / "x"),
        {"zookeeper.connect": "127.0.0.1:1/odradek", "zookeeper.connection.timeout.ms": "1500"},
    )
    t0 = time.time()
    with pytest.raises(Exception, match=r"cannot reach ZooKeeper at 127\.0\.0\.1:1"):
        runner.start()
    assert time.time() - t0 < 10
