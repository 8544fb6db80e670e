"""Authentication cost: new authenticated connections per second, per SASL mechanism.

Part of ``bench/security_bench.py`` (``--auth-seconds``). One client thread opens connections one
after another to a broker process for ``seconds`` per mechanism; each connection is TCP connect,
SaslHandshake v1 and the mechanism's SaslAuthenticate v2 exchange (for the ``PLAINTEXT`` baseline:
ApiVersions v0), then close. Listeners are SASL_PLAINTEXT so TLS does not blur the figures:

- ``PLAIN``: one message, a password compared with the JAAS entry's;
- ``SCRAM-SHA-256``: two round trips; the figure includes the client's own PBKDF2 (4096
  iterations, hashlib's C code) on every connection, as a Kafka client pays it;
- ``OAUTHBEARER-unsecured``: Kafka's unsecured validator (``alg: none``);
- ``OAUTHBEARER-JWKS``: Kafka 3.9's ``OAuthBearerValidatorCallbackHandler``, an RS256 token (2048-bit
  key) minted once by :class:`odradek.testing_oidc.OidcIssuer` and verified against the issuer's
  JWKS (fetched over http at start, then cached) with audience and issuer checked.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build
from odradek.security.sasl.oauthbearer import ClientInitialResponse
from odradek.security.sasl.scram import ScramSaslClient

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def _request(api_key: int, version: int, correlation_id: int, **fields: object) -> bytes:
    schema = api_schema(api_key, version)
    return encode_request(schema, correlation_id, "auth-bench", build(schema.request_type, **fields))


def connect_once(
    port: int, mechanism: str | None, first_token: Callable[[], bytes], respond: Callable[[bytes], bytes]
) -> None:
    """One connection: authenticate (or ApiVersions for None), then close; ConnectionError on failure."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        if mechanism is None:
            sock.sendall(_request(18, 0, 1))
            _read_frame(sock)
            return
        sock.sendall(_request(17, 1, 1, mechanism=mechanism))
        _read_frame(sock)
        token, correlation = first_token(), 2
        while True:
            sock.sendall(_request(36, 2, correlation, auth_bytes=token))
            response = decode_response(36, 2, _read_frame(sock))[1]
            if response.error_code != 0:
                raise ConnectionError(f"authentication failed: {response.error_message}")
            if not response.auth_bytes and mechanism != "SCRAM-SHA-256":
                return
            token = respond(bytes(response.auth_bytes))
            if not token:
                return
            correlation += 1


def scram_exchange(user: str, password: str) -> tuple[Callable[[], bytes], Callable[[bytes], bytes]]:
    """SCRAM-SHA-256's client as (first message, answer to a challenge), one exchange at a time."""
    state: dict[str, ScramSaslClient] = {}

    def first() -> bytes:
        client = ScramSaslClient("SCRAM-SHA-256", user, password)
        state["client"] = client
        return client.evaluate_challenge(b"") or b""

    def respond(challenge: bytes) -> bytes:
        client = state["client"]
        if client.complete:
            return b""
        answer = client.evaluate_challenge(challenge)
        return answer or b""

    return first, respond


def rate(seconds: float, once: Callable[[], None]) -> dict[str, float]:
    """Connections per second of ``once`` run back to back for ``seconds`` (after 20 warm-up ones)."""
    for _ in range(20):
        once()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        once()
        count += 1
    elapsed = time.perf_counter() - start
    return {
        "connections": count,
        "connections_per_s": round(count / elapsed, 1),
        "ms_per_connection": round(1000 * elapsed / count, 3),
    }


def oauthbearer_message(token: str) -> bytes:
    return ClientInitialResponse(token).to_bytes()
