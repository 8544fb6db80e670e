"""The SASL exchange on one connection of a SASL listener (Kafka's ``SaslServerAuthenticator``).

Sans-IO: :meth:`SaslServerAuthenticator.receive` takes each request frame (its body, without the
size prefix) that arrives before the connection is authenticated and returns a :class:`SaslStep`
saying what the connection does: write a response, hand the frame to the request handler
(ApiVersions), or close — after ``connection.failed.authentication.delay.ms`` when an
authentication failed, the failure's response written first.

States (Kafka's ``SaslState``):

- ``INITIAL_REQUEST`` / ``HANDSHAKE_OR_VERSIONS_REQUEST``: ApiVersions (any number of times, each
  answered by the request handler) or SaslHandshake (17) v0-v1. A mechanism not enabled on the
  listener is answered UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection
  closes. Any other request, or bytes that are not a Kafka request (a pre-0.10 GSSAPI client),
  close the connection at once (Kafka's IllegalSaslStateException: "Unexpected Kafka request of
  type X during SASL handshake").
- ``AUTHENTICATE`` after handshake v1 (KIP-152): SaslAuthenticate (36) v0-v2 frames carry the
  tokens; anything else closes the connection. A failed token is answered with the mechanism's
  error (SASL_AUTHENTICATION_FAILED with Kafka's message, ILLEGAL_SASL_STATE), then the
  connection closes. When the mechanism completes, the answer carries ``session_lifetime_ms``
  (v1+): ``connections.max.reauth.ms``, or 0 when sessions do not expire; a mechanism whose
  credential expires (OAUTHBEARER's token ``exp``: ``credential_lifetime_ms``) shortens it to
  the credential's remaining life, and then sets it when ``connections.max.reauth.ms`` is 0
  (Kafka's ``ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs``); a SCRAM login with a
  delegation token (``tokenauth=true``) is bounded by the token's expiry the same way, and its
  session is marked ``token_authenticated``.
- ``AUTHENTICATE`` after handshake v0 (the legacy flow): each frame is a raw token with no Kafka
  header (an empty one is a frame of size 0), each answer a raw size-prefixed challenge (empty
  ones included, except GSSAPI's last, which Kafka does not send); a failure closes the
  connection with no answer. A mechanism's retriable failure (GSSAPI: a replayed
  authenticator) closes the connection unanswered in both flows.
- ``COMPLETE``: :attr:`session` is the connection's :class:`~odradek.server.session.Session`.
- KIP-368 re-authentication (a session that expires): a SaslHandshake v1 on an
  authenticated connection starts :meth:`reauthenticate`; the mechanism and then the principal
  must stay the same (REAUTH_BAD_MECHANISM: UNSUPPORTED_SASL_MECHANISM; another principal:
  SASL_AUTHENTICATION_FAILED "Cannot change principals during re-authentication"); success
  extends the session, failure closes the connection.

One authenticator per connection; the connection's worker (event loop) calls it, one frame at
a time. SCRAM's server side computes HMACs of stored keys only (no PBKDF2): each step is cheap.
"""

from __future__ import annotations

import datetime
import enum
import logging
import struct
import time
from dataclasses import dataclass
from typing import Any

from odradek.errors import ErrorCode, InvalidRequestError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_request, encode_response, parse_request_header, peek_api
from odradek.protocol.messages import build
from odradek.security.principal import KafkaPrincipal, sasl_principal
from odradek.security.sasl import RetriableSaslError, SaslAuthenticationError, SaslServer
from odradek.server.listener_security import ListenerSecurity
from odradek.server.request_channel import CloseConnection
from odradek.server.session import Session

__all__ = ["SaslServerAuthenticator", "SaslState", "SaslStep"]

log = logging.getLogger(__name__)

SASL_HANDSHAKE_VERSIONS = (0, 1)
SASL_AUTHENTICATE_VERSIONS = (0, 2)


class SaslState(enum.Enum):
    INITIAL_REQUEST = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    REAUTH_AUTHENTICATE = "REAUTH_AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What the connection does with one frame: write ``response`` (a whole frame, size prefix
    included) if any; hand the frame to the request handler when ``forward``; when ``failure``
    is set, log it once, wait ``delay_s`` (the response still unsent), write the response and
    close; when ``close`` is set, log it and close at once, writing nothing."""

    response: bytes | None = None
    forward: bool = False
    failure: str | None = None
    delay_s: float = 0.0
    close: str | None = None


class SaslServerAuthenticator:
    def __init__(
        self, security: ListenerSecurity, client_host: str, *, clock: Any = time.monotonic, wall_clock: Any = time.time
    ) -> None:
        self.security = security
        self.client_host = client_host
        self._clock = clock
        self._wall_clock = wall_clock
        self._session_lifetime_ms = 0
        self.state = SaslState.INITIAL_REQUEST
        self._server: SaslServer | None = None
        self._legacy = False
        self._mechanism: str | None = None
        self.session: Session | None = None
        self.session_expires_at: float | None = None
        """Monotonic time after which a request other than SaslHandshake closes the connection
        (KIP-368); None when sessions do not expire."""

    @property
    def authenticating(self) -> bool:
        return self.state not in (SaslState.COMPLETE, SaslState.FAILED)

    def session_expired(self) -> bool:
        return self.session_expires_at is not None and self._clock() > self.session_expires_at

    def can_reauthenticate(self) -> bool:
        return self.state is SaslState.COMPLETE and self.session_expires_at is not None and not self._legacy

    def reauthenticate(self) -> None:
        """Start KIP-368 re-authentication: the next frame is the client's SaslHandshake."""
        self.state = SaslState.REAUTH_PROCESS_HANDSHAKE

    @property
    def passes_requests_through(self) -> bool:
        """Whether every frame now goes straight to the request handler: authenticated, and the
        session does not expire (so no KIP-368 SaslHandshake can come)."""
        return not self.authenticating and self.session_expires_at is None

    def takes(self, frame: bytes | bytearray) -> bool:
        """Whether ``frame`` goes to this authenticator rather than the request handler: every
        frame while authenticating, and a SaslHandshake that starts KIP-368 re-authentication.
        Raises :class:`~odradek.server.request_channel.CloseConnection` for a request after the
        session's end (``connections.max.reauth.ms``) that is not a SaslHandshake."""
        if self.authenticating:
            return True
        if self.session_expires_at is None:
            return False
        try:
            api_key = peek_api(frame)[0]
        except Exception:
            api_key = -1
        if api_key == ApiKey.SASL_HANDSHAKE and self.can_reauthenticate():
            self.reauthenticate()
            return True
        if self.session_expired():
            raise CloseConnection("SASL session expired (connections.max.reauth.ms) and not re-authenticated")
        return False

    # --- frames -------------------------------------------------------------------------------

    def receive(self, frame: bytes | bytearray) -> SaslStep:
        if self.state in (SaslState.AUTHENTICATE, SaslState.REAUTH_AUTHENTICATE):
            return self._raw_token(frame) if self._legacy else self._authenticate(frame)
        if not self.authenticating:
            return SaslStep(close=f"unexpected SASL frame in state {self.state.value}")
        try:
            api_key, api_version, _ = peek_api(frame)
        except InvalidRequestError:
            api_key, api_version = -1, -1
        reauth = self.state is SaslState.REAUTH_PROCESS_HANDSHAKE
        if api_key == ApiKey.API_VERSIONS and not reauth:
            self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
            return SaslStep(forward=True)
        if api_key != ApiKey.SASL_HANDSHAKE:
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"key {api_key}"
            self.state = SaslState.FAILED
            return SaslStep(close=f"Unexpected Kafka request of type {name} during SASL handshake")
        lo, hi = SASL_HANDSHAKE_VERSIONS
        if not lo <= api_version <= hi:
            self.state = SaslState.FAILED
            return SaslStep(close=f"unsupported SaslHandshake version {api_version}")
        decoded = self._decode(frame)
        if decoded is None:
            self.state = SaslState.FAILED
            return SaslStep(close="SaslHandshake request that does not decode")
        schema, header, request = decoded
        mechanism = str(request.mechanism)
        enabled = self.security.mechanisms
        bad = mechanism not in enabled or (reauth and mechanism != self._mechanism)
        response = build(
            schema.response_type,
            error_code=ErrorCode.unsupported_sasl_mechanism if bad else ErrorCode.none,
            mechanisms=tuple(enabled),
        )
        frame_out = encode_response(schema, header.correlation_id, response)
        if bad:
            self.state = SaslState.FAILED
            problem = (
                f"SASL mechanism '{mechanism}' requested by client is not supported"
                if not reauth or mechanism not in enabled
                else f"Mechanism changed during re-authentication from {self._mechanism} to {mechanism}"
            )
            return self._failed(problem, frame_out)
        self._mechanism = mechanism
        self._server = self.security.sasl_server(mechanism)
        self._legacy = api_version == 0
        self.state = SaslState.REAUTH_AUTHENTICATE if reauth else SaslState.AUTHENTICATE
        return SaslStep(response=frame_out)

    def _decode(self, frame: bytes | bytearray) -> tuple[Any, Any, Any] | None:
        try:
            api_key, api_version, _ = peek_api(frame)
            schema = api_schema(api_key, api_version)
            header = parse_request_header(frame, schema.flexible)
            return schema, header, decode_request(schema, frame, header.size)
        except (InvalidRequestError, UnsupportedVersionError, ValueError):
            return None

    def _authenticate(self, frame: bytes | bytearray) -> SaslStep:
        try:
            api_key, api_version, _ = peek_api(frame)
        except InvalidRequestError:
            api_key, api_version = -1, -1
        if api_key != ApiKey.SASL_AUTHENTICATE:
            name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"key {api_key}"
            self.state = SaslState.FAILED
            return SaslStep(close=f"Unexpected Kafka request of type {name} during SASL authentication")
        lo, hi = SASL_AUTHENTICATE_VERSIONS
        decoded = self._decode(frame) if lo <= api_version <= hi else None
        if decoded is None:
            self.state = SaslState.FAILED
            return SaslStep(close=f"SaslAuthenticate v{api_version} request that cannot be served")
        schema, header, request = decoded
        try:
            challenge = self._evaluate(bytes(request.auth_bytes))
        except RetriableSaslError as exc:
            self.state = SaslState.FAILED
            return SaslStep(close=f"{exc} (retriable: closed without an answer)")
        except SaslAuthenticationError as exc:
            reauth = self.state is SaslState.REAUTH_AUTHENTICATE
            response = build(
                schema.response_type,
                error_code=exc.error_code,
                error_message=exc.client_message(reauth),
                auth_bytes=b"",
                session_lifetime=datetime.timedelta(0),
            )
            self.state = SaslState.FAILED
            return self._failed(str(exc), encode_response(schema, header.correlation_id, response))
        lifetime_ms = self._session_lifetime_ms if self.state is SaslState.COMPLETE else 0
        response = build(
            schema.response_type,
            error_code=ErrorCode.none,
            error_message=None,
            auth_bytes=challenge,
            session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
        )
        return SaslStep(response=encode_response(schema, header.correlation_id, response))

    def _raw_token(self, frame: bytes | bytearray) -> SaslStep:
        server = self._server
        try:
            challenge = self._evaluate(bytes(frame))
        except RetriableSaslError as exc:
            self.state = SaslState.FAILED
            return SaslStep(close=f"{exc} (retriable: closed without an answer)")
        except SaslAuthenticationError as exc:
            self.state = SaslState.FAILED
            return self._failed(str(exc), None)
        if self.state is SaslState.COMPLETE and getattr(server, "final_challenge_absent", False):
            return SaslStep()  # GSSAPI's last token gets no answer (Kafka sends a null challenge)
        return SaslStep(response=struct.pack(">i", len(challenge)) + challenge)

    def _evaluate(self, token: bytes) -> bytes:
        """One token through the mechanism; on completion, the session (COMPLETE)."""
        assert self._server is not None
        challenge = self._server.evaluate_response(token)
        if self._server.complete:
            principal = sasl_principal(self._server.authorization_id)
            self._complete(
                principal,
                getattr(self._server, "credential_lifetime_ms", None),
                token_authenticated=bool(getattr(self._server, "token_authenticated", False)),
            )
        return challenge

    def _complete(
        self, principal: KafkaPrincipal, credential_expiry_ms: int | None = None, *, token_authenticated: bool = False
    ) -> None:
        previous = self.session
        if previous is not None and previous.principal != principal:
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {previous.principal}: {principal}",
                mechanism=self._mechanism or "",
                public=True,
            )
        self.session = Session(
            principal,
            self.client_host,
            self.security.listener_name,
            self.security.security_protocol,
            self._mechanism,
            token_authenticated,
        )
        reauth_ms = self.security.max_reauth_ms
        lifetime_ms: int | None = reauth_ms if reauth_ms > 0 else None
        if credential_expiry_ms is not None:
            remaining = max(0, int(credential_expiry_ms - self._wall_clock() * 1000))
            lifetime_ms = remaining if lifetime_ms is None else min(lifetime_ms, remaining)
        self._session_lifetime_ms = lifetime_ms or 0
        self.session_expires_at = self._clock() + lifetime_ms / 1000 if lifetime_ms is not None else None
        self.state = SaslState.COMPLETE
        self._server = None

    def _failed(self, problem: str, response: bytes | None) -> SaslStep:
        return SaslStep(
            response=response,
            failure=problem,
            delay_s=self.security.failed_authentication_delay_ms / 1000,
        )
