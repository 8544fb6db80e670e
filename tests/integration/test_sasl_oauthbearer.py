"""SASL/OAUTHBEARER against real clients: one broker with Kafka's AclAuthorizer and two OAUTHBEARER
listeners, ``UNSECURED`` (Kafka's default unsecured validator) and ``JWT`` (Kafka 3.9's
``OAuthBearerValidatorCallbackHandler`` with a JWKS file written at test time, an expected
audience and issuer) and ``HTTPS`` (the same validator, its JWKS fetched from a local https server
trusted through the JAAS options' ``ssl.truststore.*``). The controller's requests travel on a
PLAINTEXT ``INTERNAL`` listener.

confluent-kafka's built-in unsecured tokens (``principal=alice``) produce and consume on ``t``,
which ``User:alice`` is granted; ``User:bob`` is refused by the authorizer; a JWT from ``oauth_cb``
signed by the JWKS key is accepted, one signed by another key is an authentication failure at the
client and one log line at the broker; kafka-python's ``sasl_oauth_token_provider`` (with a SASL
extension) produces too.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives.asymmetric import rsa

from odradek.metadata.authorizer import ACL_AUTHORIZER_CLASS
from odradek.security.acl import AclOperation as Op
from odradek.security.acl import ResourceType as Type
from odradek.security.sasl.oauthbearer import SECURED_VALIDATOR_CLASS
from odradek.server.runner import BrokerRunner

from .authz_support import CLUSTER_ACTION, acl, seed_acls
from .security_support import address, kafka_python_oauthbearer_send, write_certificates

TOPIC, GROUP = "t", "g"
AUDIENCE, ISSUER = "odradek", "https://issuer.test"


@pytest.fixture(scope="module")
def keys() -> dict[str, rsa.RSAPrivateKey]:
    return {name: rsa.generate_private_key(public_exponent=65537, key_size=2048) for name in ("trusted", "stranger")}


def jwks(**keys: rsa.RSAPrivateKey) -> dict[str, Any]:
    entries = []
    for kid, key in keys.items():
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        entries.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
    return {"keys": entries}


class JwksServer:
    """An https server answering every GET with ``document`` (JSON), counting the requests."""

    def __init__(self, certificates: dict[str, str]) -> None:
        self.document: dict[str, Any] = {"keys": []}
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificates["server"])
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://localhost:{self.httpd.server_address[1]}/jwks"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("jwks-certs"))


@pytest.fixture(scope="module")
def jwks_server(certificates: dict[str, str], keys: dict[str, rsa.RSAPrivateKey]) -> Iterator[JwksServer]:
    server = JwksServer(certificates)
    server.document = jwks(k1=keys["trusted"])
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory,
    keys: dict[str, rsa.RSAPrivateKey],
    jwks_server: JwksServer,
    certificates: dict[str, str],
) -> Iterator[BrokerRunner]:
    data_dir = str(tmp_path_factory.mktemp("oauth-broker"))
    jwks_path = os.path.join(data_dir, "jwks.json")
    with open(jwks_path, "w") as f:
        json.dump(jwks(k1=keys["trusted"]), f)
    grants = [
        acl(Type.TOPIC, TOPIC, op, principal=user)
        for user in ("User:alice", "User:svc")
        for op in (Op.READ, Op.WRITE, Op.DESCRIBE)
    ]
    seed_acls(data_dir, [CLUSTER_ACTION, *grants, acl(Type.GROUP, GROUP, Op.READ, principal="User:alice")])
    runner = BrokerRunner(
        data_dir,
        {
            "listeners": "UNSECURED://127.0.0.1:0,JWT://127.0.0.1:0,HTTPS://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": (
                "UNSECURED:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT,HTTPS:SASL_PLAINTEXT,INTERNAL:PLAINTEXT"
            ),
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.unsecured.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="admin";'
            ),
            "listener.name.jwt.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            ),
            "listener.name.jwt.oauthbearer.sasl.server.callback.handler.class": SECURED_VALIDATOR_CLASS,
            "listener.name.jwt.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": f"file://{jwks_path}",
            "listener.name.https.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'ssl.truststore.type="PEM" ssl.truststore.location="{certificates["ca"]}";'
            ),
            "listener.name.https.oauthbearer.sasl.server.callback.handler.class": SECURED_VALIDATOR_CLASS,
            "listener.name.https.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_server.url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "authorizer.class.name": ACL_AUTHORIZER_CLASS,
            "super.users": "User:admin",
            "auto.create.topics.enable": "false",
            "connection.failed.authentication.delay.ms": "0",
        },
    ).start()
    try:
        admin = AdminClient(unsecured(runner, "admin"))
        admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=10)[TOPIC].result(15)
        yield runner
    finally:
        runner.stop()


def unsecured(runner: BrokerRunner, principal: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": address(runner, "UNSECURED"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal}",
    }


def signed_token(key: rsa.RSAPrivateKey, sub: str = "svc", lifetime_s: int = 300, kid: str = "k1") -> tuple[str, float]:
    now = int(time.time())
    claims = {"sub": sub, "iat": now, "exp": now + lifetime_s, "aud": AUDIENCE, "iss": ISSUER, "scope": "kafka"}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid}), float(now + lifetime_s)


def with_jwt(runner: BrokerRunner, key: rsa.RSAPrivateKey, listener: str = "JWT", kid: str = "k1") -> dict[str, Any]:
    return {
        "bootstrap.servers": address(runner, listener),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: signed_token(key, kid=kid),
    }


def produce(config: dict[str, Any], value: bytes) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10000, "retries": 0})
    producer.produce(TOPIC, value, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    assert errors, "no delivery report"
    return errors[0]


def consume_one(config: dict[str, Any], wanted: bytes) -> None:
    consumer = Consumer({**config, "group.id": GROUP, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            if msg.value() == wanted:
                return
        raise AssertionError(f"{wanted!r} not consumed")
    finally:
        consumer.close()


def test_unsecured_tokens_produce_and_consume_as_the_tokens_principal(broker: BrokerRunner) -> None:
    assert produce(unsecured(broker, "alice"), b"from-alice") is None
    consume_one(unsecured(broker, "alice"), b"from-alice")


def test_the_authorizer_sees_the_tokens_principal(broker: BrokerRunner) -> None:
    error = produce(unsecured(broker, "bob"), b"from-bob")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_signed_jwt_from_the_jwks_key_is_accepted(broker: BrokerRunner, keys: dict[str, rsa.RSAPrivateKey]) -> None:
    assert produce(with_jwt(broker, keys["trusted"]), b"from-svc") is None


def test_signed_jwt_from_another_key_is_an_authentication_failure(
    broker: BrokerRunner, keys: dict[str, rsa.RSAPrivateKey], caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[KafkaError] = []
    config = {**with_jwt(broker, keys["stranger"]), "error_cb": errors.append}
    with caplog.at_level(logging.INFO, logger="odradek.server.socket_server"):
        producer = Producer(config)
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
    assert errors, "no error reported"
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("invalid_token" in e.str() for e in errors), errors
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        failures = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Failed authentication with")]
        if failures:
            break
        time.sleep(0.05)
    assert any("OAUTHBEARER token refused" in f and "Signature verification failed" in f for f in failures), failures
    # the broker keeps serving
    assert produce(with_jwt(broker, keys["trusted"]), b"after") is None


def test_unsecured_token_on_the_jwt_listener_is_refused(broker: BrokerRunner) -> None:
    errors: list[KafkaError] = []
    config = {**unsecured(broker, "alice"), "bootstrap.servers": address(broker, "JWT"), "error_cb": errors.append}
    producer = Producer(config)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_kafka_python_token_provider(broker: BrokerRunner, keys: dict[str, rsa.RSAPrivateKey]) -> None:
    pytest.importorskip("kafka")
    kafka_python_oauthbearer_send(
        address(broker, "JWT"),
        TOPIC,
        b"from-kafka-python",
        lambda: signed_token(keys["trusted"])[0],
        {"traceId": "abc 123"},
    )


def test_jwks_over_https_and_a_rotated_key(
    broker: BrokerRunner, keys: dict[str, rsa.RSAPrivateKey], jwks_server: JwksServer
) -> None:
    assert produce(with_jwt(broker, keys["trusted"], "HTTPS"), b"via-https-jwks") is None
    fetched = jwks_server.requests
    assert fetched >= 1
    # the issuer rotates to a new key: a token naming it makes the broker fetch the JWKS again
    jwks_server.document = jwks(k1=keys["trusted"], k2=keys["stranger"])
    errors: list[KafkaError] = []
    config = {**with_jwt(broker, keys["stranger"], "HTTPS", kid="k2"), "error_cb": errors.append}
    deadline = time.monotonic() + 20
    while True:  # the first attempt may come before the fetch ends; librdkafka retries
        error = produce(config, b"signed-by-k2")
        if error is None or time.monotonic() > deadline:
            break
    assert error is None, (error, errors)
    assert jwks_server.requests > fetched
