"""A 3-broker cluster on a real ZooKeeper whose only listener, inter-broker included, is SASL_SSL.

The inter-broker user (SCRAM-SHA-512) and a client user (SCRAM-SHA-256) are created with
``odradek configs --zookeeper`` before any broker runs, as Kafka's tool allows; the brokers'
controller channel, replica fetchers and transaction markers authenticate with the listener's
JAAS ``username``/``password``. The brokers run Kafka's AclAuthorizer with
``super.users=User:broker``; ``alice`` is granted the ``secure-`` topics and groups with
``odradek acls --authorizer-properties`` before any broker runs. A replicated topic gets its full
ISR and serves acks=all writes and reads over SASL_SSL; ``mallory``, authenticated but no super
user, replaying the controller's LeaderAndIsr and UpdateMetadata is answered
CLUSTER_AUTHORIZATION_FAILED and nothing changes.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import KafkaConnection
from odradek.client.security import ClientSecurity
from odradek.errors import ErrorCode
from odradek.testing import LocalCluster
from odradek.testing_zk import ZooKeeperServer

from .authz_support import leader_and_isr_replay, update_metadata_replay
from .security_support import (
    consume_values,
    sasl_ssl_cluster_overrides,
    seed_sasl_ssl_cluster,
    write_certificates,
)

pytestmark = pytest.mark.zookeeper


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
    seed_sasl_ssl_cluster(connect, ["alice", "mallory"], ["SCRAM-SHA-256"], granted="alice", prefix="secure-")
    overrides = sasl_ssl_cluster_overrides(paths)
    yield odradek_cluster_module(brokers=3, overrides=overrides, zookeeper_connect=connect)


def client_config(cluster: LocalCluster, paths: dict[str, str], user: str = "alice") -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": paths["ca"],
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def test_registrations_list_the_sasl_ssl_endpoint(cluster: LocalCluster) -> None:
    for broker_id, broker in cluster.brokers.items():
        data = cluster.read_znode(f"/brokers/ids/{broker_id}")
        assert data is not None
        registration = json.loads(data)
        assert registration["endpoints"] == [f"SASL_SSL://127.0.0.1:{broker.port}"]
        assert registration["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL"}


def create_with_full_isr(admin: AdminClient, cluster: LocalCluster, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(30)

    def full_isr() -> bool:
        topic = admin.list_topics(name, timeout=10).topics[name]
        return len(topic.partitions) == partitions and all(len(p.isrs) == 3 for p in topic.partitions.values())

    cluster.wait_until(full_isr, 30)


def test_replicated_topic_over_sasl_ssl(cluster: LocalCluster, paths: dict[str, str], tmp_path: pathlib.Path) -> None:
    config = client_config(cluster, paths)
    admin = AdminClient(config)
    create_with_full_isr(admin, cluster, "secure-replicated", 2)
    metadata = admin.list_topics(timeout=10)
    assert {f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {
        f"127.0.0.1:{b.port}" for b in cluster.brokers.values()
    }
    producer = Producer({**config, "acks": "all", "linger.ms": "5"})
    for i in range(100):
        producer.produce("secure-replicated", f"v{i}".encode(), key=str(i).encode())
    assert producer.flush(30) == 0
    values = consume_values(config, "secure-replicated", 100, "secure-group", 40)
    assert values == {f"v{i}".encode() for i in range(100)}


def test_a_non_super_user_replaying_controller_requests_is_refused(
    cluster: LocalCluster, paths: dict[str, str]
) -> None:
    topic = "secure-precious"
    config = client_config(cluster, paths)
    admin = AdminClient(config)
    create_with_full_isr(admin, cluster, topic, 1)
    producer = Producer({**config, "acks": "all"})
    for i in range(20):
        producer.produce(topic, f"r{i}".encode())
    assert producer.flush(30) == 0
    before = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]

    mallory = {k: v for k, v in client_config(cluster, paths, "mallory").items() if k != "bootstrap.servers"}
    security = ClientSecurity.from_properties(mallory)

    async def replay(port: int) -> list[int]:
        async with KafkaConnection("127.0.0.1", port, request_timeout_ms=10000, security=security) as conn:
            answers = [await conn.send(leader_and_isr_replay(conn, topic))]
            answers.append(await conn.send(update_metadata_replay(conn, topic)))
        return [a.error_code for a in answers]

    for broker in cluster.brokers.values():
        assert asyncio.run(replay(broker.port)) == [ErrorCode.cluster_authorization_failed] * 2

    after = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    assert (after.leader, sorted(after.isrs)) == (before.leader, sorted(before.isrs))
    assert len(after.isrs) == 3
    assert consume_values(config, topic, 20, "secure-check", 40) == {f"r{i}".encode() for i in range(20)}
    # mallory may do nothing with alice's topic either
    refused = AdminClient(client_config(cluster, paths, "mallory")).list_topics(topic, timeout=10).topics[topic]
    assert refused.error is not None
