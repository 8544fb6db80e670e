"""Two broker processes on a real ZooKeeper: a dynamic broker config and a client quota altered
through one broker reach the other through ``/config/changes`` (Kafka's ``DynamicConfigManager``),
seen from a confluent-kafka AdminClient and producer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from odradek.cli import configs
from odradek.cli.cluster import LocalCluster
from odradek.client.admin import AdminClient as OwnAdmin
from odradek.client.admin import AlterConfigOp
from odradek.client.admin import ConfigResource as Resource
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(2, zookeeper_connect=zookeeper_server.chroot_connect())


def _eventually(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def test_a_cluster_default_set_through_one_broker_applies_on_the_other(cluster: LocalCluster) -> None:
    ids = sorted(cluster.brokers)
    first, second = cluster.broker(ids[0]), cluster.broker(ids[1])
    change = {Resource(4, ""): [AlterConfigOp("log.retention.bytes", AlterConfigOp.SET, "123456789")]}

    async def alter() -> object:
        async with OwnAdmin(first.bootstrap_servers) as own:  # the default resource "" (confluent cannot name it)
            return await own.incremental_alter_configs(change)

    assert asyncio.run(alter()) == {Resource(4, ""): None}
    admin = AdminClient({"bootstrap.servers": second.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, str(ids[1]))

    def applied() -> bool:
        entry = admin.describe_configs([resource])[resource].result(timeout=10)["log.retention.bytes"]
        return (entry.value, entry.source) == ("123456789", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

    _eventually(applied)


def test_a_client_quota_set_through_one_broker_throttles_on_the_other(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = sorted(cluster.brokers)
    first, second = cluster.broker(ids[0]), cluster.broker(ids[1])
    argv = ["--bootstrap-server", first.bootstrap_servers, "--alter", "--entity-type", "clients"]
    assert configs.main([*argv, "--entity-name", "capped", "--add-config", "producer_byte_rate=1024"]) == 0
    capsys.readouterr()
    admin = AdminClient({"bootstrap.servers": second.bootstrap_servers})
    admin.create_topics([NewTopic("capped-topic", 2, 1)])["capped-topic"].result(timeout=30)

    def leader_partition() -> int | None:
        topic = admin.list_topics("capped-topic", timeout=10).topics["capped-topic"]
        return next((p.id for p in topic.partitions.values() if p.leader == ids[1]), None)

    _eventually(lambda: leader_partition() is not None)
    partition = leader_partition()
    assert partition is not None
    throttles: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": second.bootstrap_servers,
            "client.id": "capped",
            "throttle_cb": lambda e: throttles.append(e.throttle_time),
        }
    )
    deadline = time.monotonic() + 30
    while not throttles:  # 1 KB/s: a few 20 KB records are well over it
        assert time.monotonic() < deadline, f"broker {ids[1]} reported no throttle time"
        producer.produce("capped-topic", b"x" * 20_000, partition=partition)
        producer.flush(10)
    assert max(throttles) > 0
