"""Authentication cost: new authenticated connections per second, per SASL mechanism.

Part of ``bench/security_bench.py`` (``--auth-seconds``). One client thread opens connections one
after another to a broker process for ``seconds`` per mechanism; each connection is TCP connect,
SaslHandshake v1 and the mechanism's SaslAuthenticate v2 exchange driven by odradek's own client
mechanism (:class:`odradek.security.sasl.SaslClient`, the same steps as
``KafkaConnection``'s login), then close; for the ``PLAINTEXT`` baseline: ApiVersions v0.
Listeners are SASL_PLAINTEXT so TLS does not blur the figures:

- ``PLAIN``: one message, a password compared with the JAAS entry's;
- ``SCRAM-SHA-256`` (4096 iterations) and ``SCRAM-SHA-512`` (the default 4096 too): two round
  trips; the figure includes the client's own PBKDF2 (hashlib's C code) on every connection, as
  a Kafka client pays it;
- ``OAUTHBEARER-unsecured``: Kafka's unsecured validator (``alg: none``);
- ``OAUTHBEARER-JWKS``: Kafka 3.9's ``OAuthBearerValidatorCallbackHandler``, an RS256 token (2048-bit
  key) minted once by :class:`odradek.testing_oidc.OidcIssuer` and verified against the issuer's
  JWKS (fetched over http at start, then cached) with audience and issuer checked;
- ``GSSAPI``: a throwaway MIT KDC on 127.0.0.1 (:class:`odradek.testing_kdc.KerberosKdc`); the
  client logs in from a keytab once and reuses its service ticket (fetched on the first login
  only); the broker decrypts it with its keytab's key and records the authenticator in MIT krb5's
  replay cache.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build
from odradek.security.sasl import SaslClient

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'
KERBEROS_SERVICE = "kafka/127.0.0.1"
"""The broker's service principal (without the realm) for GSSAPI."""


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


def connect_once(port: int, new_client: Callable[[], SaslClient] | None) -> None:
    """One connection: authenticate with a fresh client from ``new_client`` (ApiVersions for
    None), then close; ConnectionError when the broker refuses or the exchange does not complete."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        if new_client is None:
            sock.sendall(_request(18, 0, 1))
            _read_frame(sock)
            return
        client = new_client()
        sock.sendall(_request(17, 1, 1, mechanism=client.mechanism))
        _read_frame(sock)
        token, correlation = client.evaluate_challenge(b""), 2
        while token is not None:
            sock.sendall(_request(36, 2, correlation, auth_bytes=token))
            response = decode_response(36, 2, _read_frame(sock))[1]
            if response.error_code != 0:
                raise ConnectionError(f"authentication failed: {response.error_message}")
            if client.complete:
                break
            token = client.evaluate_challenge(bytes(response.auth_bytes))
            correlation += 1
        if not client.complete:
            raise ConnectionError(f"SASL/{client.mechanism} ended before completing")


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
