"""Brokers logging in to each other with OAUTHBEARER.

- Two broker processes on a real ZooKeeper whose only listener, inter-broker included, is
  SASL_PLAINTEXT with OAUTHBEARER validated against an OpenID Connect issuer's JWKS (https). Each
  broker logs in with KIP-768's ``OAuthBearerLoginCallbackHandler``: the client-credentials grant
  at the issuer's token endpoint (``clientId``/``clientSecret``/``scope`` JAAS options, TLS trusted
  through the JAAS ``ssl.truststore.*`` options). The issuer's tokens live 4 s and the
  ``sasl.login.refresh.*`` keys refresh them after half their life, so the brokers' own sessions
  (bounded by the token, KIP-368) are re-authenticated with fresh tokens while replication goes
  on; ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` (``KAFKA_OPTS``) names the two URLs.
  The brokers run Kafka's AclAuthorizer with ``super.users=User:svc-broker`` (the subject of the
  brokers' tokens), so every controller request and fetch is authorized as that principal. A
  replicated topic gets its full ISR, serves acks=all writes, and survives a kill -9 and restart.
- One in-process broker whose inter-broker login is KIP-255's unsecured token
  (``unsecuredLoginStringClaim_sub``): its controller reaches it and topics are served.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.metadata.authorizer import ACL_AUTHORIZER_CLASS
from odradek.server.runner import BrokerRunner
from odradek.testing import LocalCluster
from odradek.testing_oidc import OidcIssuer, oidc_issuer
from odradek.testing_zk import ZooKeeperServer

from .oidc_support import LOGIN_HANDLER, LOGIN_MODULE, VALIDATOR
from .security_support import address, consume_values, write_certificates

pytestmark = pytest.mark.zookeeper

TOKEN_LIFETIME_S = 4


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("inter-broker-oidc-certs"))


@pytest.fixture(scope="module")
def issuer(certificates: dict[str, str]) -> Iterator[OidcIssuer]:
    with oidc_issuer(certificates["server"]) as issuer:
        issuer.register("broker", "broker-secret", subject="svc-broker", lifetime_s=TOKEN_LIFETIME_S)
        issuer.register("app", "app-secret")  # the clients' tokens live the issuer's default 300 s
        yield issuer


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperServer,
    odradek_cluster_module: Callable[..., LocalCluster],
    issuer: OidcIssuer,
    certificates: dict[str, str],
) -> Iterator[LocalCluster]:
    trust = f'ssl.truststore.type="PEM" ssl.truststore.location="{certificates["ca"]}"'
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
            f'{LOGIN_MODULE} required clientId="broker" clientSecret="broker-secret" scope="kafka" {trust};'
        ),
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.sasl_plaintext.oauthbearer.sasl.login.callback.handler.class": LOGIN_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
        "sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
        "sasl.oauthbearer.expected.audience": issuer.audience,
        "sasl.oauthbearer.expected.issuer": issuer.url,
        "sasl.oauthbearer.clock.skew.seconds": "0",
        "sasl.login.refresh.window.factor": "0.5",
        "sasl.login.refresh.window.jitter": "0.0",
        "sasl.login.refresh.min.period.seconds": "1",
        "sasl.login.refresh.buffer.seconds": "1",
        # the controller's and fetchers' requests are authorized as the token's subject
        "authorizer.class.name": ACL_AUTHORIZER_CLASS,
        "super.users": "User:svc-broker;User:app",
    }
    allowed = f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={issuer.token_url},{issuer.jwks_url}"
    saved = os.environ.get("KAFKA_OPTS")
    os.environ["KAFKA_OPTS"] = allowed  # the broker processes inherit it
    try:
        connect = f"{zookeeper_server.connect_string}/oauth-{uuid.uuid4().hex[:8]}"
        yield odradek_cluster_module(brokers=2, overrides=overrides, zookeeper_connect=connect)
    finally:
        if saved is None:
            os.environ.pop("KAFKA_OPTS", None)
        else:
            os.environ["KAFKA_OPTS"] = saved


def client_config(cluster: LocalCluster, issuer: OidcIssuer, ca: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "app",
        "sasl.oauthbearer.client.secret": "app-secret",
        "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
        "https.ca.location": ca,
    }


def broker_tokens(issuer: OidcIssuer) -> int:
    return sum(1 for claims in issuer.issued if claims["sub"] == "svc-broker")


def full_isr(admin: AdminClient, topic: str, partitions: int) -> Callable[[], bool]:
    def check() -> bool:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        return len(described.partitions) == partitions and all(
            len(p.isrs) == 2 and p.leader >= 0 for p in described.partitions.values()
        )

    return check


def produce(config: dict[str, Any], topic: str, values: list[bytes]) -> None:
    producer = Producer({**config, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def test_brokers_replicate_with_refreshed_oauthbearer_tokens(
    cluster: LocalCluster, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    config = client_config(cluster, issuer, certificates["ca"])
    admin = AdminClient(config)
    admin.create_topics([NewTopic("replicated", num_partitions=2, replication_factor=2)])["replicated"].result(30)
    cluster.wait_until(full_isr(admin, "replicated", 2), 30)
    produce(config, "replicated", [f"a{i}".encode() for i in range(50)])
    first = broker_tokens(issuer)
    assert first >= 2  # each broker logged in at the token endpoint
    # outlive two token lifetimes: the brokers refresh their tokens and re-authenticate their sessions
    cluster.wait_until(lambda: broker_tokens(issuer) >= first + 4, 4 * TOKEN_LIFETIME_S)
    produce(config, "replicated", [f"b{i}".encode() for i in range(50)])
    assert full_isr(admin, "replicated", 2)()
    wanted = {f"{p}{i}".encode() for p in "ab" for i in range(50)}
    assert consume_values(config, "replicated", 100, "oidc-check", 30) == wanted
    for broker_id in cluster.alive_ids():
        log = cluster.broker(broker_id).log_path.read_text(errors="replace")
        assert "Failed authentication" not in log, log[-3000:]
        # sessions ended by their tokens were re-authenticated on their connections, not closed
        assert "closed by the broker" not in log, log[-3000:]


def test_kill_and_restart_of_a_broker_logs_in_again(
    cluster: LocalCluster, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    config = client_config(cluster, issuer, certificates["ca"])
    admin = AdminClient(config)
    admin.create_topics([NewTopic("survivor", num_partitions=1, replication_factor=2)])["survivor"].result(30)
    cluster.wait_until(full_isr(admin, "survivor", 1), 30)
    victim = max(cluster.alive_ids())
    cluster.kill9(victim)
    produce(config, "survivor", [b"while-down"])  # the other broker leads with ISR 1
    before = broker_tokens(issuer)
    cluster.restart(victim)
    cluster.wait_until(full_isr(admin, "survivor", 1), 30)
    assert broker_tokens(issuer) > before
    produce(config, "survivor", [b"after-restart"])
    assert consume_values(config, "survivor", 2, "survivor-check", 30) == {b"while-down", b"after-restart"}


@pytest.fixture(scope="module")
def unsecured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(
        str(tmp_path_factory.mktemp("unsecured-inter-broker")),
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="broker" '
                'unsecuredLoginListClaim_scope=",kafka" unsecuredValidatorRequiredScope="kafka";'
            ),
            "offsets.topic.replication.factor": "1",
        },
    ).start()
    try:
        yield runner
    finally:
        runner.stop()


def test_unsecured_inter_broker_login(unsecured_broker: BrokerRunner) -> None:
    config = {
        "bootstrap.servers": address(unsecured_broker, "SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=app scope=kafka",
    }
    admin = AdminClient(config)
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(20)
    produce(config, "plain", [b"x"])  # served only once the controller's LeaderAndIsr reached the broker
    assert consume_values(config, "plain", 1, "g", 30) == {b"x"}
