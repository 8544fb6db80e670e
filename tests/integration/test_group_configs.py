"""Group configs (Kafka 4's GROUP config resource) on two brokers sharing a real ZooKeeper:
confluent-kafka's AdminClient alters and describes them (librdkafka sends resource type 32), the
change reaches the other broker through ``/config/changes``, ``odradek configs --entity-type
groups`` does the same as kafka-configs.sh, and a KIP-848 group's members get the group's
heartbeat interval and are expired after its session timeout."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from odradek.cli import configs as configs_cli
from odradek.client.connection import KafkaConnection
from odradek.server.broker import Broker
from odradek.testing import BrokerRunner
from odradek.testing_zk import ZooKeeperServer

from .group_config_support import coordinator_port, describe_group, heartbeat

TOPIC = "gc-topic"
OVERRIDES = {
    "group.consumer.session.timeout.ms": "30000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "3000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def brokers(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[BrokerRunner]]:
    connect = zookeeper_server.chroot_connect()
    runners: list[BrokerRunner] = []
    try:
        for broker_id in (0, 1):
            directory = str(tmp_path_factory.mktemp(f"gc-{broker_id}"))
            overrides = {**OVERRIDES, "zookeeper.connect": connect}
            runners.append(BrokerRunner(directory, overrides, broker_id=broker_id).start())
        admin = AdminClient({"bootstrap.servers": runners[0].bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        yield runners
    finally:
        for runner in runners:
            runner.stop()


def _admin(runner: BrokerRunner) -> AdminClient:
    return AdminClient({"bootstrap.servers": runner.bootstrap_servers})


def _alter(admin: AdminClient, group: str, *ops: tuple[str, str | None, AlterConfigOpType]) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)


def _describe(admin: AdminClient, group: str) -> dict[str, Any]:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    result: dict[str, Any] = future.result(15)
    return result


def _broker(runner: BrokerRunner) -> Broker:
    assert runner.broker is not None
    return runner.broker


def _wait(condition: Callable[[], bool], timeout_s: float = 10) -> float:
    """Seconds until ``condition()`` held; fails after ``timeout_s``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout_s, "condition not met in time"
        time.sleep(0.05)
    return time.monotonic() - start


def test_confluent_admin_alters_and_describes_a_group_on_every_broker(brokers: list[BrokerRunner]) -> None:
    group = f"app-{uuid.uuid4().hex[:6]}"
    admin0, admin1 = _admin(brokers[0]), _admin(brokers[1])
    _alter(
        admin0,
        group,
        ("consumer.heartbeat.interval.ms", "1500", AlterConfigOpType.SET),
        ("share.auto.offset.reset", "by_duration:PT10M", AlterConfigOpType.SET),
    )
    other = _broker(brokers[1])
    _wait(lambda: other.group_configs.get(group).consumer_heartbeat_interval_ms == 1500)  # via /config/changes
    configs = _describe(admin1, group)
    assert set(configs) == {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
    }
    heartbeat_entry = configs["consumer.heartbeat.interval.ms"]
    assert (heartbeat_entry.value, heartbeat_entry.source) == ("1500", ConfigSource.GROUP_CONFIG.value)
    session = configs["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("30000", ConfigSource.DEFAULT_CONFIG.value)  # the broker's
    assert configs["share.auto.offset.reset"].value == "by_duration:PT10M"
    store = _broker(brokers[0]).zk.store
    znode = brokers[0].call(lambda: store.get(f"/config/groups/{group}"))
    assert json.loads(znode[0])["config"] == {
        "consumer.heartbeat.interval.ms": "1500",
        "share.auto.offset.reset": "by_duration:PT10M",
    }

    for key, value in (("consumer.session.timeout.ms", "500"), ("session.timeout.ms", "50000")):
        with pytest.raises(KafkaException) as raised:
            _alter(admin0, group, (key, value, AlterConfigOpType.SET))
        assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG, key

    _alter(admin1, group, ("consumer.heartbeat.interval.ms", None, AlterConfigOpType.DELETE))
    first = _broker(brokers[0]).group_configs
    _wait(lambda: first.get(group).consumer_heartbeat_interval_ms == 3000)
    assert _describe(admin0, group)["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_odradek_configs_alters_and_describes_groups(
    brokers: list[BrokerRunner], capsys: pytest.CaptureFixture[str]
) -> None:
    group = f"cli-{uuid.uuid4().hex[:6]}"
    base = ["--bootstrap-server", brokers[0].bootstrap_servers, "--entity-type", "groups", "--entity-name", group]
    assert configs_cli.main([*base, "--alter", "--add-config", "consumer.session.timeout.ms=20000"]) == 0
    assert capsys.readouterr().out.strip() == f"Completed updating config for group {group}."
    assert configs_cli.main([*base, "--describe"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"Dynamic configs for group {group} are:",
        "  consumer.session.timeout.ms=20000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=20000}",
    ]
    assert configs_cli.main([*base, "--alter", "--delete-config", "consumer.heartbeat.interval.ms"]) == 1
    assert "Invalid config(s): consumer.heartbeat.interval.ms" in capsys.readouterr().err
    assert configs_cli.main([*base, "--alter", "--delete-config", "consumer.session.timeout.ms"]) == 0
    capsys.readouterr()
    assert configs_cli.main([*base, "--describe"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"Dynamic configs for group {group} are:"]


def test_a_consumer_group_gets_its_heartbeat_interval_and_session_timeout(brokers: list[BrokerRunner]) -> None:
    group = f"cg-{uuid.uuid4().hex[:6]}"
    _alter(
        _admin(brokers[0]),
        group,
        ("consumer.heartbeat.interval.ms", "700", AlterConfigOpType.SET),
        ("consumer.session.timeout.ms", "2000", AlterConfigOpType.SET),
    )
    everywhere = [_broker(runner).group_configs for runner in brokers]  # whichever coordinates the group
    _wait(lambda: all(configs.get(group).consumer_session_timeout_ms == 2000 for configs in everywhere))

    async def scenario() -> float:
        async with KafkaConnection("127.0.0.1", brokers[0].port) as bootstrap:
            port = await coordinator_port(bootstrap, group, brokers)
        async with KafkaConnection("127.0.0.1", port) as conn:
            member = str(uuid.uuid4())
            joined = await heartbeat(conn, group, member, 0, topics=[TOPIC])
            assert joined.error_code == 0, joined
            assert joined.heartbeat_interval.total_seconds() == 0.7  # the group's, not the broker's 3 s
            assert len((await describe_group(conn, group)).members) == 1
            start = time.monotonic()  # no more heartbeats: expired after the group's 2 s, not 30 s
            while (await describe_group(conn, group)).members:
                assert time.monotonic() - start < 15
                await asyncio.sleep(0.1)
            return time.monotonic() - start

    elapsed = asyncio.run(scenario())
    assert 1.0 < elapsed < 15
