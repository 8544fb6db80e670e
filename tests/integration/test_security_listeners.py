"""Named listeners with every security protocol, against real clients and raw bytes.

One broker for the module (listeners PLAINTEXT, SSL, MTLS, SASL_PLAINTEXT, SASL_SSL; see
``security_support``): produce and consume over TLS and SASL (PLAIN, SCRAM-SHA-256/512) with
confluent-kafka, kafka-python, aiokafka and kcat; mutual TLS and the certificate's principal;
Metadata per listener (KIP-103) and the registration's endpoints; refusals (wrong password,
unknown mechanism, a request before authentication, plaintext on a TLS port, an oversized
token), each one log line with the broker still serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from odradek.errors import ErrorCode
from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build
from odradek.testing import BrokerRunner

from .security_support import (
    LISTENERS,
    REAUTH_MS,
    SCRAM_USERS,
    address,
    broker_overrides,
    create_scram_users,
    librdkafka_config,
    raw_exchange,
    write_certificates,
)

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, paths: dict[str, str]) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("secure-broker")), broker_overrides(paths)).start()
    try:
        create_scram_users(runner, SCRAM_USERS)
        yield runner
    finally:
        runner.stop()


def produce_consume(config: dict[str, str], count: int = 20) -> list[bytes]:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "linger.ms": "5"})
    for i in range(count):
        producer.produce(topic, f"value-{i}".encode(), key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            value = message.value()
            assert value is not None
            values.append(value)
    finally:
        consumer.close()
    return values


def _logged(caplog: pytest.LogCaptureFixture, text: str, count: int = 1, timeout_s: float = 5.0) -> int:
    """How many captured records contain ``text``, waiting up to ``timeout_s`` for ``count`` of them:
    the broker's thread may log a refusal just after the client saw the connection close."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = sum(text in r.getMessage() for r in caplog.records)
        if found >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("listener", "mechanism", "username", "password"),
    [
        ("SSL", "", "", ""),
        ("MTLS", "", "", ""),
        ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
        ("SASL_SSL", "PLAIN", "alice", "alice-secret"),
        ("SASL_SSL", "SCRAM-SHA-256", "scram-user", "scram-secret"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", "scram-user", "scram-secret"),
        ("SASL_SSL", "SCRAM-SHA-512", "admin", "admin-secret"),
    ],
)
def test_confluent_produce_consume(
    broker: BrokerRunner, paths: dict[str, str], listener: str, mechanism: str, username: str, password: str
) -> None:
    config = librdkafka_config(broker, listener, paths, mechanism=mechanism, username=username, password=password)
    assert produce_consume(config) == [f"value-{i}".encode() for i in range(20)]


def test_metadata_answers_with_the_listener_of_the_connection(broker: BrokerRunner, paths: dict[str, str]) -> None:
    for listener in ("PLAINTEXT", "SSL", "SASL_SSL"):
        admin = AdminClient(librdkafka_config(broker, listener, paths))
        metadata = admin.list_topics(timeout=15)
        (node,) = metadata.brokers.values()
        assert f"{node.host}:{node.port}" == address(broker, listener)


def test_registration_lists_every_endpoint(broker: BrokerRunner) -> None:
    assert broker.broker is not None and broker.broker.store is not None
    store = broker.broker.store

    async def read() -> bytes:
        data, _ = await store.get("/brokers/ids/0")
        return bytes(data)

    registration = json.loads(broker.call(read))
    assert registration["endpoints"] == [f"{n}://{address(broker, n)}" for n in LISTENERS]
    assert registration["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "SSL": "SSL",
        "MTLS": "SSL",
        "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SASL_SSL": "SASL_SSL",
        "REAUTH": "SASL_PLAINTEXT",
    }
    host, port = address(broker, "PLAINTEXT").rsplit(":", 1)
    assert (registration["host"], registration["port"]) == (host, int(port))


def _sessions(broker: BrokerRunner, listener: str, config: dict[str, str]) -> list[Any]:
    """The sessions of the broker's connections on ``listener`` while a client of ``config`` is
    connected (librdkafka may drop and reopen connections: asked again until one is seen)."""
    assert broker.broker is not None
    server = broker.broker.socket_server

    async def sessions() -> list[Any]:
        return [c.session for c in server.connections if c.security.listener_name == listener and c.session]

    admin = AdminClient(config)
    for _ in range(20):
        admin.list_topics(timeout=15)
        found = broker.call(sessions)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no connection on {listener}")


def test_mutual_tls_principal_is_the_certificate_subject(broker: BrokerRunner, paths: dict[str, str]) -> None:
    sessions = _sessions(broker, "MTLS", librdkafka_config(broker, "MTLS", paths))
    assert {str(s.principal) for s in sessions} == {"User:CN=alice,OU=eng,O=Acme,C=US"}
    assert {s.security_protocol for s in sessions} == {"SSL"}


def test_sasl_principal_and_mechanism(broker: BrokerRunner, paths: dict[str, str]) -> None:
    config = librdkafka_config(
        broker, "SASL_SSL", paths, mechanism="SCRAM-SHA-256", username="scram-user", password="scram-secret"
    )
    sessions = _sessions(broker, "SASL_SSL", config)
    assert ("User:scram-user", "SCRAM-SHA-256") in {(str(s.principal), s.sasl_mechanism) for s in sessions}


def test_mutual_tls_without_a_client_certificate_is_refused(
    broker: BrokerRunner, paths: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    config = librdkafka_config(broker, "SSL", paths)
    config["bootstrap.servers"] = address(broker, "MTLS")
    with caplog.at_level(logging.WARNING, logger="odradek.server.socket_server"), pytest.raises(KafkaException):
        AdminClient(config).list_topics(timeout=3)
    assert _logged(caplog, "TLS handshake failed")


@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_SSL", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256")])
def test_wrong_password_is_refused_with_one_log_line(
    broker: BrokerRunner, paths: dict[str, str], caplog: pytest.LogCaptureFixture, listener: str, mechanism: str
) -> None:
    user = "alice" if mechanism == "PLAIN" else "scram-user"
    config = librdkafka_config(broker, listener, paths, mechanism=mechanism, username=user, password="wrong")
    errors: list[str] = []
    config["error_cb"] = lambda err: errors.append(str(err))  # type: ignore[assignment]
    with caplog.at_level(logging.INFO, logger="odradek.server.socket_server"):
        producer = Producer(config)
        producer.poll(3)
    assert any("Authentication failed" in e or "SASL authentication error" in e for e in errors), errors
    failures = [r for r in caplog.records if r.getMessage().startswith("Failed authentication with")]
    assert failures, caplog.text
    if mechanism == "PLAIN":
        assert any("Invalid username or password" in e for e in errors), errors
    # the broker keeps serving
    good = librdkafka_config(broker, listener, paths, mechanism="PLAIN", username="alice", password="alice-secret")
    assert AdminClient(good).list_topics(timeout=15).brokers


# --- raw bytes ---------------------------------------------------------------------------------


def _request(api_key: int, version: int, correlation_id: int = 1, **fields: Any) -> bytes:
    schema = api_schema(api_key, version)
    return encode_request(schema, correlation_id, "raw", build(schema.request_type, **fields))


def _frames(data: bytes) -> list[bytes]:
    out = []
    while len(data) >= 4:
        (size,) = struct.unpack_from(">i", data)
        out.append(data[4 : 4 + size])
        data = data[4 + size :]
    return out


def _host_port(broker: BrokerRunner, listener: str) -> tuple[str, int]:
    host, port = address(broker, listener).rsplit(":", 1)
    return host, int(port)


def test_request_before_authentication_closes_the_connection(
    broker: BrokerRunner, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = _host_port(broker, "SASL_PLAINTEXT")
    payload = _request(18, 3, 1, client_software_name="raw", client_software_version="1") + _request(
        3, 1, 2, topics=None
    )
    with caplog.at_level(logging.WARNING, logger="odradek.server.socket_server"):
        answer = asyncio.run(raw_exchange(host, port, payload))
    frames = _frames(answer)
    assert len(frames) == 1  # ApiVersions answered, Metadata not: closed
    correlation_id, versions = decode_response(18, 3, frames[0])
    assert correlation_id == 1 and {k.api_key for k in versions.api_keys} >= {17, 36}
    assert _logged(caplog, "Unexpected Kafka request of type METADATA during SASL handshake")


def test_unknown_mechanism_lists_the_enabled_ones(broker: BrokerRunner) -> None:
    host, port = _host_port(broker, "SASL_PLAINTEXT")
    answer = asyncio.run(raw_exchange(host, port, _request(17, 1, 7, mechanism="GSSAPI")))
    (frame,) = _frames(answer)
    correlation_id, response = decode_response(17, 1, frame)
    assert correlation_id == 7
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_legacy_v0_flow_with_raw_tokens(broker: BrokerRunner) -> None:
    host, port = _host_port(broker, "SASL_PLAINTEXT")

    async def exchange() -> tuple[bytes, bytes, bytes]:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(_request(17, 0, 1, mechanism="PLAIN"))
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            handshake = await reader.readexactly(size)
            token = b"\0alice\0alice-secret"
            writer.write(struct.pack(">i", len(token)) + token)
            challenge = await reader.readexactly(4)  # an empty raw challenge
            writer.write(_request(3, 1, 2, topics=None))
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            return handshake, challenge, await reader.readexactly(size)
        finally:
            writer.close()

    handshake, challenge, metadata = asyncio.run(exchange())
    assert decode_response(17, 0, handshake)[1].error_code == ErrorCode.none
    assert challenge == b"\0\0\0\0"
    assert decode_response(3, 1, metadata)[0] == 2


def test_kip152_flow_then_sasl_requests_after_authentication(broker: BrokerRunner) -> None:
    host, port = _host_port(broker, "SASL_PLAINTEXT")

    async def exchange() -> list[bytes]:
        reader, writer = await asyncio.open_connection(host, port)
        frames = []
        try:
            for request in (
                _request(17, 1, 1, mechanism="PLAIN"),
                _request(36, 2, 2, auth_bytes=b"\0alice\0alice-secret"),
                _request(36, 2, 3, auth_bytes=b"\0alice\0alice-secret"),
            ):
                writer.write(request)
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frames.append(await reader.readexactly(size))
            return frames
        finally:
            writer.close()

    handshake, authenticated, again = asyncio.run(exchange())
    assert decode_response(17, 1, handshake)[1].error_code == ErrorCode.none
    first = decode_response(36, 2, authenticated)[1]
    assert first.error_code == ErrorCode.none and first.auth_bytes == b""
    second = decode_response(36, 2, again)[1]
    assert second.error_code == ErrorCode.illegal_sasl_state
    assert second.error_message == "SaslAuthenticate request received after successful authentication"


def test_wrong_password_answer_is_delayed_and_kafkas(broker: BrokerRunner) -> None:
    host, port = _host_port(broker, "SASL_PLAINTEXT")
    payload = _request(17, 1, 1, mechanism="PLAIN") + _request(36, 1, 2, auth_bytes=b"\0alice\0nope")
    started = time.monotonic()
    frames = _frames(asyncio.run(raw_exchange(host, port, payload)))
    assert time.monotonic() - started >= 0.09  # connection.failed.authentication.delay.ms=100
    response = decode_response(36, 1, frames[1])[1]
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == "Authentication failed: Invalid username or password"


def test_oversized_token_closes_the_connection(broker: BrokerRunner, caplog: pytest.LogCaptureFixture) -> None:
    host, port = _host_port(broker, "SASL_PLAINTEXT")
    oversized = _request(17, 1, 1, mechanism="PLAIN") + struct.pack(">i", 524289 + 100) + b"\0" * 1024
    with caplog.at_level(logging.WARNING, logger="odradek.server.socket_server"):
        frames = _frames(asyncio.run(raw_exchange(host, port, oversized)))
    assert len(frames) <= 1  # at most the handshake's answer (both may arrive in one read), then closed
    assert _logged(caplog, "larger than sasl.server.max.receive.size=524288"), caplog.text


def test_plaintext_and_garbage_on_a_tls_port(
    broker: BrokerRunner, paths: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    host, port = _host_port(broker, "SSL")
    with caplog.at_level(logging.WARNING, logger="odradek.server.socket_server"):
        for payload in (_request(18, 0, 1), b"GET / HTTP/1.1\r\n\r\n", bytes(range(256)) * 8):
            assert asyncio.run(raw_exchange(host, port, payload)) == b""

    assert _logged(caplog, "TLS handshake failed", count=3) == 3
    assert AdminClient(librdkafka_config(broker, "SSL", paths)).list_topics(timeout=15).brokers


def test_tls_with_python_ssl_needs_a_matching_san(broker: BrokerRunner, paths: dict[str, str]) -> None:
    host, port = _host_port(broker, "SSL")

    async def connect(server_hostname: str) -> None:
        context = ssl.create_default_context(cafile=paths["ca"])
        _, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=server_hostname)
        writer.close()

    asyncio.run(connect("127.0.0.1"))
    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(connect("broker.example.com"))


def test_kafka_python_scram_over_sasl_ssl(broker: BrokerRunner, paths: dict[str, str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    settings: dict[str, Any] = {
        "bootstrap_servers": address(broker, "SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": paths["ca"],
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "scram-user",
        "sasl_plain_password": "scram-secret",
    }
    producer = KafkaProducer(**settings)
    for i in range(10):
        producer.send("kp-scram", f"m{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kp-scram", auto_offset_reset="earliest", consumer_timeout_ms=5000, **settings)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [f"m{i}".encode() for i in range(10)]


def test_aiokafka_over_mutual_tls(broker: BrokerRunner, paths: dict[str, str]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        context = ssl.create_default_context(cafile=paths["ca"])
        context.load_cert_chain(paths["client_cert"], paths["client_key"])
        settings: dict[str, Any] = {
            "bootstrap_servers": address(broker, "MTLS"),
            "security_protocol": "SSL",
            "ssl_context": context,
        }
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait("aio-mtls", f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio-mtls", auto_offset_reset="earliest", **settings)
        await consumer.start()
        try:
            values: list[bytes] = []
            while len(values) < 10:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                values += [m.value for messages in batch.values() for m in messages if m.value is not None]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(10)]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize(
    ("listener", "mechanism", "username", "password", "topic"),
    [
        ("SASL_SSL", "PLAIN", "alice", "alice-secret", "kc-sasl"),
        # librdkafka before 2.6.1 (Debian bookworm's kcat: 2.0.2) repeats its client nonce in the
        # final SCRAM message, which Kafka 3.9 accepts
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "scram-user", "scram-secret", "kc-scram-256"),
        ("SASL_SSL", "SCRAM-SHA-512", "scram-user", "scram-secret", "kc-scram-512"),
    ],
)
def test_kcat_over_sasl(
    broker: BrokerRunner, paths: dict[str, str], listener: str, mechanism: str, username: str, password: str, topic: str
) -> None:
    assert KCAT is not None
    config = librdkafka_config(broker, listener, paths, mechanism=mechanism, username=username, password=password)
    options = [arg for key, value in config.items() if key != "bootstrap.servers" for arg in ("-X", f"{key}={value}")]
    base = [KCAT, "-b", config["bootstrap.servers"], *options]

    def kcat(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run([*base, *args], input=stdin, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    kcat("-P", "-t", topic, stdin="one\ntwo\nthree\n")
    assert kcat("-C", "-t", topic, "-e", "-o", "beginning").split() == ["one", "two", "three"]


def test_reauthentication_keeps_a_producer_going(broker: BrokerRunner, paths: dict[str, str]) -> None:
    producer = Producer({**librdkafka_config(broker, "REAUTH", paths), "linger.ms": "5"})
    delivered: list[bool] = []
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    count = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x", on_delivery=lambda err, _msg: delivered.append(err is None))
        count += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0
    assert delivered == [True] * count


def test_expired_session_closes_the_connection(broker: BrokerRunner, caplog: pytest.LogCaptureFixture) -> None:
    host, port = _host_port(broker, "REAUTH")

    async def exchange() -> tuple[bytes, bytes]:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(_request(17, 1, 1, mechanism="PLAIN"))
            await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            writer.write(_request(36, 1, 2, auth_bytes=b"\0alice\0alice-secret"))
            authenticated = await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            await asyncio.sleep(REAUTH_MS / 1000 + 0.3)
            writer.write(_request(3, 1, 3, topics=None))
            return authenticated, await asyncio.wait_for(reader.read(), 5)
        finally:
            writer.close()

    with caplog.at_level(logging.WARNING, logger="odradek.server.socket_server"):
        authenticated, after = asyncio.run(exchange())
    response = decode_response(36, 1, authenticated)[1]
    assert response.error_code == ErrorCode.none
    assert response.session_lifetime.total_seconds() * 1000 == REAUTH_MS
    assert after == b""
    assert _logged(caplog, "SASL session expired")
