"""OAUTHBEARER against a real OpenID Connect issuer (:class:`odradek.testing_oidc.OidcIssuer`, https
with certificates made at test time) and one broker with three OAUTHBEARER listeners:

- ``OIDC``: Kafka 3.9's ``OAuthBearerValidatorCallbackHandler`` with the issuer's JWKS over https
  (trusted through the JAAS options ``ssl.truststore.*``), refreshed every second
  (``sasl.oauthbearer.jwks.endpoint.refresh.ms``), the issuer and audience expected, and SASL
  frames bounded by ``sasl.server.max.receive.size``;
- ``ROTATE``: the same validator with the default hourly refresh: only a token naming an unknown
  ``kid`` makes it fetch, and a failed fetch is retried after
  ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``, doubling up to ``.max.ms``;
- ``SCOPED``: the unsecured validator requiring the scope ``kafka``.

Clients: confluent-kafka with ``sasl.oauthbearer.method=oidc`` (librdkafka asks the token endpoint
itself, trusting the issuer's certificate through ``https.ca.location``), kafka-python and aiokafka
with token providers asking the issuer; bad tokens over raw SaslAuthenticate frames.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from odradek.client.connection import KafkaConnection
from odradek.client.security import ClientSecurity
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.runner import BrokerRunner
from odradek.testing_oidc import OidcIssuer, SigningKey, oidc_issuer

from .oidc_support import (
    LOGIN_HANDLER,
    LOGIN_MODULE,
    VALIDATOR,
    fetch_token,
    sasl_exchange,
    trusting_jaas,
    validating_listener,
)
from .security_support import address, kafka_python_oauthbearer_send, write_certificates

TOPIC = "oidc"
MAX_RECEIVE = 8192


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_certificates(tmp_path_factory.mktemp("oidc-certs"))


@pytest.fixture(scope="module")
def issuer(certificates: dict[str, str]) -> Iterator[OidcIssuer]:
    with oidc_issuer(certificates["server"], audience="kafka") as issuer:
        issuer.register("producer-app", "producer-secret", subject="svc-producer", scopes=("kafka", "admin"))
        issuer.register("consumer-app", "consumer-secret")
        yield issuer


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, issuer: OidcIssuer, certificates: dict[str, str]
) -> Iterator[BrokerRunner]:
    trust = trusting_jaas(certificates["ca"])
    runner = BrokerRunner(
        str(tmp_path_factory.mktemp("oidc-broker")),
        {
            "listeners": "OIDC://127.0.0.1:0,ROTATE://127.0.0.1:0,SCOPED://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": (
                "OIDC:SASL_PLAINTEXT,ROTATE:SASL_PLAINTEXT,SCOPED:SASL_PLAINTEXT,INTERNAL:PLAINTEXT"
            ),
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            **validating_listener("oidc", issuer, certificates["ca"]),
            "listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "1000",
            "listener.name.oidc.sasl.server.max.receive.size": str(MAX_RECEIVE),
            "listener.name.rotate.oauthbearer.sasl.jaas.config": trust,
            "listener.name.rotate.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
            "listener.name.rotate.oauthbearer.sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
            "listener.name.rotate.oauthbearer.sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "400",
            "listener.name.scoped.oauthbearer.sasl.jaas.config": (
                f'{LOGIN_MODULE} required unsecuredValidatorRequiredScope="kafka";'
            ),
            "auto.create.topics.enable": "true",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "connection.failed.authentication.delay.ms": "0",
        },
    ).start()
    try:
        yield runner
    finally:
        runner.stop()


def port(runner: BrokerRunner, listener: str) -> int:
    return int(address(runner, listener).rsplit(":", 1)[1])


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def accepted(runner: BrokerRunner, listener: str, token: str) -> bool:
    exchange = sasl_exchange(port(runner, listener), token)
    return bool(exchange.responses) and exchange.responses[-1].error_code == 0 and not exchange.closed


def oidc_config(runner: BrokerRunner, issuer: OidcIssuer, ca: str, client: str, secret: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": address(runner, "OIDC"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client,
        "sasl.oauthbearer.client.secret": secret,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
        "https.ca.location": ca,
    }


# --- the issuer itself -------------------------------------------------------------------------


def test_issuer_serves_discovery_jwks_and_client_credentials(issuer: OidcIssuer, certificates: dict[str, str]) -> None:
    context = ssl.create_default_context(cafile=certificates["ca"])
    with urllib.request.urlopen(issuer.discovery_url, context=context, timeout=10) as response:
        discovery = json.load(response)
    assert discovery["issuer"] == issuer.url and discovery["token_endpoint"] == issuer.token_url
    assert "client_credentials" in discovery["grant_types_supported"]
    with urllib.request.urlopen(discovery["jwks_uri"], context=context, timeout=10) as response:
        assert [k["kid"] for k in json.load(response)["keys"]] == [issuer.signing_key.kid]
    token = fetch_token(issuer, certificates["ca"], "producer-app", "producer-secret", "kafka admin")
    assert issuer.issued[-1]["sub"] == "svc-producer" and issuer.issued[-1]["scope"] == "kafka admin"
    assert token.count(".") == 2
    for client, secret, scope, status, error in [
        ("producer-app", "wrong", None, 401, "invalid_client"),
        ("consumer-app", "consumer-secret", "admin", 400, "invalid_scope"),
    ]:
        with pytest.raises(urllib.error.HTTPError) as info:
            fetch_token(issuer, certificates["ca"], client, secret, scope)
        assert info.value.code == status and json.load(info.value)["error"] == error


# --- clients -------------------------------------------------------------------------------------


def test_confluent_kafka_oidc_method_produces_and_consumes(
    broker: BrokerRunner, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    before = issuer.token_requests
    errors: list[KafkaError | None] = []
    producer = Producer(
        {**oidc_config(broker, issuer, certificates["ca"], "producer-app", "producer-secret"), "retries": 0}
    )
    producer.produce(TOPIC, b"from-librdkafka-oidc", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    assert errors == [None]
    assert issuer.token_requests > before and issuer.issued[-1]["sub"] == "svc-producer"
    consumer = Consumer(
        {
            **oidc_config(broker, issuer, certificates["ca"], "consumer-app", "consumer-secret"),
            "group.id": "oidc-group",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([TOPIC])
        deadline, values = time.monotonic() + 30, []
        while b"from-librdkafka-oidc" not in values and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert b"from-librdkafka-oidc" in values
    finally:
        consumer.close()


def test_confluent_kafka_wrong_client_secret_is_reported(
    broker: BrokerRunner, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    errors: list[KafkaError] = []
    config = oidc_config(broker, issuer, certificates["ca"], "producer-app", "not-the-secret")
    producer = Producer({**config, "error_cb": errors.append})
    wait_for(lambda: bool(producer.poll(0.2)) or bool(errors), 15, "an error")
    assert any("401" in e.str() or "invalid_client" in e.str() for e in errors), errors


def test_kafka_python_token_provider_asks_the_issuer(
    broker: BrokerRunner, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    pytest.importorskip("kafka")
    kafka_python_oauthbearer_send(
        address(broker, "OIDC"),
        TOPIC,
        b"from-kafka-python",
        lambda: fetch_token(issuer, certificates["ca"], "producer-app", "producer-secret"),
    )


def test_aiokafka_token_provider_produces_and_consumes(
    broker: BrokerRunner, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return await asyncio.to_thread(fetch_token, issuer, certificates["ca"], "consumer-app", "consumer-secret")

    options = {
        "bootstrap_servers": address(broker, "OIDC"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": Provider(),
    }

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(**options)
        await producer.start()
        try:
            await producer.send_and_wait("oidc-aio", b"from-aiokafka")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer("oidc-aio", auto_offset_reset="earliest", **options)
        await consumer.start()
        try:
            batch = await consumer.getmany(timeout_ms=10000)
            return [m.value for msgs in batch.values() for m in msgs]
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"from-aiokafka"]


def test_odradeks_own_client_logs_in_with_client_credentials(
    broker: BrokerRunner, issuer: OidcIssuer, certificates: dict[str, str]
) -> None:
    """odradek's tools (``--command-config``) with Kafka's client keys for KIP-768's login."""
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": LOGIN_HANDLER,
            "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
            "sasl.jaas.config": (
                f'{LOGIN_MODULE} required clientId="producer-app" clientSecret="producer-secret" scope="kafka" '
                f'ssl.truststore.type="PEM" ssl.truststore.location="{certificates["ca"]}";'
            ),
        }
    )
    assert security.oauthbearer_login is not None

    async def metadata() -> tuple[int, int]:
        async with KafkaConnection("127.0.0.1", port(broker, "OIDC"), security=security) as conn:
            response = await conn.send(conn.builder(ApiKey.METADATA, 1, 1)(topics=[]))
            return len(response.brokers), conn.session_lifetime_ms

    try:
        brokers, lifetime_ms = asyncio.run(metadata())
    finally:
        security.close()  # the login stops refreshing: the issuer closes with this module
    assert brokers == 1 and 0 < lifetime_ms <= issuer.token_lifetime_s * 1000
    assert issuer.issued[-1]["sub"] == "svc-producer"


# --- bad tokens ------------------------------------------------------------------------------------

BAD_TOKENS: dict[str, tuple[Callable[[OidcIssuer], str], str]] = {
    "expired": (lambda i: i.mint("svc", lifetime_s=-120), "expired"),
    "wrong audience": (lambda i: i.mint("svc", aud="another-service"), "audience"),
    "wrong issuer": (lambda i: i.mint("svc", iss="https://evil.example"), "issuer"),
    "wrong signature": (lambda i: i.mint("svc", key=SigningKey.generate(i.signing_key.kid)), "Signature verification"),
    "unknown kid": (lambda i: i.mint("svc", key=SigningKey.generate("never-published")), "No key with kid"),
    "alg none": (lambda i: i.mint("svc", algorithm="none"), "Unsupported JWS algorithm"),
}


@pytest.mark.parametrize("case", BAD_TOKENS)
def test_bad_token_is_refused_by_rfc7628s_failure_exchange(
    broker: BrokerRunner, issuer: OidcIssuer, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, reason = BAD_TOKENS[case]
    token = make(issuer)
    with caplog.at_level(logging.DEBUG, logger="odradek"):
        exchange = sasl_exchange(port(broker, "OIDC"), token)
        wait_for(lambda: any("OAUTHBEARER token refused" in r.getMessage() for r in caplog.records), 5, "the log line")
    challenge, failure = exchange.responses
    assert challenge.error_code == 0 and json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
    assert failure.error_code == ErrorCode.sasl_authentication_failed
    assert failure.error_message == '{"status":"invalid_token"}'
    assert exchange.closed
    messages = [r.getMessage() for r in caplog.records]
    assert any(reason.lower() in m.lower() for m in messages if "token refused" in m), messages
    signature_or_body = token.split(".")[1]
    assert not any(signature_or_body in m for m in messages), "the token was logged"


def test_missing_required_scope_is_insufficient_scope(broker: BrokerRunner, issuer: OidcIssuer) -> None:
    unsigned = issuer.mint("svc", algorithm="none", scope="other")
    exchange = sasl_exchange(port(broker, "SCOPED"), unsigned)
    assert json.loads(exchange.responses[0].auth_bytes) == {"status": "insufficient_scope", "scope": "kafka"}
    assert exchange.responses[1].error_code == ErrorCode.sasl_authentication_failed and exchange.closed
    assert accepted(broker, "SCOPED", issuer.mint("svc", algorithm="none", scope="kafka other"))


def test_oversized_token_closes_the_connection_unread(broker: BrokerRunner, issuer: OidcIssuer) -> None:
    exchange = sasl_exchange(port(broker, "OIDC"), "a" * (2 * MAX_RECEIVE))
    assert exchange.closed and exchange.responses == []
    assert accepted(broker, "OIDC", issuer.mint("svc"))  # the broker keeps serving


def test_the_tokens_expiry_bounds_the_session(broker: BrokerRunner, issuer: OidcIssuer) -> None:
    """KIP-368: the session lifetime is the token's remaining life; a connection that does not
    re-authenticate is closed once it has passed."""
    token = issuer.mint("svc", lifetime_s=3)
    exchange = sasl_exchange(port(broker, "OIDC"), token)
    (response,) = exchange.responses
    lifetime_ms = response.session_lifetime.total_seconds() * 1000
    assert response.error_code == 0 and 1000 < lifetime_ms <= 3000
    still_open = sasl_exchange(port(broker, "OIDC"), token, hold_s=0.2)
    assert still_open.answered_after_hold
    expired = sasl_exchange(port(broker, "OIDC"), issuer.mint("svc", lifetime_s=2), hold_s=3.0)
    assert not expired.answered_after_hold


# --- keys rotated by the issuer --------------------------------------------------------------------


def test_rotated_key_is_picked_up_by_the_scheduled_refresh(broker: BrokerRunner, issuer: OidcIssuer) -> None:
    old_token = issuer.mint("svc")
    assert accepted(broker, "OIDC", old_token)
    fetched = issuer.jwks_requests
    issuer.rotate()  # a new kid signs; the old key leaves the JWKS
    new_token = issuer.mint("svc")
    wait_for(lambda: not accepted(broker, "OIDC", old_token), 10, "the old key to be dropped")
    assert accepted(broker, "OIDC", new_token)
    assert issuer.jwks_requests > fetched


def test_unknown_kid_asks_for_a_fetch_retried_with_backoff(broker: BrokerRunner, issuer: OidcIssuer) -> None:
    issuer.jwks_status = 503
    try:
        issuer.rotate()
        new_token = issuer.mint("svc")
        fetched = issuer.jwks_requests
        assert not accepted(broker, "ROTATE", new_token)  # unknown kid: a fetch, which fails
        time.sleep(1.5)
        retries = issuer.jwks_requests - fetched
        assert 3 <= retries <= 12, retries  # 100, 200, 400, 400... ms apart, not an hour
    finally:
        issuer.jwks_status = 200
    wait_for(lambda: accepted(broker, "ROTATE", new_token), 5, "the new key after the issuer recovered")
