"""SASL/OAUTHBEARER: the client's initial response, the unsecured and signed-JWT validators, the
server's exchange, the broker keys and the session lifetime the authenticator reports."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from odradek.client.security import inter_broker_client_security
from odradek.errors import ErrorCode, InvalidConfigError
from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build
from odradek.security.sasl import IllegalSaslStateError, SaslAuthenticationError
from odradek.security.sasl.oauthbearer import (
    SECURED_VALIDATOR_CLASS,
    ClientInitialResponse,
    JwtValidator,
    OAuthBearerSaslServer,
    TokenRefusedError,
    TokenValidationError,
    UnsecuredValidator,
    allowed_urls,
    check_url_allowed,
    json_error,
)
from odradek.security.sasl.oauthbearer_jwks import JwksEndpoint, JwksFile
from odradek.server.config import KafkaConfig
from odradek.server.listener_security import ListenerSecurity, listener_security
from odradek.server.sasl_authenticator import SaslServerAuthenticator

NOW = 1_800_000_000.0


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    def b64(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}."


def message(token: str, authzid: str = "", **extensions: str) -> bytes:
    return ClientInitialResponse(token, authzid, extensions).to_bytes()


# --- the initial response ----------------------------------------------------------------------


def test_initial_response_good() -> None:
    parsed = ClientInitialResponse.parse(b"n,,\x01auth=Bearer abc.def.\x01\x01")
    assert parsed == ClientInitialResponse("abc.def.", "", {})


def test_initial_response_with_authzid_and_extensions() -> None:
    raw = b"n,a=alice,\x01auth=bearer t-1_2.x\x01traceId=123 abc\x01logicalCluster=lc-1\x01\x01"
    parsed = ClientInitialResponse.parse(raw)
    assert parsed.token == "t-1_2.x"
    assert parsed.authorization_id == "alice"
    assert parsed.extensions == {"traceId": "123 abc", "logicalCluster": "lc-1"}
    assert ClientInitialResponse.parse(parsed.to_bytes()) == parsed


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"n,,auth=Bearer x\x01\x01",  # no separator after the GS2 header
        b"y,,\x01auth=Bearer x\x01\x01",  # channel binding flag
        b"n,,\x01auth=Bearer x\x01",  # no final separator
        b"n,,\x01\x01",  # no auth
        b"n,,\x01auth=Basic x\x01\x01",  # another scheme
        b"n,,\x01auth=Bearer a b\x01\x01",  # token with a space
        b"n,,\x01auth=Bearer x\x01bad_key=1\x01\x01",  # extension key with an underscore
        b"n,a=al,ice,\x01auth=Bearer x\x01\x01",  # unescaped comma in the authzid
    ],
)
def test_initial_response_malformed(raw: bytes) -> None:
    with pytest.raises(SaslAuthenticationError) as info:
        ClientInitialResponse.parse(raw)
    assert not info.value.public
    assert "OAUTHBEARER" in str(info.value) or "invalid" in str(info.value).lower()


# --- the unsecured validator -------------------------------------------------------------------


def validator(**kwargs: Any) -> UnsecuredValidator:
    return UnsecuredValidator(**kwargs, clock=lambda: NOW)


def test_unsecured_good_token() -> None:
    token = unsecured({"sub": "alice", "iat": NOW - 10, "exp": NOW + 60, "scope": "a b"})
    result = validator().validate(token)
    assert result.principal_name == "alice"
    assert result.lifetime_ms == int((NOW + 60) * 1000)
    assert result.scope == {"a", "b"}


def test_unsecured_principal_claim_and_scope_claim_names() -> None:
    token = unsecured({"user": "bob", "exp": NOW + 60, "roles": ["r1", "r2"]})
    result = validator(principal_claim="user", scope_claim="roles", required_scope=["r2"]).validate(token)
    assert result.principal_name == "bob" and result.scope == {"r1", "r2"}
    with pytest.raises(TokenValidationError, match="claim missing"):
        validator().validate(token)


def test_unsecured_required_scope() -> None:
    token = unsecured({"sub": "alice", "exp": NOW + 60, "scope": "read"})
    with pytest.raises(TokenValidationError) as info:
        validator(required_scope=["read", "write"]).validate(token)
    assert info.value.status == "insufficient_scope"
    assert info.value.scope == "read write"


@pytest.mark.parametrize(
    ("claims", "problem"),
    [
        ({"sub": "alice"}, "Required claim missing: exp"),
        ({"sub": "alice", "exp": NOW - 1}, "expired"),
        ({"sub": "alice", "exp": NOW}, "expired"),
        ({"sub": "alice", "exp": NOW + 60, "iat": NOW + 5}, "issued in the future"),
        ({"sub": "alice", "exp": NOW + 60, "nbf": NOW + 5}, "not valid before"),
        ({"sub": "alice", "exp": "soon"}, "not a number"),
        ({"sub": "", "exp": NOW + 60}, "claim missing"),
    ],
)
def test_unsecured_refusals(claims: dict[str, Any], problem: str) -> None:
    with pytest.raises(TokenValidationError, match=problem):
        validator().validate(unsecured(claims))


def test_unsecured_clock_skew() -> None:
    expired = unsecured({"sub": "alice", "exp": NOW - 1})
    future = unsecured({"sub": "alice", "exp": NOW + 60, "iat": NOW + 1})
    for token in (expired, future):
        assert validator(clock_skew_ms=2000).validate(token).principal_name == "alice"
        with pytest.raises(TokenValidationError):
            validator(clock_skew_ms=500).validate(token)


def test_unsecured_refuses_signed_and_malformed_tokens() -> None:
    with pytest.raises(TokenValidationError, match="'none'"):
        validator().validate(unsecured({"sub": "a", "exp": NOW + 9}, {"alg": "HS256"}))
    with pytest.raises(TokenValidationError, match="signature"):
        validator().validate(unsecured({"sub": "a", "exp": NOW + 9}) + "c2ln")
    with pytest.raises(TokenValidationError, match="3 dot-separated"):
        validator().validate("abc")
    with pytest.raises(TokenValidationError, match="Invalid JWT"):
        validator().validate("!!!.e30.")


def test_unsecured_from_jaas_options() -> None:
    v = UnsecuredValidator.from_jaas_options(
        {
            "unsecuredValidatorPrincipalClaimName": "user",
            "unsecuredValidatorScopeClaimName": "roles",
            "unsecuredValidatorRequiredScope": "a  b",
            "unsecuredValidatorAllowableClockSkewMs": "1500",
        }
    )
    assert (v.principal_claim, v.scope_claim, v.required_scope, v.clock_skew_ms) == ("user", "roles", ("a", "b"), 1500)
    with pytest.raises(InvalidConfigError, match="AllowableClockSkewMs"):
        UnsecuredValidator.from_jaas_options({"unsecuredValidatorAllowableClockSkewMs": "-1"})


# --- the signed-JWT validator ------------------------------------------------------------------


def write_jwks(path: Path, keys: dict[str, Any]) -> str:
    entries = []
    for kid, private in keys.items():
        algorithm = (
            jwt.algorithms.RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
        )
        jwk = algorithm.to_jwk(private.public_key(), as_dict=True)
        entries.append({**jwk, "kid": kid, "use": "sig"})
    path.write_text(json.dumps({"keys": entries}))
    return path.as_uri()


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def signed(key: Any, kid: str, alg: str = "RS256", **claims: Any) -> str:
    body = {"sub": "alice", "iat": int(NOW) - 5, "exp": int(NOW) + 300, **claims}
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})


def jwt_validator(url: str, **kwargs: Any) -> JwtValidator:
    return JwtValidator(JwksFile(url), clock=lambda: NOW, **kwargs)


def test_jwt_good_tokens(tmp_path: Path, rsa_key: Any, ec_key: Any) -> None:
    url = write_jwks(tmp_path / "jwks.json", {"r": rsa_key, "e": ec_key})
    v = jwt_validator(url, audience=["kafka"], issuer="https://issuer")
    token = v.validate(signed(rsa_key, "r", aud="kafka", iss="https://issuer", scope="s1 s2"))
    assert token.principal_name == "alice" and token.scope == {"s1", "s2"}
    assert token.lifetime_ms == (int(NOW) + 300) * 1000
    assert v.validate(signed(ec_key, "e", "ES256", aud=["x", "kafka"], iss="https://issuer")).principal_name == "alice"
    other = jwt_validator(url, sub_claim="client_id")
    assert other.validate(signed(rsa_key, "r", client_id="svc")).principal_name == "svc"


def test_jwt_refusals(tmp_path: Path, rsa_key: Any) -> None:
    url = write_jwks(tmp_path / "jwks.json", {"r": rsa_key})
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    v = jwt_validator(url, audience=["kafka"], issuer="https://issuer", clock_skew_s=30)
    good = {"aud": "kafka", "iss": "https://issuer"}
    cases = {
        "wrong key": signed(stranger, "r", **good),
        "unknown kid": signed(rsa_key, "nope", **good),
        "wrong audience": signed(rsa_key, "r", aud="other", iss="https://issuer"),
        "no audience": signed(rsa_key, "r", iss="https://issuer"),
        "wrong issuer": signed(rsa_key, "r", aud="kafka", iss="https://evil"),
        "expired": signed(rsa_key, "r", exp=int(NOW) - 60, **good),
        "issued in the future": signed(rsa_key, "r", iat=int(NOW) + 60, **good),
        "not yet valid": signed(rsa_key, "r", nbf=int(NOW) + 60, **good),
        "no sub": jwt.encode({"iat": int(NOW), "exp": int(NOW) + 60, **good}, rsa_key, "RS256", {"kid": "r"}),
        "no iat": jwt.encode({"sub": "a", "exp": int(NOW) + 60, **good}, rsa_key, "RS256", {"kid": "r"}),
        "hmac": jwt.encode({"sub": "a", "exp": int(NOW) + 60, **good}, "secret-secret-secret-secret-32b!", "HS256"),
        "unsecured": unsecured({"sub": "a", "exp": NOW + 60, **good}),
        "garbage": "not-a-jwt",
    }
    for name, token in cases.items():
        with pytest.raises(TokenValidationError):
            v.validate(token)
            pytest.fail(name)
    # within the clock skew an expired token still passes
    assert v.validate(signed(rsa_key, "r", exp=int(NOW) - 10, **good)).principal_name == "alice"


def test_jwks_file_is_read_again_when_it_changes(tmp_path: Path, rsa_key: Any) -> None:
    path = tmp_path / "jwks.json"
    url = write_jwks(path, {"old": rsa_key})
    v = jwt_validator(url)
    with pytest.raises(TokenValidationError, match="kid"):
        v.validate(signed(rsa_key, "new"))
    write_jwks(path, {"old": rsa_key, "new": rsa_key})
    assert v.validate(signed(rsa_key, "new")).principal_name == "alice"


def test_jwks_url_checks(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="a file:// URL"):
        JwksFile("https://issuer/jwks")
    with pytest.raises(InvalidConfigError, match="cannot read"):
        JwksFile((tmp_path / "missing.json").as_uri())
    assert allowed_urls("-Xmx1g") is None
    allowed = allowed_urls("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file:///a,file:///b -Dx=y")
    assert allowed == ["file:///a", "file:///b"]
    check_url_allowed("file:///a", allowed, "k")
    check_url_allowed("file:///c", None, "k")
    with pytest.raises(InvalidConfigError, match=r"allowed\.urls"):
        check_url_allowed("file:///c", allowed, "k")


# --- the server's exchange ---------------------------------------------------------------------


def test_server_success() -> None:
    server = OAuthBearerSaslServer(validator())
    token = unsecured({"sub": "alice", "exp": NOW + 60})
    assert server.evaluate_response(message(token, "alice", traceId="1")) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.extensions == {"traceId": "1"}
    assert server.credential_lifetime_ms == int((NOW + 60) * 1000)
    with pytest.raises(IllegalSaslStateError):
        server.evaluate_response(message(token))


def test_server_refused_token_challenge_then_failure() -> None:
    server = OAuthBearerSaslServer(validator())
    challenge = server.evaluate_response(message(unsecured({"sub": "alice", "exp": NOW - 60})))
    assert json.loads(challenge) == {"status": "invalid_token"}
    assert not server.complete
    with pytest.raises(TokenRefusedError) as info:
        server.evaluate_response(b"\x01")
    assert info.value.client_message() == '{"status":"invalid_token"}'
    assert "expired" in str(info.value)


def test_server_insufficient_scope_challenge() -> None:
    server = OAuthBearerSaslServer(validator(required_scope=["write"]))
    challenge = server.evaluate_response(message(unsecured({"sub": "alice", "exp": NOW + 60})))
    assert challenge == b'{"status":"insufficient_scope", "scope":"write"}'
    assert (
        json_error("invalid_token", None, "https://x")
        == '{"status":"invalid_token", "openid-configuration":"https://x"}'
    )


def test_server_authzid_mismatch_and_malformed() -> None:
    server = OAuthBearerSaslServer(validator())
    with pytest.raises(SaslAuthenticationError, match="different from the token's principal name") as info:
        server.evaluate_response(message(unsecured({"sub": "alice", "exp": NOW + 60}), "bob"))
    assert info.value.public
    with pytest.raises(SaslAuthenticationError, match="Invalid OAUTHBEARER client first message"):
        OAuthBearerSaslServer(validator()).evaluate_response(b"\x01")


# --- broker keys -------------------------------------------------------------------------------

JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka";'
)


def broker_config(**extra: str) -> KafkaConfig:
    return KafkaConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            **{k.replace("__", "."): v for k, v in extra.items()},
        }
    )


def test_listener_keys_build_the_unsecured_validator() -> None:
    config = broker_config(listener__name__sasl_plaintext__oauthbearer__sasl__jaas__config=JAAS)
    security = listener_security(config, "SASL_PLAINTEXT", None)
    assert isinstance(security.token_validator, UnsecuredValidator)
    assert security.token_validator.required_scope == ("kafka",)
    assert isinstance(security.sasl_server("OAUTHBEARER"), OAuthBearerSaslServer)
    default = listener_security(broker_config(), "SASL_PLAINTEXT", None)
    assert isinstance(default.token_validator, UnsecuredValidator)


def test_listener_keys_build_the_jwt_validator(tmp_path: Path, rsa_key: Any) -> None:
    url = write_jwks(tmp_path / "jwks.json", {"r": rsa_key})
    config = broker_config(
        listener__name__sasl_plaintext__oauthbearer__sasl__server__callback__handler__class=SECURED_VALIDATOR_CLASS,
        listener__name__sasl_plaintext__oauthbearer__sasl__oauthbearer__jwks__endpoint__url=url,
        sasl__oauthbearer__expected__audience="a1,a2",
        sasl__oauthbearer__expected__issuer="https://issuer",
        sasl__oauthbearer__clock__skew__seconds="5",
    )
    validator = listener_security(config, "SASL_PLAINTEXT", None).token_validator
    assert isinstance(validator, JwtValidator)
    assert (validator.audience, validator.issuer, validator.clock_skew_s) == (["a1", "a2"], "https://issuer", 5)
    assert (validator.sub_claim, validator.scope_claim) == ("sub", "scope")


def test_bad_oauthbearer_keys_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = "listener__name__sasl_plaintext__oauthbearer__sasl__server__callback__handler__class"
    with pytest.raises(InvalidConfigError, match=r"callback\.handler\.class"):
        listener_security(broker_config(**{prefix: "com.example.Mine"}), "SASL_PLAINTEXT", None)
    with pytest.raises(InvalidConfigError, match=r"jwks\.endpoint\.url"):
        listener_security(broker_config(**{prefix: SECURED_VALIDATOR_CLASS}), "SASL_PLAINTEXT", None)
    with pytest.raises(InvalidConfigError, match=r"clock\.skew"):
        broker_config(sasl__oauthbearer__clock__skew__seconds="-1")
    monkeypatch.setenv("KAFKA_OPTS", "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file:///elsewhere.json")
    url = (tmp_path / "jwks.json").as_uri()
    config = broker_config(**{prefix: SECURED_VALIDATOR_CLASS}, sasl__oauthbearer__jwks__endpoint__url=url)
    with pytest.raises(InvalidConfigError, match="not allowed"):
        listener_security(config, "SASL_PLAINTEXT", None)
    inter_broker = KafkaConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        }
    )
    with pytest.raises(InvalidConfigError, match="OAUTHBEARER needs"):  # the broker's own login has no JAAS entry
        inter_broker_client_security(inter_broker)


# --- the session lifetime (KIP-368) ------------------------------------------------------------


def _authenticate(reauth_ms: int, token: str) -> tuple[SaslServerAuthenticator, Any]:
    schema_h, schema_a = api_schema(17, 1), api_schema(36, 2)
    security = ListenerSecurity(
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        mechanisms=("OAUTHBEARER",),
        max_reauth_ms=reauth_ms,
        token_validator=validator(),
    )
    auth = SaslServerAuthenticator(security, "10.0.0.1", clock=lambda: 100.0, wall_clock=lambda: NOW)
    handshake = encode_request(schema_h, 1, "t", build(schema_h.request_type, mechanism="OAUTHBEARER"))[4:]
    assert auth.receive(handshake).response is not None
    frame = encode_request(schema_a, 2, "t", build(schema_a.request_type, auth_bytes=message(token)))[4:]
    step = auth.receive(frame)
    assert step.response is not None
    return auth, decode_response(36, 2, step.response[4:])[1]


@pytest.mark.parametrize(("reauth_ms", "expected_ms"), [(0, 60_000), (10_000, 10_000), (600_000, 60_000)])
def test_session_lifetime_is_the_tokens(reauth_ms: int, expected_ms: int) -> None:
    auth, response = _authenticate(reauth_ms, unsecured({"sub": "alice", "exp": NOW + 60}))
    assert response.error_code == 0
    assert response.session_lifetime.total_seconds() * 1000 == expected_ms
    assert auth.session is not None and str(auth.session.principal) == "User:alice"
    assert auth.session_expires_at == 100.0 + expected_ms / 1000
    assert auth.can_reauthenticate()


def test_refused_token_is_an_authentication_failure_with_the_json() -> None:
    auth, challenge = _authenticate(0, unsecured({"sub": "alice", "exp": NOW - 60}))
    assert challenge.error_code == 0 and json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
    schema_a = api_schema(36, 2)
    step = auth.receive(encode_request(schema_a, 3, "t", build(schema_a.request_type, auth_bytes=b"\x01"))[4:])
    assert step.failure is not None and "expired" in step.failure
    assert step.response is not None
    response = decode_response(36, 2, step.response[4:])[1]
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == '{"status":"invalid_token"}'


# --- a JWKS over https, refreshed --------------------------------------------------------------


class FakeEndpoint(JwksEndpoint):
    """Fetches from ``served`` (an exception: the fetch fails); refreshes on the caller's thread."""

    def __init__(self, served: list[Any], clock: list[float], **kwargs: Any) -> None:
        self.served = served
        self.fetches = 0
        super().__init__("https://issuer.test/jwks", clock=lambda: clock[0], **kwargs)

    def _fetch(self) -> dict[str | None, jwt.PyJWK]:
        self.fetches += 1
        item = self.served[0]
        if isinstance(item, Exception):
            raise item
        return {k: jwt.PyJWK(v) for k, v in item.items()}

    def _refresh_in_background(self) -> None:
        self.refresh()


def test_jwks_endpoint_refresh_backoff_and_missing_kid(rsa_key: Any) -> None:
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True)
    clock = [0.0]
    served: list[Any] = [OSError("connection refused")]
    endpoint = FakeEndpoint(served, clock, refresh_ms=60000, backoff_ms=100, backoff_max_ms=250)
    assert endpoint.fetches == 1
    with pytest.raises(TokenValidationError):
        endpoint.key("k1")  # the backoff is not over: no fetch, but the missing kid asked for one
    assert endpoint.fetches == 1
    clock[0] = 0.2
    with pytest.raises(TokenValidationError):
        endpoint.key("k1")  # fetched again, failed again: the next wait is 0.2 s
    assert endpoint.fetches == 2
    served[0] = {"k1": {**jwk, "kid": "k1"}}
    clock[0] = 0.5
    assert endpoint.key("k1").key_id == "k1"
    assert endpoint.fetches == 3
    clock[0] = 30.0
    assert endpoint.key("k1").key_id == "k1"
    assert endpoint.fetches == 3  # not due before refresh.ms
    served[0] = {"k1": {**jwk, "kid": "k1"}, "k2": {**jwk, "kid": "k2"}}
    assert endpoint.key("k2").key_id == "k2"  # an unknown kid asks for a fetch at once
    assert endpoint.fetches == 4
    with pytest.raises(TokenValidationError):
        endpoint.key("k3")
    with pytest.raises(TokenValidationError):
        endpoint.key("k3")  # asked for at most every 10 s
    assert endpoint.fetches == 5
    clock[0] = 100.0
    endpoint.key("k1")
    assert endpoint.fetches == 6  # refresh.ms passed
    with pytest.raises(InvalidConfigError, match="file, http or https"):
        JwksEndpoint("ftp://x/jwks")
