"""SASL/OAUTHBEARER against real clients: one broker with Kafka's AclAuthorizer and two OAUTHBEARER
listeners, ``UNSECURED`` (Kafka's default unsecured validator) and ``JWT`` (Kafka 3.9's
``OAuthBearerValidatorCallbackHandler`` with a JWKS file written at test time, an expected
audience and issuer). The controller's requests travel on a PLAINTEXT ``INTERNAL`` listener.

confluent-kafka's built-in unsecured tokens (``principal=alice``) produce and consume on ``t``,
which ``User:alice`` is granted; ``User:bob`` is refused by the authorizer; a JWT from ``oauth_cb``
signed by the JWKS key is accepted, one signed by another key is an authentication failure at the
client and one log line at the broker; kafka-python's ``sasl_oauth_token_provider`` (with a SASL
extension) produces too.
"""

from __future__ import annotations

import json
import logging
import os
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
from .security_support import address

TOPIC, GROUP = "t", "g"
AUDIENCE, ISSUER = "odradek", "https://issuer.test"


@pytest.fixture(scope="module")
def keys() -> dict[str, rsa.RSAPrivateKey]:
    return {name: rsa.generate_private_key(public_exponent=65537, key_size=2048) for name in ("trusted", "stranger")}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, rsa.RSAPrivateKey]) -> Iterator[BrokerRunner]:
    data_dir = str(tmp_path_factory.mktemp("oauth-broker"))
    jwks_path = os.path.join(data_dir, "jwks.json")
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(keys["trusted"].public_key(), as_dict=True)
    with open(jwks_path, "w") as f:
        json.dump({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}, f)
    grants = [
        acl(Type.TOPIC, TOPIC, op, principal=user)
        for user in ("User:alice", "User:svc")
        for op in (Op.READ, Op.WRITE, Op.DESCRIBE)
    ]
    seed_acls(data_dir, [CLUSTER_ACTION, *grants, acl(Type.GROUP, GROUP, Op.READ, principal="User:alice")])
    runner = BrokerRunner(
        data_dir,
        {
            "listeners": "UNSECURED://127.0.0.1:0,JWT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "UNSECURED:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
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


def signed_token(key: rsa.RSAPrivateKey, sub: str = "svc", lifetime_s: int = 300) -> tuple[str, float]:
    now = int(time.time())
    claims = {"sub": sub, "iat": now, "exp": now + lifetime_s, "aud": AUDIENCE, "iss": ISSUER, "scope": "kafka"}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"}), float(now + lifetime_s)


def with_jwt(runner: BrokerRunner, key: rsa.RSAPrivateKey) -> dict[str, Any]:
    return {
        "bootstrap.servers": address(runner, "JWT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: signed_token(key),
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
    kafka = pytest.importorskip("kafka")
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider
    except ImportError:  # kafka-python 2
        from kafka.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return signed_token(keys["trusted"])[0]

        def extensions(self) -> dict[str, str]:
            return {"traceId": "abc 123"}

    producer = kafka.KafkaProducer(
        bootstrap_servers=address(broker, "JWT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider(),
    )
    try:
        producer.send(TOPIC, b"from-kafka-python").get(timeout=15)
    finally:
        producer.close()
