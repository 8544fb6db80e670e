"""Delegation tokens' pure parts: ids and HMACs, lifetimes and renew/expire decisions, the
Describe filter, the token cache and its SCRAM login, Kafka's znode JSON, the token messages'
codec (v0, -1 timestamps) under mutation, the client's ``tokenauth`` option and the tool's
argument checks and table."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import io
import json
import pathlib
import random
import struct
from typing import Any

import pytest

from odradek.cli import delegation_tokens as tool
from odradek.client.delegation_tokens import DelegationToken
from odradek.client.security import ClientSecurity
from odradek.errors import ErrorCode, InvalidConfigError, InvalidRequestError, UnsupportedVersionError
from odradek.metadata.delegation_token_znodes import decode_token_info, encode_token_info
from odradek.metadata.scram_credentials import CredentialCache
from odradek.protocol.codec import (
    api_schema,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)
from odradek.protocol.messages import build, nested
from odradek.security.delegation_token import (
    TokenCache,
    TokenInformation,
    TokenSettings,
    create_hmac,
    expire,
    filter_token,
    hmac_base64,
    new_token,
    new_token_id,
    renew,
)
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import SaslAuthenticationError
from odradek.security.sasl.scram import ScramSaslClient, ScramSaslServer

ALICE, BOB, CAROL, DAVE = (KafkaPrincipal.user(n) for n in ("alice", "bob", "carol", "dave"))
SETTINGS = TokenSettings("secret", max_lifetime_ms=10_000, expiry_time_ms=3_000, expiry_check_interval_ms=1_000)
NOW = 1_700_000_000_000


def token(**changes: Any) -> TokenInformation:
    base = new_token(SETTINGS, ALICE, ALICE, [BOB], -1, NOW, token_id="tok")
    return TokenInformation(**{**base.__dict__, **changes})


def test_ids_and_hmacs_are_kafkas() -> None:
    ids = {new_token_id() for _ in range(100)}
    assert len(ids) == 100 and all(len(i) == 22 and "=" not in i for i in ids)
    assert all(set(i) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for i in ids)
    mac = create_hmac("tok", "secret")
    assert mac == hmac.new(b"secret", b"tok", hashlib.sha512).digest() and len(mac) == 64
    assert hmac_base64(mac) == base64.b64encode(mac).decode() and len(hmac_base64(mac)) == 88


def test_settings_read_the_secret_or_its_alias() -> None:
    values = {
        "delegation.token.secret.key": None,
        "delegation.token.master.key": "old",
        "delegation.token.max.lifetime.ms": 5,
        "delegation.token.expiry.time.ms": 4,
        "delegation.token.expiry.check.interval.ms": 3,
    }
    settings = TokenSettings.from_values(values.__getitem__)
    assert settings == TokenSettings("old", 5, 4, 3) and settings.enabled
    values.update({"delegation.token.secret.key": "new"})
    assert TokenSettings.from_values(values.__getitem__).secret_key == "new"
    values.update({"delegation.token.secret.key": "", "delegation.token.master.key": None})
    assert not TokenSettings.from_values(values.__getitem__).enabled


@pytest.mark.parametrize(
    ("asked", "max_after", "expiry_after"),
    [(-1, 10_000, 3_000), (0, 10_000, 3_000), (2_000, 2_000, 2_000), (5_000, 5_000, 3_000), (99_999, 10_000, 3_000)],
)
def test_new_token_lifetimes(asked: int, max_after: int, expiry_after: int) -> None:
    info = new_token(SETTINGS, ALICE, DAVE, [BOB], asked, NOW)
    assert (info.issue_timestamp, info.max_timestamp - NOW, info.expiry_timestamp - NOW) == (
        NOW,
        max_after,
        expiry_after,
    )
    assert (info.owner, info.token_requester, info.renewers) == (ALICE, DAVE, (BOB,))


def test_renew_bounds_and_refusals() -> None:
    info = token()
    assert renew(SETTINGS, CAROL, info, 1000, NOW) == (ErrorCode.delegation_token_owner_mismatch, None)
    requested_by_dave = token(token_requester=DAVE)
    assert renew(SETTINGS, DAVE, requested_by_dave, 1000, NOW)[0] == ErrorCode.delegation_token_owner_mismatch
    error, renewed = renew(SETTINGS, BOB, info, 1000, NOW + 500)
    assert error == ErrorCode.none and renewed is not None and renewed.expiry_timestamp == NOW + 1500
    _, renewed = renew(SETTINGS, ALICE, info, -1, NOW + 500)  # negative: the default expiry time
    assert renewed is not None and renewed.expiry_timestamp == NOW + 3500
    _, renewed = renew(SETTINGS, ALICE, info, 10**9, NOW + 500)  # never past the max
    assert renewed is not None and renewed.expiry_timestamp == info.max_timestamp
    assert renew(SETTINGS, ALICE, info, 1000, info.expiry_timestamp + 1) == (ErrorCode.delegation_token_expired, None)


def test_expire_decisions() -> None:
    info = token()
    assert expire(CAROL, info, -1, NOW) == (ErrorCode.delegation_token_owner_mismatch, None)
    error, expired = expire(BOB, info, -1, info.max_timestamp + 10)  # immediate, even when already expired
    assert error == ErrorCode.none and expired is not None and expired.expiry_timestamp == info.max_timestamp + 10
    assert expire(ALICE, info, 100, info.expiry_timestamp + 1) == (ErrorCode.delegation_token_expired, None)
    _, later = expire(ALICE, info, 100, NOW)
    assert later is not None and later.expiry_timestamp == NOW + 100
    _, capped = expire(ALICE, info, 10**9, NOW)
    assert capped is not None and capped.expiry_timestamp == info.max_timestamp


def test_describe_filter() -> None:
    info = token(token_requester=DAVE)
    no, yes = (lambda _: False), (lambda _: True)
    assert filter_token(ALICE, None, info, no, no)  # owner
    assert filter_token(BOB, None, info, no, no)  # renewer
    assert filter_token(DAVE, None, info, no, no)  # requester
    assert not filter_token(CAROL, None, info, no, no)
    assert filter_token(CAROL, None, info, lambda t: t == "tok", no)  # DESCRIBE on the token
    assert filter_token(CAROL, None, info, no, lambda o: o == ALICE)  # DESCRIBE_TOKENS on its owner
    assert not filter_token(ALICE, [CAROL], info, yes, yes)  # not among the owners asked
    assert filter_token(CAROL, [BOB], info, yes, no)
    assert not filter_token(ALICE, [], info, yes, yes)


def _login(
    cache: CredentialCache, mechanism: str, user: str, password: str, *, tokenauth: bool = True
) -> ScramSaslServer:
    server = ScramSaslServer(mechanism, cache.lookup(mechanism), tokens=cache.token_lookup(mechanism))
    client = ScramSaslClient(mechanism, user, password, extensions={"tokenauth": "true"} if tokenauth else None)
    challenge = b""
    while True:
        response = client.evaluate_challenge(challenge)
        if response is None:
            break
        challenge = server.evaluate_response(response)
    assert client.complete
    return server


def test_token_cache_and_scram_login() -> None:
    cache = CredentialCache()
    info = token()
    mac = create_hmac("tok", "secret")
    cache.tokens.update(info, mac)
    assert cache.tokens.token_for_hmac(mac) == info and cache.tokens.owner("tok") == "alice"
    first = cache.tokens.credential("SCRAM-SHA-256", "tok")
    assert first is not None and first.iterations == 4096
    cache.tokens.update(token(expiry_timestamp=NOW + 1), mac)  # same HMAC: credentials kept
    assert cache.tokens.credential("SCRAM-SHA-256", "tok") is first
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        server = _login(cache, mechanism, "tok", hmac_base64(mac))
        assert server.authorization_id == "alice" and server.token_authenticated
        assert server.credential_lifetime_ms == NOW + 1
    with pytest.raises(SaslAuthenticationError, match="Token Authentication failed: Invalid tokenId : nope"):
        _login(cache, "SCRAM-SHA-256", "nope", hmac_base64(mac))
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        _login(cache, "SCRAM-SHA-256", "tok", hmac_base64(mac), tokenauth=False)  # an id is no user
    with pytest.raises(SaslAuthenticationError):
        _login(cache, "SCRAM-SHA-256", "tok", base64.b64encode(b"x" * 64).decode())
    cache.tokens.remove("tok")
    assert cache.tokens.token("tok") is None and cache.tokens.token_for_hmac(mac) is None and len(cache.tokens) == 0
    fresh = TokenCache()
    assert fresh.credential("SCRAM-SHA-256", "tok") is None and fresh.owner("tok") is None


def test_znode_json_is_kafkas() -> None:
    info = token(owner=KafkaPrincipal.user("a b*"), token_requester=DAVE)
    data = encode_token_info(info)
    body = json.loads(data)
    assert body == {
        "version": 3,
        "owner": "User%3Aa%20b%2A",
        "tokenRequester": "User%3Adave",
        "renewers": ["User%3Abob"],
        "issueTimestamp": NOW,
        "maxTimestamp": NOW + 10_000,
        "expiryTimestamp": NOW + 3_000,
        "tokenId": "tok",
    }
    assert b" " not in data and decode_token_info(data) == info
    legacy = dict(body, version=1)
    del legacy["tokenRequester"]
    decoded = decode_token_info(json.dumps(legacy).encode())
    assert decoded is not None and decoded.token_requester == decoded.owner
    assert decode_token_info(b"") is None
    for bad in (
        b"[]",
        b"{",
        json.dumps(dict(body, version=4)).encode(),
        json.dumps(dict(body, owner="alice")).encode(),
    ):
        with pytest.raises(ValueError):
            decode_token_info(bad)
    for key in ("renewers", "issueTimestamp", "tokenId"):
        with pytest.raises(ValueError):
            decode_token_info(json.dumps({k: v for k, v in body.items() if k != key}).encode())


def _requests() -> list[tuple[int, int, Any]]:
    out = []
    for version in range(4):
        schema = api_schema(38, version)
        renewers = (build(nested(schema.request_type, "CreatableRenewers"), principal_type="User", principal_name="b"),)
        fields: dict[str, Any] = {"renewers": renewers, "max_lifetime": datetime.timedelta(milliseconds=-1)}
        if version >= 3:
            fields.update(owner_principal_type="User", owner_principal_name="alice")
        out.append((38, version, build(schema.request_type, **fields)))
        schema = api_schema(41, version)
        owner = build(
            nested(schema.request_type, "DescribeDelegationTokenOwner"), principal_type="User", principal_name="a"
        )
        out.append((41, version, build(schema.request_type, owners=(owner,))))
    for version in range(3):
        period = datetime.timedelta(milliseconds=-1)
        out.append((39, version, build(api_schema(39, version).request_type, hmac=b"h" * 64, renew_period=period)))
        expire_type = api_schema(40, version).request_type
        out.append((40, version, build(expire_type, hmac=b"h" * 64, expiry_time_period=period)))
    return out


def test_token_messages_round_trip_with_v0_as_v1() -> None:
    frames = {}
    for api_key, version, request in _requests():
        schema = api_schema(api_key, version)
        frame = encode_request(schema, 7, "c", request)
        body = frame[4:]
        decoded = decode_request(schema, body, 8 + 2 + 1 + (1 if schema.flexible else 0))
        assert decoded == request
        frames[(api_key, version)] = frame
    assert nested(api_schema(41, 0).response_type, "DescribedDelegationTokenRenewer")  # handlers build v0 too
    for api_key in (38, 39, 40, 41):
        v0, v1 = frames[(api_key, 0)], frames[(api_key, 1)]
        assert v0[:6] + v0[8:] == v1[:6] + v1[8:]  # only the version in the header differs
    for api_key, version in ((38, 0), (38, 3), (39, 2), (40, 1)):
        schema = api_schema(api_key, version)
        fields: dict[str, Any] = {
            "error_code": ErrorCode.delegation_token_expired,
            "throttle_time": datetime.timedelta(0),
        }
        if api_key == 38:
            fields.update(principal_type="User", principal_name="a", issue_timestamp=-1, max_timestamp=-1, token_id="")
            fields.update(hmac=b"")
            if version >= 3:
                fields.update(token_requester_principal_type="User", token_requester_principal_name="a")
        fields["expiry_timestamp"] = -1
        response = build(schema.response_type, **fields)
        _, decoded = decode_response(api_key, version, encode_response(schema, 9, response)[4:])
        assert decoded.expiry_timestamp == -1 and decoded.error_code == ErrorCode.delegation_token_expired


def test_mutated_token_requests_only_raise_precise_errors() -> None:
    rng = random.Random(48)
    for api_key, version, request in _requests():
        schema = api_schema(api_key, version)
        frame = bytearray(encode_request(schema, 1, "fuzz", request)[4:])
        header = 8 + 2 + 4 + (1 if schema.flexible else 0)
        for _ in range(400):
            body = bytearray(frame)
            for _ in range(rng.randint(1, 3)):
                if len(body) <= header:
                    body += rng.randbytes(4)
                at = rng.randrange(header, len(body))
                kind = rng.randrange(4)
                if kind == 0:
                    body[at] ^= 1 << rng.randrange(8)
                elif kind == 1 and at + 4 <= len(body):
                    struct.pack_into(">i", body, at, rng.choice((-2, -1, 2**31 - 1, 0x7FFFFF, 64)))
                elif kind == 2:
                    del body[at:]
                else:
                    body[at:at] = rng.randbytes(rng.randint(1, 8))
            try:
                decode_request(schema, bytes(body), header)
            except (InvalidRequestError, UnsupportedVersionError):
                pass


def test_client_token_login_option() -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="tok" '
        'password="pw" tokenauth="TRUE";',
    }
    security = ClientSecurity.from_properties(props)
    assert security.sasl_token_auth and security.sasl_username == "tok"
    first = security.sasl_client().evaluate_challenge(b"")
    assert first is not None and first.endswith(b",tokenauth=true") and first.startswith(b"n,,n=tok,r=")
    plain = dict(props, **{"sasl.jaas.config": props["sasl.jaas.config"].replace(' tokenauth="TRUE"', "")})
    assert not ClientSecurity.from_properties(plain).sasl_token_auth
    with pytest.raises(InvalidConfigError, match="tokenauth needs a SCRAM"):
        ClientSecurity.from_properties(
            dict(
                props,
                **{
                    "sasl.mechanism": "PLAIN",
                    "sasl.jaas.config": props["sasl.jaas.config"].replace("scram.Scram", "plain.Plain"),
                },
            )
        )


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--create", "--describe"], "exactly one action"),
        (["--describe"], '"[bootstrap-server]"'),
        (["--bootstrap-server", "b", "--describe"], '"[command-config]"'),
        (["--bootstrap-server", "b", "--command-config", "f", "--create"], '"[max-life-time-period]"'),
        (["--bootstrap-server", "b", "--command-config", "f", "--renew", "--hmac", "h"], '"[renew-time-period]"'),
        (["--bootstrap-server", "b", "--command-config", "f", "--expire", "--expiry-time-period", "1"], '"[hmac]"'),
        (
            ["--bootstrap-server", "b", "--command-config", "f", "--describe", "--hmac", "h"],
            "can't be used with option \"[hmac]\"",
        ),
        (
            ["--bootstrap-server", "b", "--command-config", "f", "--renew", "--hmac", "h", "--renew-time-period", "1",
             "--owner-principal", "User:a"],
            "can't be used with option \"[owner-principal]\"",
        ),
    ],
)  # fmt: skip
def test_tool_checks_its_arguments(argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert tool.main(argv) == 2
    assert problem in capsys.readouterr().out


def test_tool_prints_kafkas_token_table() -> None:
    info = token()
    lines = tool.token_table([DelegationToken(info, b"\x00" * 64)])
    assert lines[0] == "" and lines[2] == ""
    assert lines[1].startswith("TOKENID         HMAC                           OWNER           REQUESTER       ")
    row = lines[3].split()
    assert row[:5] == ["tok", base64.b64encode(b"\x00" * 64).decode(), "User:alice", "User:alice", "[User:bob]"]
    assert all(len(d) == 16 and d[10] == "T" for d in row[5:])
    out = io.StringIO()
    out.write("\n".join(lines))
    assert out.getvalue().count("\n") == 3


def test_recorded_token_frames_decode() -> None:
    """tests/data/client_frames/odradek_tokens.bin (``tools/record_traffic.py --clients odradek_tokens``)
    holds every served version of the four APIs, and each frame decodes whole."""
    path = pathlib.Path(__file__).resolve().parents[1] / "data" / "client_frames" / "odradek_tokens.bin"
    data, pos, seen = path.read_bytes(), 0, set()
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        frame = data[pos + 4 : pos + 4 + length]
        pos += 4 + length
        api_key, version = struct.unpack_from(">hh", frame, 4)
        schema = api_schema(api_key, version)
        body = memoryview(frame)[4:]
        header = parse_request_header(body, schema.flexible)
        request = decode_request(schema, body, header.size)
        assert isinstance(request, schema.request_type) and header.client_id == "odradek-tokens"
        seen.add((api_key, version))
    assert {(k, v) for k in (38, 41) for v in range(4)} | {(k, v) for k in (39, 40) for v in range(3)} <= seen
