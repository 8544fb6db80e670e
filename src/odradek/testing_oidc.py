"""A small OpenID Connect issuer on 127.0.0.1 for tests and demos: the parts of an identity provider
Kafka's OAUTHBEARER clients and brokers talk to (KIP-768).

:class:`OidcIssuer` serves, over https (a PEM key store: key, certificate chain) or plain http:

- ``GET /.well-known/openid-configuration``: the discovery document (OpenID Connect Discovery 1.0):
  ``issuer``, ``jwks_uri``, ``token_endpoint``, ``grant_types_supported`` (``client_credentials``),
  ``token_endpoint_auth_methods_supported`` (``client_secret_basic``, ``client_secret_post``),
  ``id_token_signing_alg_values_supported`` (``RS256``), ``scopes_supported``.
- ``GET /jwks``: the public signing keys (RFC 7517), each with its ``kid``, ``use: sig``, ``alg``.
- ``POST /token``: the client-credentials grant (RFC 6749 §4.4). The body is
  ``application/x-www-form-urlencoded`` (``grant_type=client_credentials[&scope=a b]``), at most
  :data:`MAX_BODY_BYTES`; the client authenticates with HTTP Basic (``client_secret_basic``: the
  form-urlencoded id and secret, RFC 6749 §2.3.1) or ``client_id``/``client_secret`` in the body.
  Success (200, ``Cache-Control: no-store``): ``{"access_token", "token_type": "Bearer",
  "expires_in", "scope"}``; the token is an RS256 JWT with ``iss``, ``sub`` (the client id, or the
  client's own subject), ``aud`` (:attr:`OidcIssuer.audience`), ``iat``, ``nbf``, ``exp``,
  ``scope`` (space-separated), ``jti``, ``client_id``. Errors as RFC 6749 §5.2: 400
  ``invalid_request`` / ``unsupported_grant_type`` / ``invalid_scope``, 401 ``invalid_client``
  (with ``WWW-Authenticate: Basic``).

Keys rotate with :meth:`OidcIssuer.rotate`: a new RSA key with a new ``kid`` signs from then on; the
old one is dropped from the JWKS (or kept, ``keep_old=True``). :meth:`OidcIssuer.mint` signs a
token directly (any claims, any key, headers overridden) for tests of bad tokens. Counters
(``jwks_requests``, ``token_requests``) let a test see what a broker or client fetched;
``jwks_status`` makes the JWKS endpoint fail.

The server runs on a daemon thread (``ThreadingHTTPServer``); the public methods may be called
from any thread (the key list is swapped under a lock).
"""

from __future__ import annotations

import base64
import binascii
import http.server
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote_plus

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["MAX_BODY_BYTES", "OidcClient", "OidcIssuer", "SigningKey", "oidc_issuer"]

MAX_BODY_BYTES = 16384
"""The largest token request body read; longer ones are answered 413 unread."""


@dataclass
class OidcClient:
    """A registered client: its secret, the subject of its tokens, the scopes it may ask for
    (granted when it asks for none: ``default_scope``) and its tokens' life (None: the issuer's)."""

    secret: str
    subject: str | None = None
    scopes: tuple[str, ...] = ("kafka",)
    default_scope: tuple[str, ...] = ("kafka",)
    lifetime_s: int | None = None


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private_key: rsa.RSAPrivateKey = field(repr=False)

    @classmethod
    def generate(cls, kid: str | None = None) -> SigningKey:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return cls(kid or f"key-{uuid.uuid4().hex[:12]}", key)

    def jwk(self) -> dict[str, Any]:
        public: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(self.private_key.public_key(), as_dict=True)
        return {**public, "kid": self.kid, "use": "sig", "alg": "RS256"}


class OidcIssuer:
    """See the module docstring. ``keystore``: a PEM file with the server's key and certificate
    chain (https); None serves plain http. ``token_lifetime_s`` is each issued token's life."""

    def __init__(
        self,
        keystore: str | None = None,
        *,
        host: str = "localhost",
        audience: str = "kafka",
        token_lifetime_s: int = 300,
    ) -> None:
        self.audience = audience
        self.token_lifetime_s = token_lifetime_s
        self.clients: dict[str, OidcClient] = {}
        self.jwks_requests = 0
        self.jwks_status = 200
        """Set to an error status (503) to make the JWKS endpoint fail, as an issuer's outage."""
        self.token_requests = 0
        self.issued: list[dict[str, Any]] = []
        """The claims of every token the endpoint issued, in order."""
        self._lock = threading.Lock()
        self._keys = [SigningKey.generate()]
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        scheme = "http"
        if keystore is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(keystore)
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://{host}:{self._httpd.server_address[1]}"
        """The issuer identifier (``iss``); endpoints hang below it."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="oidc-issuer", daemon=True)
        self._thread.start()

    # --- endpoints --------------------------------------------------------------------------

    @property
    def discovery_url(self) -> str:
        return f"{self.url}/.well-known/openid-configuration"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": self.jwks_url,
            "token_endpoint": self.token_url,
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "response_types_supported": ["token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": sorted({s for c in self.clients.values() for s in c.scopes}),
        }

    # --- keys and tokens ----------------------------------------------------------------------

    @property
    def signing_key(self) -> SigningKey:
        with self._lock:
            return self._keys[-1]

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            keys = list(self._keys)
        return {"keys": [k.jwk() for k in keys]}

    def rotate(self, *, keep_old: bool = False) -> SigningKey:
        """Sign with a fresh key (new ``kid``) from now on; the old keys leave the JWKS unless kept."""
        key = SigningKey.generate()
        with self._lock:
            self._keys = [*self._keys, key] if keep_old else [key]
        return key

    def register(self, client_id: str, secret: str, **options: Any) -> OidcClient:
        client = OidcClient(secret, **options)
        self.clients[client_id] = client
        return client

    def mint(
        self,
        sub: str,
        *,
        scope: str = "kafka",
        lifetime_s: int | None = None,
        key: SigningKey | None = None,
        headers: dict[str, Any] | None = None,
        algorithm: str = "RS256",
        **claims: Any,
    ) -> str:
        """A token as the endpoint issues it; ``claims`` override or add (``aud=..., iss=...``);
        ``key`` signs instead of the current key; ``algorithm="none"`` makes an unsigned one."""
        now = int(time.time())
        life = self.token_lifetime_s if lifetime_s is None else lifetime_s
        body = {
            "iss": self.url,
            "sub": sub,
            "aud": self.audience,
            "iat": now,
            "nbf": now,
            "exp": now + life,
            "scope": scope,
            "jti": uuid.uuid4().hex,
            **claims,
        }
        signer = key or self.signing_key
        head = {"kid": signer.kid, **(headers or {})}
        if algorithm == "none":
            header = {"alg": "none", "typ": "JWT", **head}
            parts = [json.dumps(part, separators=(",", ":")).encode() for part in (header, body)]
            return ".".join(base64.urlsafe_b64encode(p).rstrip(b"=").decode() for p in parts) + "."
        return jwt.encode(body, signer.private_key, algorithm=algorithm, headers=head)

    def _grant(self, form: dict[str, str], authorization: str | None) -> tuple[int, dict[str, Any]]:
        """The token endpoint's answer: (HTTP status, JSON body)."""
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if authorization is not None:
            scheme, _, encoded = authorization.partition(" ")
            if scheme.lower() != "basic":
                return 401, {"error": "invalid_client", "error_description": "unsupported authentication scheme"}
            try:
                decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return 401, {"error": "invalid_client", "error_description": "malformed Basic credentials"}
            raw_id, sep, raw_secret = decoded.partition(":")
            if not sep:
                return 401, {"error": "invalid_client", "error_description": "malformed Basic credentials"}
            client_id, secret = unquote_plus(raw_id), unquote_plus(raw_secret)
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type", "error_description": "only client_credentials"}
        client = self.clients.get(client_id or "")
        if client is None or secret is None or secret != client.secret:
            return 401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"}
        asked = tuple(form.get("scope", "").split()) or client.default_scope
        refused = [s for s in asked if s not in client.scopes]
        if refused:
            return 400, {"error": "invalid_scope", "error_description": f"scope {refused[0]} is not granted"}
        scope = " ".join(asked)
        life = self.token_lifetime_s if client.lifetime_s is None else client.lifetime_s
        token = self.mint(client.subject or str(client_id), scope=scope, lifetime_s=life, client_id=client_id)
        self.issued.append(jwt.decode(token, options={"verify_signature": False}))
        body = {"access_token": token, "token_type": "Bearer", "expires_in": life, "scope": scope}
        return 200, body

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(issuer: OidcIssuer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/.well-known/openid-configuration":
                self._send(200, issuer.discovery())
            elif path == "/jwks":
                issuer.jwks_requests += 1
                if issuer.jwks_status != 200:
                    self._send(issuer.jwks_status, {"error": "temporarily_unavailable"})
                else:
                    self._send(200, issuer.jwks())
            else:
                self._send(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != "/token":
                self._send(404, {"error": "not_found"})
                return
            issuer.token_requests += 1
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                self._send(413 if length > 0 else 400, {"error": "invalid_request"})
                return
            raw = self.rfile.read(length)
            try:
                pairs = parse_qs(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(raw))
            except (UnicodeDecodeError, ValueError):
                self._send(400, {"error": "invalid_request", "error_description": "malformed form body"})
                return
            if any(len(v) != 1 for v in pairs.values()):
                self._send(400, {"error": "invalid_request", "error_description": "repeated parameter"})
                return
            form = {k: v[0] for k, v in pairs.items()}
            status, body = issuer._grant(form, self.headers.get("Authorization"))
            headers = {"WWWW-Authenticate": 'Basic realm="odradek-oidc"'} if status == 401 else None
            self._send(status, body, headers)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def oidc_issuer(keystore: str | None = None, **options: Any) -> Iterator[OidcIssuer]:
    """An :class:`OidcIssuer` for the block's duration."""
    issuer = OidcIssuer(keystore, **options)
    try:
        yield issuer
    finally:
        issuer.close()
