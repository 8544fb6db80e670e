"""OAUTHBEARER's client side: the mechanism's exchange against the server mechanism, the unsecured
login's tokens, the refresh moment, and the keys that build a login."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.client.security import ClientSecurity
from odradek.errors import InvalidConfigError
from odradek.security.sasl import SaslAuthenticationError
from odradek.security.sasl.oauthbearer import OAuthBearerSaslServer, TokenRefusedError, UnsecuredValidator
from odradek.security.sasl.oauthbearer_login import (
    LoginRefreshConfig,
    OAuthBearerSaslClient,
    UnsecuredLogin,
    refresh_delay_s,
)

JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="broker" unsecuredLoginListClaim_scope=",kafka,admin" '
    'unsecuredLoginNumberClaim_level="3" unsecuredLoginExtension_traceId="abc";'
)


def test_unsecured_login_token_is_accepted_by_the_unsecured_validator() -> None:
    login = UnsecuredLogin(
        {
            "unsecuredLoginStringClaim_sub": "broker",
            "unsecuredLoginListClaim_scope": ",kafka,admin",
            "unsecuredLoginNumberClaim_level": "3",
            "unsecuredLoginExtension_traceId": "abc",
            "unsecuredLoginLifetimeSeconds": "120",
        }
    ).start()
    try:
        _header, body, signature = login.token.split(".")
        assert signature == ""
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        assert claims["scope"] == ["kafka", "admin"] and claims["level"] == 3
        assert 119 <= claims["exp"] - claims["iat"] <= 121
        server = OAuthBearerSaslServer(UnsecuredValidator(required_scope=("kafka",)))
        client = login.sasl_client()
        first = client.evaluate_challenge(b"")
        assert first is not None and b"traceId=abc\x01" in first
        assert server.evaluate_response(first) == b""
        assert client.evaluate_challenge(b"") is None and client.complete
        assert server.authorization_id == "broker" and server.extensions == {"traceId": "abc"}
    finally:
        login.close()


def test_a_refused_token_ends_with_rfc7628s_failure_exchange() -> None:
    server = OAuthBearerSaslServer(UnsecuredValidator(required_scope=("superpower",)))
    client = OAuthBearerSaslClient(UnsecuredLogin({"unsecuredLoginStringClaim_sub": "x"})._obtain()[0])
    challenge = server.evaluate_response(client.evaluate_challenge(b"") or b"")
    assert json.loads(challenge)["status"] == "insufficient_scope"
    assert client.evaluate_challenge(challenge) == b"\x01"
    assert client.error_challenge is not None and not client.complete
    with pytest.raises(TokenRefusedError) as info:
        server.evaluate_response(b"\x01")
    assert info.value.client_message() == challenge.decode()
    with pytest.raises(SaslAuthenticationError):
        client.evaluate_challenge(b"")


@pytest.mark.parametrize(
    ("start", "expiry", "now", "config", "expected"),
    [
        (0, 1000, 0, LoginRefreshConfig(0.8, 0.0, 0, 0), 800),  # the window factor
        (0, 1000, 0, LoginRefreshConfig(0.8, 0.0, 0, 300), 700),  # the buffer moves it earlier
        (0, 1000, 900, LoginRefreshConfig(0.8, 0.0, 60, 300), 60),  # the least period after now
        (0, 1000, 980, LoginRefreshConfig(0.8, 0.0, 60, 0), 20),  # never past expiry
        (0, 1000, 1001, LoginRefreshConfig(), 0),  # expired: at once
    ],
)
def test_refresh_moment(start: float, expiry: float, now: float, config: LoginRefreshConfig, expected: float) -> None:
    assert refresh_delay_s(start, expiry, now, config) == pytest.approx(expected)


def test_refresh_jitter_stays_in_its_window() -> None:
    config = LoginRefreshConfig(0.8, 0.05, 0, 0)
    delays = {refresh_delay_s(0, 1000, 0, config) for _ in range(50)}
    assert all(800 <= d <= 850 for d in delays) and len(delays) > 1


def test_client_keys_build_an_oauthbearer_login() -> None:
    security = ClientSecurity.from_properties(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": JAAS}
    )
    assert security.oauthbearer_login is not None
    again = ClientSecurity.from_properties(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": JAAS}
    )
    login = security.oauthbearer_login
    try:
        assert again.oauthbearer_login is login  # one login per configuration
        assert isinstance(security.sasl_client(), OAuthBearerSaslClient)
        security.close()
        assert not login.closed  # ``again`` still holds it
    finally:
        security.close()
        again.close()
    assert login.closed


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"sasl.jaas.config": JAAS.replace("unsecuredLoginStringClaim_sub", "unsecuredLoginStringClaim_x")}, "sub"),
        ({"sasl.login.callback.handler.class": "com.example.Mine"}, "sasl.login.callback.handler.class"),
        (
            {
                "sasl.login.callback.handler.class": (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
                )
            },
            "sasl.oauthbearer.token.endpoint.url",
        ),
        (
            {
                "sasl.login.callback.handler.class": (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
                ),
                "sasl.oauthbearer.token.endpoint.url": "https://issuer/token",
            },
            "clientId",
        ),
    ],
)
def test_bad_login_keys_are_named(extra: dict[str, str], named: str) -> None:
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": JAAS, **extra}
    with pytest.raises(InvalidConfigError, match=named):
        ClientSecurity.from_properties(props)


def test_token_endpoint_must_be_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_OPTS", "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=https://idp/token")
    jaas = JAAS.replace("required", 'required clientId="c" clientSecret="s"')
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": jaas,
        "sasl.login.callback.handler.class": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
        ),
        "sasl.oauthbearer.token.endpoint.url": "https://elsewhere/token",
    }
    with pytest.raises(InvalidConfigError, match="not allowed"):
        ClientSecurity.from_properties(props)
