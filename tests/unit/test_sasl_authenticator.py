"""SaslServerAuthenticator and the listeners' security, fed frames with no sockets."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from odradek.errors import ErrorCode, InvalidConfigError
from odradek.metadata.scram_credentials import CredentialCache
from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build
from odradek.security.sasl import RetriableSaslError
from odradek.security.sasl.scram import ScramSaslClient, generate_credential
from odradek.server.config import KafkaConfig
from odradek.server.listener_security import ListenerSecurity, listener_securities
from odradek.server.sasl_authenticator import SaslServerAuthenticator, SaslState

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";'
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _security(reauth_ms: int = 0, mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256")) -> ListenerSecurity:
    cache = CredentialCache()
    cache.update_credentials(
        "carol", {"SCRAM-SHA-256": generate_credential("SCRAM-SHA-256", "carol-secret", 4096).to_string()}
    )
    return ListenerSecurity(
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        mechanisms=mechanisms,
        plain_users={"alice": "alice-secret", "bob": "bob-secret"},
        credentials=cache,
        failed_authentication_delay_ms=100,
        max_reauth_ms=reauth_ms,
    )


def _request(api_key: int, version: int, correlation_id: int = 1, **fields: Any) -> bytes:
    schema = api_schema(api_key, version)
    return encode_request(schema, correlation_id, "test", build(schema.request_type, **fields))[4:]


def _response(api_key: int, version: int, frame: bytes | None) -> Any:
    assert frame is not None
    return decode_response(api_key, version, frame[4:])[1]


def _plain(auth: SaslServerAuthenticator, password: str = "alice-secret", version: int = 2) -> Any:
    step = auth.receive(_request(17, 1, mechanism="PLAIN"))
    assert _response(17, 1, step.response).error_code == ErrorCode.none
    return auth.receive(_request(36, version, 2, auth_bytes=f"\0alice\0{password}".encode()))


def test_api_versions_is_handed_on_then_plain_completes_the_session() -> None:
    auth = SaslServerAuthenticator(_security(), "10.0.0.1")
    assert auth.receive(_request(18, 3, client_software_name="x", client_software_version="1")).forward
    assert auth.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
    step = _plain(auth)
    response = _response(36, 2, step.response)
    assert response.error_code == ErrorCode.none and step.failure is None
    assert auth.state is SaslState.COMPLETE and not auth.authenticating
    assert auth.session is not None
    assert (str(auth.session.principal), auth.session.client_host, auth.session.sasl_mechanism) == (
        "User:alice",
        "10.0.0.1",
        "PLAIN",
    )
    assert auth.session_expires_at is None and not auth.can_reauthenticate()


def test_wrong_password_fails_with_kafkas_message_after_the_delay() -> None:
    auth = SaslServerAuthenticator(_security(), "h")
    step = _plain(auth, "nope", version=1)
    response = _response(36, 1, step.response)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert step.delay_s == pytest.approx(0.1) and step.failure is not None
    assert auth.state is SaslState.FAILED and auth.session is None


def test_unknown_mechanism_lists_the_enabled_ones() -> None:
    auth = SaslServerAuthenticator(_security(), "h")
    step = auth.receive(_request(17, 1, mechanism="GSSAPI"))
    response = _response(17, 1, step.response)
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
    assert step.failure is not None and "GSSAPI" in step.failure


@pytest.mark.parametrize(("api_key", "version", "fields"), [(3, 1, {"topics": None}), (36, 2, {"auth_bytes": b"x"})])
def test_any_other_request_before_the_handshake_closes(api_key: int, version: int, fields: dict[str, Any]) -> None:
    auth = SaslServerAuthenticator(_security(), "h")
    step = auth.receive(_request(api_key, version, **fields))
    assert step.close is not None and "during SASL handshake" in step.close and step.response is None


def test_garbage_or_a_kafka_request_during_authentication_closes() -> None:
    auth = SaslServerAuthenticator(_security(), "h")
    auth.receive(_request(17, 1, mechanism="PLAIN"))
    step = auth.receive(_request(18, 0))
    assert step.close is not None and "during SASL authentication" in step.close
    auth = SaslServerAuthenticator(_security(), "h")
    assert auth.receive(b"\x01").close is not None


def test_legacy_v0_flow_uses_raw_tokens() -> None:
    auth = SaslServerAuthenticator(_security(), "h")
    assert _response(17, 0, auth.receive(_request(17, 0, mechanism="PLAIN")).response).error_code == ErrorCode.none
    step = auth.receive(b"\0bob\0bob-secret")
    assert step.response == struct.pack(">i", 0)
    assert auth.session is not None and str(auth.session.principal) == "User:bob"
    failed = SaslServerAuthenticator(_security(), "h")
    failed.receive(_request(17, 0, mechanism="PLAIN"))
    step = failed.receive(b"\0bob\0wrong")
    assert step.failure is not None and step.response is None


def test_scram_sha_256_with_the_credential_cache() -> None:
    auth = SaslServerAuthenticator(_security(), "h")
    auth.receive(_request(17, 1, mechanism="SCRAM-SHA-256"))
    client = ScramSaslClient("SCRAM-SHA-256", "carol", "carol-secret")
    token = client.evaluate_challenge(b"")
    correlation = 2
    while not auth.session:
        assert token is not None
        step = auth.receive(_request(36, 1, correlation, auth_bytes=token))
        response = _response(36, 1, step.response)
        assert response.error_code == ErrorCode.none, response
        token = client.evaluate_challenge(response.auth_bytes)
        correlation += 1
    assert str(auth.session.principal) == "User:carol" and client.complete


def test_scram_unknown_user_is_not_told_apart() -> None:
    auth = SaslServerAuthenticator(_security(), "h")
    auth.receive(_request(17, 1, mechanism="SCRAM-SHA-256"))
    token = ScramSaslClient("SCRAM-SHA-256", "mallory", "x").evaluate_challenge(b"")
    step = auth.receive(_request(36, 1, 2, auth_bytes=token))
    response = _response(36, 1, step.response)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    )


def test_reauthentication_extends_the_session_and_keeps_the_principal() -> None:
    clock = Clock()
    auth = SaslServerAuthenticator(_security(reauth_ms=1000), "h", clock=clock)
    step = _plain(auth)
    assert _response(36, 2, step.response).session_lifetime.total_seconds() == 1.0
    assert auth.session_expires_at == pytest.approx(101.0)
    clock.now = 101.5
    assert auth.session_expired() and auth.can_reauthenticate()
    auth.reauthenticate()
    step = _plain(auth)
    assert _response(36, 2, step.response).error_code == ErrorCode.none
    assert not auth.session_expired() and auth.session_expires_at == pytest.approx(102.5)
    # another principal on re-authentication fails
    auth.reauthenticate()
    auth.receive(_request(17, 1, mechanism="PLAIN"))
    step = auth.receive(_request(36, 2, 3, auth_bytes=b"\0bob\0bob-secret"))
    response = _response(36, 2, step.response)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert "Cannot change principals during re-authentication" in (response.error_message or "")
    assert step.failure is not None


def test_reauthentication_cannot_change_the_mechanism() -> None:
    auth = SaslServerAuthenticator(_security(reauth_ms=1000), "h", clock=Clock())
    _plain(auth)
    auth.reauthenticate()
    step = auth.receive(_request(17, 1, mechanism="SCRAM-SHA-256"))
    assert _response(17, 1, step.response).error_code == ErrorCode.unsupported_sasl_mechanism
    assert step.failure is not None and "Mechanism changed" in step.failure


def _config(**props: str) -> KafkaConfig:
    return KafkaConfig({"listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0", **props})


def test_listener_securities_from_the_config() -> None:
    config = _config(
        **{
            "sasl.enabled.mechanisms": "GSSAPI",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_plaintext.connections.max.reauth.ms": "60000",
            "sasl.server.max.receive.size": "1000",
        }
    )
    securities = listener_securities(config, CredentialCache())
    plain, sasl = securities["PLAINTEXT"], securities["SASL_PLAINTEXT"]
    assert not plain.uses_sasl and not plain.uses_tls
    assert sasl.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert sasl.plain_users == {"alice": "alice-secret", "bob": "bob-secret"}
    assert (sasl.max_reauth_ms, sasl.max_receive_size, sasl.failed_authentication_delay_ms) == (60000, 1000, 100)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, "No JAAS configuration for SASL/GSSAPI"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "No JAAS configuration for SASL/PLAIN on listener SASL_PLAINTEXT"),
        (
            {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "org.example.Other required;"},
            "PlainLoginModule expected",
        ),
    ],
)
def test_listener_security_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        listener_securities(_config(**props), CredentialCache())


def test_plain_falls_back_to_sasl_jaas_config() -> None:
    config = _config(**{"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS})
    assert listener_securities(config, None)["SASL_PLAINTEXT"].plain_users["alice"] == "alice-secret"


class ScriptedGssapiServer:
    """A GSSAPI stand-in: answers each token from a script; ``retriable`` raises Kafka's retriable
    Kerberos failure; the last step completes with no challenge, as the JDK's server does."""

    mechanism = "GSSAPI"
    final_challenge_absent = True

    def __init__(self, steps: int, retriable: bool = False) -> None:
        self.steps, self.retriable, self.seen = steps, retriable, 0

    @property
    def complete(self) -> bool:
        return self.seen >= self.steps

    @property
    def authorization_id(self) -> str:
        return "alice"

    def evaluate_response(self, response: bytes) -> bytes:
        if self.retriable:
            raise RetriableSaslError("GSS initiate failed: Request is a replay", mechanism="GSSAPI")
        self.seen += 1
        return b"" if self.complete else f"challenge-{self.seen}".encode()


class ScriptedAcceptor:
    def __init__(self, **options: Any) -> None:
        self.options = options

    def sasl_server(self) -> ScriptedGssapiServer:
        return ScriptedGssapiServer(**self.options)


def _gssapi_security(**options: Any) -> ListenerSecurity:
    return ListenerSecurity(
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", mechanisms=("GSSAPI",), gssapi=ScriptedAcceptor(**options)
    )  # type: ignore[arg-type]


def test_legacy_flow_sends_no_challenge_after_gssapi_s_last_token() -> None:
    auth = SaslServerAuthenticator(_gssapi_security(steps=3), "10.0.0.1")
    assert _response(17, 0, auth.receive(_request(17, 0, mechanism="GSSAPI")).response).error_code == 0
    assert auth.receive(b"ap-req").response == struct.pack(">i", 11) + b"challenge-1"
    assert auth.receive(b"").response == struct.pack(">i", 11) + b"challenge-2"
    last = auth.receive(b"wrapped")
    assert (last.response, last.failure, last.close) == (None, None, None)
    assert auth.session is not None and str(auth.session.principal) == "User:alice"


def test_authenticate_v1_still_answers_gssapi_s_last_token_with_empty_bytes() -> None:
    auth = SaslServerAuthenticator(_gssapi_security(steps=1), "10.0.0.1")
    auth.receive(_request(17, 1, mechanism="GSSAPI"))
    response = _response(36, 1, auth.receive(_request(36, 1, 2, auth_bytes=b"ap-req")).response)
    assert (response.error_code, bytes(response.auth_bytes)) == (ErrorCode.none, b"")
    assert auth.state is SaslState.COMPLETE


@pytest.mark.parametrize("version", [0, 1])
def test_a_retriable_failure_closes_without_an_answer(version: int) -> None:
    auth = SaslServerAuthenticator(_gssapi_security(steps=1, retriable=True), "10.0.0.1")
    auth.receive(_request(17, version, mechanism="GSSAPI"))
    step = auth.receive(_request(36, 2, 2, auth_bytes=b"replayed") if version else b"replayed")
    assert step.response is None and step.close is not None and "replay" in step.close
    assert auth.state is SaslState.FAILED and auth.session is None
