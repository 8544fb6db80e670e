"""The ZooKeeper clients over SASL_SSL: a broker on a real ZooKeeper with a PLAINTEXT listener
(inter-broker) and a SASL_SSL one; the ZooKeeper producer, the ZooKeeper consumer group and
``console-consumer --zookeeper`` with a ``--consumer.config`` file find the SASL_SSL endpoint in
``/brokers/ids/<id>`` and authenticate there."""

from __future__ import annotations

import asyncio
import io
import json
import pathlib
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli import console_consumer
from odradek.cli.cluster import LocalCluster
from odradek.client.security import ClientSecurity
from odradek.testing_zk import ZooKeeperServer
from odradek.zkclients.consumer_connector import ConsumerConfig, ZookeeperConsumerConnector
from odradek.zkclients.producer import Producer as ZkProducer

from .security_support import PLAIN_JAAS, write_certificates

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(300)]

TOPIC = "zk-secure"


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("zk-client-certs"))


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer, paths: dict[str, str]
) -> Iterator[LocalCluster]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": paths["server"],
    }
    c = odradek_cluster_module(1, overrides=overrides, zookeeper_connect=zookeeper_server.chroot_connect())
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    # the port accepts connections before the broker learns the controller: librdkafka would wait
    assert c.wait_until(lambda: admin.list_topics(timeout=5).controller_id >= 0, 30)
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    yield c


def client_props(paths: dict[str, str]) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": (
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": paths["ca"],
    }


def sasl_ssl_port(cluster: LocalCluster) -> int:
    registration = json.loads(cluster.read_znode("/brokers/ids/1"))
    assert registration["listener_security_protocol_map"]["SASL_SSL"] == "SASL_SSL"
    (endpoint,) = [e for e in registration["endpoints"] if e.startswith("SASL_SSL://")]
    return int(endpoint.rsplit(":", 1)[1])


def test_producer_and_consumer_group_over_sasl_ssl(cluster: LocalCluster, paths: dict[str, str]) -> None:
    props = client_props(paths)
    security = ClientSecurity.from_properties(props)
    config = ConsumerConfig.from_properties(
        "zk-secure-readers", cluster.zookeeper_connect, {**props, "auto.offset.reset": "smallest"}
    )

    async def run() -> tuple[list[bytes], set[int]]:
        async with ZkProducer(zookeeper_connect=cluster.zookeeper_connect, security=security) as producer:
            for i in range(10):
                await producer.send(TOPIC, b"secure-%d" % i, partition=i % 2)
            ports = {node.port for node in producer.broker_partition_info.brokers.values()}
        async with ZookeeperConsumerConnector(config, {TOPIC: 1}) as consumer:
            values: list[bytes] = []
            for _ in range(100):
                values += [r.value or b"" for r in await consumer.poll(200)]
                if len(values) >= 10:
                    break
            ports |= {node.port for node in consumer.info.brokers.values()}
            return values, ports

    values, ports = asyncio.run(run())
    assert sorted(values) == sorted(b"secure-%d" % i for i in range(10))
    assert ports == {sasl_ssl_port(cluster)}


def test_console_consumer_with_a_consumer_config_file(
    cluster: LocalCluster, paths: dict[str, str], tmp_path: pathlib.Path
) -> None:
    config = tmp_path / "consumer.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in client_props(paths).items()))
    out = io.BytesIO()
    argv = ["--zookeeper", cluster.zookeeper_connect, "--topic", TOPIC, "--from-beginning"]
    argv += ["--consumer.config", str(config), "--max-messages", "10", "--timeout-ms", "20000"]
    assert console_consumer.main(argv, stdout=out) == 0
    assert len(out.getvalue().splitlines()) == 10
