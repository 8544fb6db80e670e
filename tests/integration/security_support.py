"""A broker with every kind of listener, certificates made at test time, and client settings.

``secure_broker(tmp)`` starts one in-process broker (embedded store) with the listeners:

- ``PLAINTEXT`` (inter-broker), ``SSL`` (server certificate only), ``MTLS`` (SSL with
  ``ssl.client.auth=required``), ``SASL_PLAINTEXT`` and ``SASL_SSL`` (PLAIN, SCRAM-SHA-256 and
  SCRAM-SHA-512; PLAIN users ``alice``/``alice-secret`` and ``admin``/``admin-secret`` from the
  listener's JAAS; SCRAM users written to ``/config/users`` through the credential functions),
  ``REAUTH`` (SASL_PLAINTEXT whose sessions last ``REAUTH_MS``, KIP-368).

For clusters on ZooKeeper: :func:`sasl_ssl_cluster_overrides` (SASL_SSL only, SCRAM between
brokers, ACLs), users and ACLs written with the CLI before any broker runs
(:func:`add_scram_user_zk`, :func:`grant_prefixed_zk`), and :func:`consume_values`.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer

from odradek.metadata.authorizer import ACL_AUTHORIZER_CLASS
from odradek.metadata.scram_credentials import upsert_password_credentials
from odradek.testing import BrokerRunner
from unit import security_support as certs

from .cli_support import odradek_ok

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_USERS = {"scram-user": "scram-secret", "admin": "admin-secret"}
BROKER_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";'
)
"""The inter-broker login of :func:`sasl_ssl_cluster_overrides`: SCRAM-SHA-512 user ``broker``."""
LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL", "REAUTH")
REAUTH_MS = 1500


def write_certificates(directory: pathlib.Path) -> dict[str, str]:
    """PEM files: the broker's key store (key and chain), the CA, and a client's key store."""
    directory.mkdir(parents=True, exist_ok=True)
    server, client, ca = certs.server(), certs.client("alice"), certs.ca()
    files = {
        "server": server.key_pem() + server.cert_pem() + ca.cert_pem(),
        "ca": ca.cert_pem(),
        "client_key": client.key_pem(),
        "client_cert": client.cert_pem(),
        "client_keystore": client.key_pem() + client.cert_pem(),
    }
    paths = {}
    for name, text in files.items():
        path = directory / f"{name}.pem"
        path.write_text(text)
        paths[name] = str(path)
    return paths


def broker_overrides(paths: Mapping[str, str], **extra: str) -> dict[str, str]:
    listeners = ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS)
    return {
        "listeners": listeners,
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT"
        ),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": paths["server"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": paths["ca"],
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.reauth.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "connection.failed.authentication.delay.ms": "100",
        **extra,
    }


def create_scram_users(runner: BrokerRunner, users: Mapping[str, str]) -> None:
    """Write SCRAM-SHA-256 and -512 credentials and wait until the broker's cache has them."""
    broker = runner.broker
    assert broker is not None and broker.store is not None
    store = broker.store
    for user, password in users.items():

        async def write(user: str = user, password: str = password) -> None:
            await upsert_password_credentials(
                store, user, {"SCRAM-SHA-256": (password, 4096), "SCRAM-SHA-512": (password, 4096)}
            )

        runner.call(write)
    deadline = time.monotonic() + 10
    while not set(users) <= set(broker.credential_cache.users()):
        assert time.monotonic() < deadline, "the broker did not learn the SCRAM users"
        time.sleep(0.05)


def address(runner: BrokerRunner, listener: str) -> str:
    broker = runner.broker
    assert broker is not None
    (endpoint,) = [e for e in broker.endpoints if e.listener == listener]
    return f"{endpoint.host}:{endpoint.port}"


def librdkafka_config(
    runner: BrokerRunner,
    listener: str,
    paths: Mapping[str, str],
    *,
    mechanism: str = "PLAIN",
    username: str = "alice",
    password: str = "alice-secret",
) -> dict[str, str]:
    """confluent-kafka / kcat settings for one of the broker's listeners."""
    protocol = {"MTLS": "SSL", "REAUTH": "SASL_PLAINTEXT"}.get(listener, listener)
    config = {"bootstrap.servers": address(runner, listener), "security.protocol": protocol}
    if "SSL" in protocol:
        config["ssl.ca.location"] = paths["ca"]
    if listener == "MTLS":
        config["ssl.certificate.location"] = paths["client_cert"]
        config["ssl.key.location"] = paths["client_key"]
    if protocol.startswith("SASL"):
        config.update({"sasl.mechanism": mechanism, "sasl.username": username, "sasl.password": password})
    return config


async def raw_exchange(host: str, port: int, payload: bytes, *, read_timeout: float = 5.0) -> bytes:
    """Send ``payload`` on a plain TCP connection and read until the broker closes it."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), read_timeout)
    finally:
        writer.close()


@contextlib.contextmanager
def secure_broker(directory: str, paths: Mapping[str, str], **extra: str) -> Iterator[BrokerRunner]:
    """A running broker with :func:`broker_overrides` (and ``extra``) and the :data:`SCRAM_USERS`."""
    runner = BrokerRunner(directory, broker_overrides(paths, **extra)).start()
    try:
        create_scram_users(runner, SCRAM_USERS)
        yield runner
    finally:
        runner.stop()


def sasl_ssl_cluster_overrides(paths: Mapping[str, str]) -> dict[str, str]:
    """A cluster broker's config whose only listener, inter-broker included, is SASL_SSL with
    SCRAM-SHA-256 and -512 (the brokers log in as :data:`BROKER_JAAS`'s ``broker`` with
    SCRAM-SHA-512), PEM key and trust stores from :func:`write_certificates`, Kafka's AclAuthorizer
    and ``super.users=User:broker``. The ``{port}`` of
    ``listeners`` is filled in by the cluster fixture."""
    return {
        "listeners": "SASL_SSL://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": paths["server"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": paths["ca"],
        "authorizer.class.name": ACL_AUTHORIZER_CLASS,
        "super.users": "User:broker",
    }


def add_scram_user_zk(connect: str, user: str, password: str, mechanisms: Sequence[str]) -> None:
    """``odradek configs --zookeeper connect`` adding ``user``'s credentials for each of
    ``mechanisms`` (SCRAM-SHA-256 / -512) with ``password``, as Kafka's tool allows before any
    broker runs."""
    odradek_ok(
        "configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name", user,
        "--add-config", ",".join(f"{mechanism}=[password={password}]" for mechanism in mechanisms),
    )  # fmt: skip


def grant_prefixed_zk(connect: str, user: str, prefix: str) -> None:
    """``odradek acls --authorizer-properties zookeeper.connect=connect`` granting ``User:user``
    All on the topics and groups whose names start with ``prefix``, and Create on the cluster."""
    acls = ("acls", "--authorizer-properties", f"zookeeper.connect={connect}", "--add")
    acls += ("--allow-principal", f"User:{user}")
    prefixed = ("--topic", prefix, "--group", prefix, "--resource-pattern-type", "prefixed")
    odradek_ok(*acls, "--operation", "All", *prefixed)
    odradek_ok(*acls, "--operation", "Create", "--cluster")


def seed_sasl_ssl_cluster(
    connect: str, users: Sequence[str], mechanisms: Sequence[str], *, granted: str, prefix: str
) -> None:
    """Before a :func:`sasl_ssl_cluster_overrides` cluster starts on ``connect``: the brokers' own
    ``broker`` SCRAM-SHA-512 credential, each of ``users`` with password ``<user>-secret`` for each
    of ``mechanisms``, and :func:`grant_prefixed_zk` of ``prefix`` to ``granted``."""
    add_scram_user_zk(connect, "broker", "broker-secret", ["SCRAM-SHA-512"])
    for user in users:
        add_scram_user_zk(connect, user, f"{user}-secret", mechanisms)
    grant_prefixed_zk(connect, granted, prefix)


def consume_values(config: Mapping[str, Any], topic: str, count: int, group: str, timeout_s: float) -> set[bytes]:
    """The distinct non-null values a confluent-kafka consumer in ``group`` (from the earliest
    offsets) reads from ``topic`` until it has ``count`` of them or ``timeout_s`` pass."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error() and message.value() is not None:
                values.add(message.value())  # type: ignore[arg-type]
    finally:
        consumer.close()
    return values


def kafka_python_oauthbearer_send(
    bootstrap: str, topic: str, value: bytes, token: Callable[[], str], extensions: Mapping[str, str] | None = None
) -> None:
    """Produce ``value`` to ``topic`` with kafka-python over SASL_PLAINTEXT/OAUTHBEARER, its token
    provider answering ``token()`` (and ``extensions``, KIP-342, when given); waits up to 15 s for
    the acknowledgement. The caller skips the test when kafka-python is missing."""
    import kafka

    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider
    except ImportError:  # kafka-python 2
        from kafka.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return token()

        def extensions(self) -> dict[str, str]:
            return dict(extensions or {})

    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider(),
    )
    try:
        producer.send(topic, value).get(timeout=15)
    finally:
        producer.close()
