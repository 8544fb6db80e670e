"""SASL/OAUTHBEARER (RFC 7628, KIP-255) on the server side, as Kafka's ``OAuthBearerSaslServer``.

The client's one message (``OAuthBearerClientInitialResponse``) is
``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]*\\x01``: a GS2 header with an
optional authorization id, the bearer token, and SASL extensions (keys ``[A-Za-z]+``, values of
printable ASCII, space, tab, CR and LF; ``auth`` is not an extension). A message that does not
match is a ``SaslException`` (``Invalid OAUTHBEARER client first message``: logged, not shown).

The token goes to a validator (Kafka's server callback handler):

- :class:`UnsecuredValidator` (Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``, the
  default): an unsecured JWS (``alg: none``, empty signature); the JAAS options
  ``unsecuredValidatorPrincipalClaimName`` (``sub``), ``unsecuredValidatorScopeClaimName``
  (``scope``), ``unsecuredValidatorRequiredScope`` (space-separated, none by default) and
  ``unsecuredValidatorAllowableClockSkewMs`` (0). ``exp`` is required, ``iat`` optional; a token
  expired, issued in the future or not yet valid (``nbf``) is refused.
- :class:`JwtValidator` (Kafka 3.9's ``OAuthBearerValidatorCallbackHandler``, KIP-768): a signed
  JWT (RS*/PS*/ES*, never ``none`` nor HMAC) verified with the key of its ``kid`` in a JWKS
  (:mod:`odradek.security.sasl.oauthbearer_jwks`: ``JwksFile`` reads ``file://`` URLs,
  ``JwksEndpoint`` fetches and refreshes https ones), ``exp`` and ``iat`` required, the audience and
  issuer checked when configured, the principal from ``sasl.oauthbearer.sub.claim.name``.

A refused token is answered with the JSON challenge ``{"status":"invalid_token"}`` (or
``insufficient_scope`` with the required ``scope``); the client answers ``\\x01`` and the exchange
fails with that JSON as the (public) message. An authorization id other than the token's
principal fails at once. On success the principal is the token's principal claim, and
:attr:`OAuthBearerSaslServer.credential_lifetime_ms` is the token's ``exp`` (KIP-368: the session
ends there). Sans-IO except the JWKS sources of :mod:`~odradek.security.sasl.oauthbearer_jwks`.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import jwt

from odradek.errors import InvalidConfigError
from odradek.security.sasl import (
    OAUTHBEARER,
    IllegalSaslStateError,
    SaslAuthenticationError,
    not_completed,
)

UNSECURED_VALIDATOR_CLASS = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)
SECURED_VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
SECURED_VALIDATOR_CLASS_SECURED_PACKAGE = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
)
"""The 3.1-3.8 name of the secured validator, still accepted by Kafka 3.9 (deprecated)."""
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"

SEPARATOR = "\x01"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_SASLNAME_PY = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME_PY}))?,{SEPARATOR}(?P<kvpairs>(?:{_KEY}={_VALUE}{SEPARATOR})*){SEPARATOR}",
    re.DOTALL,
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)

log = logging.getLogger(__name__)


def _fail(message: str, *, public: bool = False) -> SaslAuthenticationError:
    return SaslAuthenticationError(message, mechanism=OAUTHBEARER, public=public)


@dataclass(frozen=True)
class ClientInitialResponse:
    token: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, response: bytes) -> ClientInitialResponse:
        """Kafka's ``OAuthBearerClientInitialResponse(byte[])``; SaslAuthenticationError (not public)."""
        text = response.decode("utf-8", errors="replace")
        match = _INITIAL_RESPONSE.fullmatch(text)
        if match is None:
            raise _fail("Invalid OAUTHBEARER client first message")
        pairs: dict[str, str] = {}
        for item in match.group("kvpairs").split(SEPARATOR):
            if item:
                key, _, value = item.partition("=")
                pairs[key] = value
        auth = pairs.pop("auth", None)
        if auth is None:
            raise _fail("Invalid OAUTHBEARER client first message: 'auth' not specified")
        for key, value in pairs.items():
            if not _KEY_RE.fullmatch(key):
                raise _fail(f"Extension name {key} is invalid")
            if not _VALUE_RE.fullmatch(value):
                raise _fail(f"Extension value ({value}) for extension {key} is invalid")
        auth_match = _AUTH.fullmatch(auth)
        if auth_match is None:
            raise _fail("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if auth_match.group("scheme").lower() != "bearer":
            raise _fail(f"Invalid scheme in OAUTHBEARER client first message: {auth_match.group('scheme')}")
        return cls(auth_match.group("token"), match.group("authzid") or "", pairs)

    def to_bytes(self) -> bytes:
        """The message as Kafka's client writes it (tests, clients)."""
        authzid = f"a={self.authorization_id}" if self.authorization_id else ""
        extensions = "".join(f"{k}={v}{SEPARATOR}" for k, v in self.extensions.items())
        return f"n,{authzid},{SEPARATOR}auth=Bearer {self.token}{SEPARATOR}{extensions}{SEPARATOR}".encode()


@dataclass(frozen=True)
class OAuthBearerToken:
    value: str
    principal_name: str
    lifetime_ms: int
    """``exp`` in milliseconds since the epoch."""
    scope: frozenset[str] = frozenset()
    start_time_ms: int | None = None


class TokenValidationError(Exception):
    """A refused token: ``status`` (``invalid_token``, ``insufficient_scope``) and ``scope`` go to the client."""

    def __init__(self, message: str, *, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    def validate(self, token: str) -> OAuthBearerToken: ...

    def close(self) -> None:
        """Stop any background work (a JWKS refreshed on a schedule)."""


def _b64_json(part: str, what: str) -> dict[str, Any]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise TokenValidationError(f"Invalid JWT {what}: {exc}") from None
    if not isinstance(decoded, dict):
        raise TokenValidationError(f"Invalid JWT {what}: not a JSON object")
    return decoded


def _scope_claim(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(str(v) for v in value)
    return frozenset()


def _number_claim(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenValidationError(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenValidationError(f"The claim {name} is not a number: {value!r}")
    return float(value)


class UnsecuredValidator:
    """Kafka's unsecured validator (not for production: anyone can write such a token)."""

    def __init__(
        self,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
        required_scope: Sequence[str] = (),
        clock_skew_ms: int = 0,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.principal_claim = principal_claim
        self.scope_claim = scope_claim
        self.required_scope = tuple(required_scope)
        self.clock_skew_ms = clock_skew_ms
        self._clock = clock

    def close(self) -> None:
        pass

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str]) -> UnsecuredValidator:
        skew_text = options.get("unsecuredValidatorAllowableClockSkewMs", "0").strip() or "0"
        try:
            skew = int(skew_text)
        except ValueError:
            skew = -1
        if skew < 0:
            raise InvalidConfigError(
                f"Invalid value for unsecuredValidatorAllowableClockSkewMs: {skew_text} (a non-negative integer)"
            )
        return cls(
            options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
            options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
            options.get("unsecuredValidatorRequiredScope", "").split(),
            skew,
        )

    def validate(self, token: str) -> OAuthBearerToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenValidationError("Unsecured JWS compact serializations must have 3 dot-separated parts")
        if parts[2]:
            raise TokenValidationError("Unsecured JWS must not contain a digital signature")
        header = _b64_json(parts[0], "header")
        if header.get("alg") != "none":
            raise TokenValidationError(f"Unsecured JWS must have 'none' for 'alg': {header.get('alg')!r}")
        claims = _b64_json(parts[1], "claims")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"Required claim missing or not a string: {self.principal_claim}")
        now_ms = self._clock() * 1000
        skew = self.clock_skew_ms
        iat = _number_claim(claims, "iat", False)
        if iat is not None and now_ms + skew < iat * 1000:
            raise TokenValidationError(f"The token was issued in the future (iat {iat}), allowable skew {skew} ms")
        nbf = _number_claim(claims, "nbf", False)
        if nbf is not None and now_ms + skew < nbf * 1000:
            raise TokenValidationError(f"The token is not valid before {nbf}, allowable skew {skew} ms")
        exp = _number_claim(claims, "exp", True)
        assert exp is not None
        if now_ms - skew >= exp * 1000:
            raise TokenValidationError(f"The token expired at {exp}, allowable skew {skew} ms")
        if iat is not None and exp < iat:
            raise TokenValidationError(f"The token's expiration time ({exp}) is before its issued-at time ({iat})")
        scope = _scope_claim(claims, self.scope_claim)
        missing = [s for s in self.required_scope if s not in scope]
        if missing:
            raise TokenValidationError(
                f"The provided scope ({sorted(scope)}) was missing a required scope ({missing[0]}). "
                f"All required scope elements: {list(self.required_scope)}",
                status="insufficient_scope",
                scope=" ".join(self.required_scope),
            )
        return OAuthBearerToken(token, principal, int(exp * 1000), scope, int(iat * 1000) if iat else None)


def allowed_urls(kafka_opts: str | None = None) -> list[str] | None:
    """The ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=<url>,...`` of ``KAFKA_OPTS`` (the
    environment's when not given), or None when unset (every URL allowed)."""
    text = os.environ.get("KAFKA_OPTS", "") if kafka_opts is None else kafka_opts
    found: list[str] | None = None
    for word in text.split():
        name, sep, value = word.partition("=")
        if sep and name == f"-D{ALLOWED_URLS_PROPERTY}":
            found = [u.strip() for u in value.split(",") if u.strip()]
    return found


def check_url_allowed(url: str, allowed: list[str] | None, key: str) -> None:
    if allowed is not None and url not in allowed:
        raise InvalidConfigError(
            f"Invalid value for configuration {key}: {url} is not allowed; update the system property "
            f"'{ALLOWED_URLS_PROPERTY}' (in KAFKA_OPTS) to allow it"
        )


class VerificationKeys(Protocol):
    """Where :class:`JwtValidator` finds the key of a ``kid``
    (:mod:`odradek.security.sasl.oauthbearer_jwks`: a JWKS file or endpoint)."""

    def key(self, kid: str | None) -> jwt.PyJWK:
        """The key; TokenValidationError when there is none for ``kid``."""
        ...

    def close(self) -> None: ...


ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class JwtValidator:
    """Kafka 3.9's ``OAuthBearerValidatorCallbackHandler`` (``ValidatorAccessTokenValidator``)."""

    def __init__(
        self,
        keys: VerificationKeys,
        *,
        audience: Sequence[str] = (),
        issuer: str | None = None,
        scope_claim: str = "scope",
        sub_claim: str = "sub",
        clock_skew_s: int = 30,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = keys
        self.audience = list(audience)
        self.issuer = issuer
        self.scope_claim = scope_claim
        self.sub_claim = sub_claim
        self.clock_skew_s = clock_skew_s
        self._clock = clock

    def close(self) -> None:
        self.keys.close()

    def validate(self, token: str) -> OAuthBearerToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenValidationError(f"Malformed JWT provided: {exc}") from None
        alg = header.get("alg")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise TokenValidationError(f"Unsupported JWS algorithm {alg!r}")
        key = self.keys.key(header.get("kid"))
        options: jwt.types.Options = {
            "require": ["exp", "iat"],
            "verify_aud": bool(self.audience),
            "verify_exp": False,  # the times are checked below, on this validator's clock
            "verify_iat": False,
            "verify_nbf": False,
        }
        if not self.issuer:
            options["verify_iss"] = False
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.audience or None,
                issuer=self.issuer or None,
                leeway=self.clock_skew_s,
                options=options,
            )
        except jwt.PyJWTError as exc:
            raise TokenValidationError(f"Could not validate the access token: {exc}") from None
        now = self._clock()
        iat = _number_claim(claims, "iat", True)
        exp = _number_claim(claims, "exp", True)
        assert iat is not None and exp is not None
        skew = self.clock_skew_s
        if exp + skew <= now:
            raise TokenValidationError(f"The token expired at {exp} (clock skew allowed: {skew} s)")
        if iat - skew > now:
            raise TokenValidationError(f"The token was issued in the future ({iat}; clock skew allowed: {skew} s)")
        nbf = _number_claim(claims, "nbf", False)
        if nbf is not None and nbf - skew > now:
            raise TokenValidationError(f"The token is not valid before {nbf} (clock skew allowed: {skew} s)")
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"The claim {self.sub_claim} is required and must be a non-empty string")
        return OAuthBearerToken(
            token, principal.strip(), int(exp * 1000), _scope_claim(claims, self.scope_claim), int(iat * 1000)
        )


def json_error(status: str, scope: str | None = None, openid_configuration: str | None = None) -> str:
    """Kafka's ``jsonErrorResponse``."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    if openid_configuration is not None:
        text += f', "openid-configuration":"{openid_configuration}"'
    return text + "}"


class TokenRefusedError(SaslAuthenticationError):
    """The end of an exchange whose token was refused: the client is told the JSON challenge (as
    Kafka's ``SaslAuthenticationException(errorMessage)``), the broker's log says why."""

    def __init__(self, challenge: str, reason: str) -> None:
        super().__init__(f"OAUTHBEARER token refused: {reason} (answered {challenge})", mechanism=OAUTHBEARER)
        self.challenge = challenge

    def client_message(self, reauthentication: bool = False) -> str:
        return self.challenge


class OAuthBearerSaslServer:
    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._complete = False
        self._token: OAuthBearerToken | None = None
        self._error: str | None = None
        self._refusal: str | None = None
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete or self._token is None:
            raise not_completed(OAUTHBEARER)
        return self._token.principal_name

    @property
    def credential_lifetime_ms(self) -> int | None:
        """The token's expiry (ms since the epoch): Kafka's ``CREDENTIAL.LIFETIME.MS`` negotiated property."""
        return self._token.lifetime_ms if self._complete and self._token is not None else None

    def evaluate_response(self, response: bytes) -> bytes:
        if response == SEPARATOR.encode() and self._error is not None:
            raise TokenRefusedError(self._error, self._refusal or "")
        if self._complete:
            raise IllegalSaslStateError("Authentication exchange already completed", mechanism=OAUTHBEARER)
        if self._error is not None:
            raise IllegalSaslStateError("Unexpected OAUTHBEARER token after an error challenge", mechanism=OAUTHBEARER)
        initial = ClientInitialResponse.parse(response)
        try:
            token = self._validator.validate(initial.token)
        except TokenValidationError as exc:
            self._error = json_error(exc.status, exc.scope)
            self._refusal = str(exc)
            log.debug("OAUTHBEARER token refused: %s", exc)
            return self._error.encode()
        if initial.authorization_id and initial.authorization_id != token.principal_name:
            raise _fail(
                f"Authentication failed: Client requested an authorization id ({initial.authorization_id}) "
                f"that is different from the token's principal name ({token.principal_name})",
                public=True,
            )
        self.extensions = dict(initial.extensions)
        self._token = token
        self._complete = True
        return b""

    @property
    def refusal(self) -> str | None:
        """Why the token was refused (the broker's log; the client sees only the JSON)."""
        return self._refusal
