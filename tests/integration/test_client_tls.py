"""odradek's client over real TLS sockets: a small SASL listener (the real server mechanisms behind
an asyncio TLS server on 127.0.0.1) with certificates made at test time."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from odradek.client.connection import KafkaConnection
from odradek.client.errors import KafkaAuthenticationError, KafkaConnectionError
from odradek.client.security import ClientSecurity
from odradek.protocol.api_keys import ApiKey
from odradek.security.tls import create_ssl_context
from unit import security_support as certs
from unit.sasl_fake_broker import FakeSaslBroker

USERS = {"alice": "alice-secret"}


def write(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def server_context(tmp_path: pathlib.Path, identity: certs.Identity | None = None) -> Any:
    identity = identity or certs.server()
    return create_ssl_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": write(tmp_path / "server.pem", identity.key_pem() + identity.cert_pem()),
        },
        server_side=True,
    )


def client_security(tmp_path: pathlib.Path, protocol: str, **extra: str) -> ClientSecurity:
    props = {
        "security.protocol": protocol,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": write(tmp_path / "ca.pem", certs.ca().cert_pem()),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'
        ),
    }
    return ClientSecurity.from_properties({**props, **extra})


@asynccontextmanager
async def listener(context: Any, brokers: list[FakeSaslBroker]) -> AsyncIterator[int]:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        broker = FakeSaslBroker(USERS)
        brokers.append(broker)
        await broker.serve(reader, writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def run(context: Any, security: ClientSecurity, host: str = "127.0.0.1") -> list[FakeSaslBroker]:
    brokers: list[FakeSaslBroker] = []

    async def main() -> None:
        async with (
            listener(context, brokers) as port,
            KafkaConnection(host, port, security=security, connect_timeout_ms=5000) as conn,
        ):
            assert ApiKey.SASL_HANDSHAKE in conn.api_versions

    asyncio.run(main())
    return brokers


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_ssl_checks_the_brokers_certificate_against_the_host(tmp_path: pathlib.Path, host: str) -> None:
    (broker,) = run(server_context(tmp_path), client_security(tmp_path, "SSL"), host)
    assert broker.seen == [(ApiKey.API_VERSIONS, 3)] and broker.authenticated is None


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_ssl_authenticates(tmp_path: pathlib.Path, mechanism: str) -> None:
    (broker,) = run(server_context(tmp_path), client_security(tmp_path, "SASL_SSL", **{"sasl.mechanism": mechanism}))
    assert broker.authenticated == "alice"


def test_wrong_password_over_tls(tmp_path: pathlib.Path) -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="nope";'
    security = client_security(tmp_path, "SASL_SSL", **{"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas})
    with pytest.raises(KafkaAuthenticationError, match="Invalid username or password"):
        run(server_context(tmp_path), security)


def untrusted(tmp_path: pathlib.Path) -> ClientSecurity:
    return client_security(
        tmp_path, "SSL", **{"ssl.truststore.location": write(tmp_path / "other.pem", certs.other_ca().cert_pem())}
    )


def no_san(tmp_path: pathlib.Path) -> Any:
    return server_context(tmp_path, certs.client("broker-without-san"))


@pytest.mark.parametrize(
    ("context", "security", "message"),
    [
        (server_context, untrusted, "certificate was refused"),
        (no_san, lambda p: client_security(p, "SSL"), "certificate was refused"),
    ],
)
def test_refused_certificates(
    tmp_path: pathlib.Path,
    context: Callable[[pathlib.Path], Any],
    security: Callable[[pathlib.Path], ClientSecurity],
    message: str,
) -> None:
    with pytest.raises(KafkaConnectionError, match=message):
        run(context(tmp_path), security(tmp_path))


def test_endpoint_identification_off_accepts_a_certificate_without_the_host(tmp_path: pathlib.Path) -> None:
    security = client_security(tmp_path, "SSL", **{"ssl.endpoint.identification.algorithm": ""})
    (broker,) = run(no_san(tmp_path), security)
    assert broker.seen == [(ApiKey.API_VERSIONS, 3)]


def test_tls_client_on_a_plaintext_port(tmp_path: pathlib.Path) -> None:
    with pytest.raises(KafkaConnectionError, match=r"TLS handshake with 127\.0\.0\.1:[0-9]+ failed"):
        run(None, client_security(tmp_path, "SSL"))


def test_plaintext_client_on_a_tls_port(tmp_path: pathlib.Path) -> None:
    with pytest.raises(KafkaConnectionError, match="is it a TLS listener"):
        run(server_context(tmp_path), ClientSecurity())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_spark_source_options_authenticate_librdkafka(tmp_path: pathlib.Path, mechanism: str) -> None:
    """Java's client keys as a Spark job sets them, translated for confluent-kafka: librdkafka
    verifies the listener's certificate and logs in with the JAAS user."""
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    from odradek.spark.driver import client_config
    from odradek.spark.options import parse_source_options

    brokers: list[FakeSaslBroker] = []
    jaas = f"{'plain.PlainLoginModule' if mechanism == 'PLAIN' else 'scram.ScramLoginModule'}"

    async def main() -> None:
        async with listener(server_context(tmp_path), brokers) as port:
            options = {
                "kafka.bootstrap.servers": f"localhost:{port}",
                "subscribe": "t",
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": mechanism,
                "kafka.sasl.jaas.config": (
                    f'org.apache.kafka.common.security.{jaas} required username="alice" password="alice-secret";'
                ),
                "kafka.ssl.truststore.type": "PEM",
                "kafka.ssl.truststore.location": write(tmp_path / "ca.pem", certs.ca().cert_pem()),
            }
            conf = client_config(parse_source_options(options, "batch").client, "admin")
            admin = confluent_admin.AdminClient(conf)
            for _ in range(100):
                if any(b.authenticated for b in brokers):
                    break
                with contextlib.suppress(Exception):  # the listener answers nothing after the login
                    await asyncio.to_thread(admin.list_topics, timeout=0.2)

    asyncio.run(main())
    assert [b.authenticated for b in brokers if b.authenticated] and all(
        b.authenticated in (None, "alice") for b in brokers
    )
