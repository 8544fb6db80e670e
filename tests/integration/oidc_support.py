"""Helpers for the OAUTHBEARER tests against :class:`odradek.testing_oidc.OidcIssuer`: a raw
SaslHandshake/SaslAuthenticate exchange over a plain socket, and a client-credentials request."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build
from odradek.security.sasl.oauthbearer import ClientInitialResponse
from odradek.testing_oidc import OidcIssuer

from .limits_support import recv_frame

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def trusting_jaas(ca: str) -> str:
    """A listener's OAUTHBEARER JAAS config whose JWKS fetches trust the PEM CA file ``ca``."""
    return f'{LOGIN_MODULE} required ssl.truststore.type="PEM" ssl.truststore.location="{ca}";'


def validating_listener(listener: str, issuer: OidcIssuer, ca: str) -> dict[str, str]:
    """Broker config validating OAUTHBEARER tokens of ``issuer`` on ``listener`` (lower case):
    Kafka's validator callback handler, :func:`trusting_jaas`, and the broker-wide JWKS endpoint,
    expected issuer and audience."""
    return {
        f"listener.name.{listener}.oauthbearer.sasl.jaas.config": trusting_jaas(ca),
        f"listener.name.{listener}.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
        "sasl.oauthbearer.expected.issuer": issuer.url,
        "sasl.oauthbearer.expected.audience": issuer.audience,
    }


def fetch_token(issuer: OidcIssuer, ca: str, client_id: str, secret: str, scope: str | None = None) -> str:
    """An access token from the issuer's token endpoint (client credentials, HTTP Basic)."""
    form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    request = urllib.request.Request(
        issuer.token_url,
        data=urllib.parse.urlencode(form).encode(),
        headers={"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cafile=ca)) as response:
        token: str = json.load(response)["access_token"]
    return token


@dataclass
class Exchange:
    """What a raw OAUTHBEARER exchange saw: each SaslAuthenticate response and whether the broker
    closed the connection at the end."""

    responses: list[Any] = field(default_factory=list)
    closed: bool = False
    answered_after_hold: bool | None = None
    """With ``hold_s``: whether an ApiVersions request sent that long after success was answered."""


def sasl_exchange(port: int, token: str, *, timeout: float = 5.0, hold_s: float | None = None) -> Exchange:
    """SaslHandshake v1 (OAUTHBEARER), SaslAuthenticate v2 with ``token``; on a JSON challenge the
    client's ``\\x01`` as RFC 7628 says; then waits for the broker to close or stay open. With
    ``hold_s``, after a success: an ApiVersions request that long after, answered or not."""
    handshake, authenticate = api_schema(17, 1), api_schema(36, 2)
    result = Exchange()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(encode_request(handshake, 1, "raw", build(handshake.request_type, mechanism="OAUTHBEARER")))
        frame = recv_frame(sock)
        assert frame is not None, "the broker closed the connection at the handshake"
        message = ClientInitialResponse(token).to_bytes()
        correlation = 2
        while True:
            try:
                sock.sendall(
                    encode_request(
                        authenticate, correlation, "raw", build(authenticate.request_type, auth_bytes=message)
                    )
                )
                frame = recv_frame(sock)
            except OSError:
                frame = None
            if frame is None:
                result.closed = True
                return result
            response = decode_response(36, 2, frame)[1]
            result.responses.append(response)
            if response.error_code != 0 or not response.auth_bytes or message == b"\x01":
                break
            message, correlation = b"\x01", correlation + 1
        sock.settimeout(0.5 if result.responses[-1].error_code == 0 else timeout)
        try:
            result.closed = sock.recv(1) == b""
        except TimeoutError:
            result.closed = False
        except OSError:
            result.closed = True
        if hold_s is not None and not result.closed:
            time.sleep(hold_s)
            versions = api_schema(18, 0)
            try:
                sock.sendall(encode_request(versions, 9, "raw", build(versions.request_type)))
                result.answered_after_hold = recv_frame(sock) is not None
            except OSError:
                result.answered_after_hold = False
    return result
