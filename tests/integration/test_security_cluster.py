"""A 3-broker cluster on a real ZooKeeper whose only listener, inter-broker included, is SASL_SSL.

The inter-broker user (SCRAM-SHA-512) and a client user (SCRAM-SHA-256) are created with
``odradek configs --zookeeper`` before any broker runs, as Kafka's tool allows; the brokers'
controller channel, replica fetchers and transaction markers authenticate with the listener's
JAAS ``username``/``password``. A replicated topic gets its full ISR and serves acks=all writes
and reads over SASL_SSL.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import LocalCluster
from odradek.testing_zk import ZooKeeperServer

from .security_support import write_certificates

pytestmark = pytest.mark.zookeeper

BROKER_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";'
)


def odradek(*argv: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", *argv], capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("cluster-certs"))


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperServer,
    odradek_cluster_module: Callable[..., LocalCluster],
    paths: dict[str, str],
) -> Iterator[LocalCluster]:
    connect = f"{zookeeper_server.connect_string}/sasl-ssl-{uuid.uuid4().hex[:8]}"
    for user, mechanism, password in (
        ("broker", "SCRAM-SHA-512", "broker-secret"),
        ("alice", "SCRAM-SHA-256", "alice-secret"),
    ):
        odradek(
            "configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name", user,
            "--add-config", f"{mechanism}=[password={password}]",
        )  # fmt: skip
    overrides = {
        "listeners": "SASL_SSL://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": paths["server"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": paths["ca"],
    }
    yield odradek_cluster_module(brokers=3, overrides=overrides, zookeeper_connect=connect)


def client_config(cluster: LocalCluster, paths: dict[str, str]) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": paths["ca"],
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }


def test_registrations_list_the_sasl_ssl_endpoint(cluster: LocalCluster) -> None:
    for broker_id, broker in cluster.brokers.items():
        data = cluster.read_znode(f"/brokers/ids/{broker_id}")
        assert data is not None
        registration = json.loads(data)
        assert registration["endpoints"] == [f"SASL_SSL://127.0.0.1:{broker.port}"]
        assert registration["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL"}


def test_replicated_topic_over_sasl_ssl(cluster: LocalCluster, paths: dict[str, str], tmp_path: pathlib.Path) -> None:
    config = client_config(cluster, paths)
    admin = AdminClient(config)
    futures = admin.create_topics([NewTopic("secure-replicated", num_partitions=2, replication_factor=3)])
    futures["secure-replicated"].result(30)

    def full_isr() -> bool:
        topic = admin.list_topics("secure-replicated", timeout=10).topics["secure-replicated"]
        return len(topic.partitions) == 2 and all(len(p.isrs) == 3 for p in topic.partitions.values())

    cluster.wait_until(full_isr, 30)
    metadata = admin.list_topics(timeout=10)
    assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {
        f"127.0.0.1:{b.port}" for b in cluster.brokers.values()
    }
    producer = Producer({**config, "acks": "all", "linger.ms": "5"})
    for i in range(100):
        producer.produce("secure-replicated", f"v{i}".encode(), key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": "secure-group", "auto.offset.reset": "earliest"})
    consumer.subscribe(["secure-replicated"])
    values: set[bytes] = set()
    deadline = time.monotonic() + 40
    try:
        while len(values) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error() and message.value() is not None:
                values.add(message.value())  # type: ignore[arg-type]
    finally:
        consumer.close()
    assert values == {f"v{i}".encode() for i in range(100)}
