"""SASL/OAUTHBEARER on the client side: the mechanism, and the logins that supply its token.

:class:`OAuthBearerSaslClient` sends RFC 7628's initial response (``n,,\\x01auth=Bearer <token>\\x01
[<extension>\\x01]*\\x01``). An empty answer completes the exchange; a non-empty one is the
broker's JSON error challenge (``{"status":"invalid_token"}``), answered with ``\\x01`` so the broker
ends the exchange with its failure (RFC 7628 §3.2.3).

A login keeps the current token, as Kafka's ``OAuthBearerLoginModule`` with its
``ExpiringCredentialRefreshingLogin``:

- :class:`UnsecuredLogin` (KIP-255, the login module's default callback handler): an unsecured JWS
  (``{"alg":"none"}``, empty signature) from the JAAS options ``unsecuredLoginStringClaim_<name>``,
  ``unsecuredLoginNumberClaim_<name>``, ``unsecuredLoginListClaim_<name>`` (the value's first
  character separates the items), ``unsecuredLoginPrincipalClaimName`` (``sub``; the claim must
  be given), ``unsecuredLoginScopeClaimName`` (``scope``), ``unsecuredLoginLifetimeSeconds``
  (3600) and ``unsecuredLoginExtension_<name>`` (SASL extensions); ``iat`` and ``exp`` are set.
- :class:`ClientCredentialsLogin` (KIP-768, ``sasl.login.callback.handler.class`` =
  Kafka's ``OAuthBearerLoginCallbackHandler``): an access token from
  ``sasl.oauthbearer.token.endpoint.url`` by the client-credentials grant (RFC 6749 §4.4, HTTP
  Basic with the JAAS options ``clientId``/``clientSecret``, the ``scope`` option in the body),
  TLS from the JAAS options ``ssl.*``; the token's ``exp`` and principal claim (named by
  ``sasl.oauthbearer.sub.claim.name``) are read without verifying its signature (the broker
  verifies it); ``extension_<name>`` options are SASL extensions. A failed request is retried
  after ``sasl.login.retry.backoff.ms``, doubling up to ``sasl.login.retry.backoff.max.ms``.

Both refresh their token on a daemon thread before it expires (:func:`refresh_delay_s`, from
``sasl.login.refresh.window.factor``/``.window.jitter``/``.min.period.seconds``/
``.buffer.seconds``); the first token is obtained when the login starts (blocking, on the
caller's thread, as Kafka's login at start-up). :attr:`OAuthBearerLogin.token` may be read from
any thread. The token itself is never logged. A login is closed by its last user
(:meth:`OAuthBearerLogin.release`, Kafka's ``LoginManager`` reference count) or by
:meth:`OAuthBearerLogin.close`: the refresh thread ends at once and no token is asked for after;
a login dropped without a close stops refreshing when it is garbage collected (the thread holds
it weakly), so a gone token issuer is never retried for the rest of the process.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from odradek.errors import InvalidConfigError
from odradek.security.sasl import OAUTHBEARER, IllegalSaslStateError, SaslAuthenticationError
from odradek.security.sasl.oauthbearer import SEPARATOR, ClientInitialResponse

__all__ = [
    "LOGIN_CALLBACK_HANDLER_CLASS",
    "ClientCredentialsLogin",
    "LoginLease",
    "LoginRefreshConfig",
    "OAuthBearerLogin",
    "OAuthBearerSaslClient",
    "UnsecuredLogin",
    "refresh_delay_s",
]

LOGIN_CALLBACK_HANDLER_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
LOGIN_CALLBACK_HANDLER_CLASS_SECURED_PACKAGE = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
)
MAX_TOKEN_RESPONSE_BYTES = 1 << 20

log = logging.getLogger(__name__)


class OAuthBearerSaslClient:
    """The client mechanism for one exchange (module docstring)."""

    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        self._message = ClientInitialResponse(token, "", dict(extensions or {})).to_bytes()
        self._sent = False
        self._complete = False
        self.error_challenge: str | None = None
        """The broker's JSON error challenge, when it refused the token."""

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if self._complete:
            raise IllegalSaslStateError(
                "Unexpected challenge after SASL/OAUTHBEARER authentication", mechanism=OAUTHBEARER
            )
        if not self._sent:
            self._sent = True
            return self._message
        if self.error_challenge is not None:
            raise SaslAuthenticationError(
                f"The broker refused the token: {self.error_challenge}", mechanism=OAUTHBEARER
            )
        if not challenge:
            self._complete = True
            return None
        self.error_challenge = challenge.decode("utf-8", errors="replace")[:1000]
        return SEPARATOR.encode()


@dataclass(frozen=True)
class LoginRefreshConfig:
    """Kafka's ``sasl.login.refresh.*`` and ``sasl.login.retry.backoff.*`` keys."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_s: float = 60.0
    buffer_s: float = 300.0
    retry_backoff_s: float = 0.1
    retry_backoff_max_s: float = 10.0

    @classmethod
    def from_properties(cls, value: Callable[[str], Any]) -> LoginRefreshConfig:
        def get(key: str, default: float) -> float:
            raw = value(key)
            return default if raw is None else float(raw)

        return cls(
            get("sasl.login.refresh.window.factor", 0.8),
            get("sasl.login.refresh.window.jitter", 0.05),
            get("sasl.login.refresh.min.period.seconds", 60),
            get("sasl.login.refresh.buffer.seconds", 300),
            get("sasl.login.retry.backoff.ms", 100) / 1000,
            get("sasl.login.retry.backoff.max.ms", 10000) / 1000,
        )


def refresh_delay_s(start_s: float, expiry_s: float, now_s: float, config: LoginRefreshConfig) -> float:
    """Seconds from ``now_s`` until a token valid from ``start_s`` to ``expiry_s`` is refreshed.

    The ideal moment is ``window_factor`` (plus up to ``window_jitter``) of the way through its
    life; it is moved earlier to leave ``buffer_s`` before expiry, then later so that at least
    ``min_period_s`` passes after ``now_s``, but never past expiry (an already expired token: 0).
    """
    if expiry_s <= now_s:
        return 0.0
    ideal = start_s + (expiry_s - start_s) * (config.window_factor + config.window_jitter * random.random())
    moment = min(ideal, expiry_s - config.buffer_s)
    moment = max(moment, now_s + config.min_period_s)
    return max(0.0, min(moment, expiry_s) - now_s)


class OAuthBearerLogin:
    """A refreshing token holder; subclasses implement :meth:`_obtain` -> (token, start s, expiry s).

    Lifecycle: :meth:`start` obtains the first token and starts the refresh thread; :meth:`close`
    stops it (promptly: the thread waits on an event, and is joined). A login shared by several
    users counts them (Kafka's ``LoginManager``): :meth:`acquire` adds one (False once closed),
    :meth:`release` drops one and closes the login with the last. The refresh thread holds the
    login only weakly, so a login nobody references any more stops refreshing when it is
    collected, closed or not. Any thread may call every method.
    """

    def __init__(self, refresh: LoginRefreshConfig, extensions: Mapping[str, str]) -> None:
        self.refresh_config = refresh
        self.extensions = dict(extensions)
        self._lock = threading.RLock()  # reentrant: a release may run from a finalizer, at any point
        self._token = ""
        self._expiry_s = 0.0
        self.logins = 0
        """How many tokens were obtained (the first included)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._users = 1
        """The users holding this login (its creator is the first)."""
        self._closed = False
        self.join_timeout_s = 10.0
        """How long :meth:`close` waits for a refresh under way (a token request's own timeout)."""

    def _obtain(self) -> tuple[str, float, float]:
        raise NotImplementedError

    @property
    def token(self) -> str:
        with self._lock:
            return self._token

    @property
    def expiry_s(self) -> float:
        with self._lock:
            return self._expiry_s

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    @property
    def refresh_thread(self) -> threading.Thread | None:
        """The thread refreshing the token (None before :meth:`start`); not alive once closed."""
        return self._thread

    def sasl_client(self) -> OAuthBearerSaslClient:
        return OAuthBearerSaslClient(self.token, self.extensions)

    def _login_once(self) -> tuple[float, float]:
        token, start, expiry = self._obtain()
        with self._lock:
            self._token, self._expiry_s = token, expiry
            self.logins += 1
        log.info("OAUTHBEARER login %s: token valid until %s", type(self).__name__, time.ctime(expiry))
        return start, expiry

    def start(self) -> OAuthBearerLogin:
        """Obtain the first token (retrying with backoff for at most ``retry_backoff_max_s``
        twice over; InvalidConfigError after, or at once when closed meanwhile), then refresh it
        on a daemon thread named ``oauthbearer-login-refresh``."""
        deadline = time.monotonic() + 2 * max(self.refresh_config.retry_backoff_max_s, 1.0)
        backoff = self.refresh_config.retry_backoff_s
        while True:
            try:
                start, expiry = self._login_once()
                break
            except (OSError, ValueError) as exc:
                if time.monotonic() + backoff > deadline or self._stop.is_set():
                    raise InvalidConfigError(f"OAUTHBEARER login failed: {exc}") from None
                log.warning("OAUTHBEARER login failed (retrying in %.1f s): %s", backoff, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.refresh_config.retry_backoff_max_s)
        with self._lock:
            if self._closed:
                return self
            self._thread = threading.Thread(
                target=_refresh_loop,
                args=(weakref.ref(self), self._stop, self.refresh_config, start, expiry),
                name="oauthbearer-login-refresh",
                daemon=True,
            )
            # collected without a close: the thread is woken and ends
            weakref.finalize(self, self._stop.set).atexit = False
            self._thread.start()
        return self

    def acquire(self) -> bool:
        """One more user; False (nothing counted) when the login is already closed."""
        with self._lock:
            if self._closed:
                return False
            self._users += 1
            return True

    def release(self, *, wait: bool = True) -> None:
        """One user fewer; the last one closes the login (:meth:`close`, joined when ``wait``)."""
        with self._lock:
            if self._closed:
                return
            self._users -= 1
            if self._users > 0:
                return
        self.close(wait=wait)

    def close(self, *, wait: bool = True) -> None:
        """Stop refreshing, whoever still uses the login (its last token stays readable).

        The refresh thread is woken at once; with ``wait`` this returns when it has ended (a
        token request under way first finishes or times out: at most :attr:`join_timeout_s`).
        Idempotent; a no-op wait from the refresh thread itself."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join(self.join_timeout_s)


class LoginLease:
    """One user's hold on a shared :class:`OAuthBearerLogin`, already counted by the login.

    :meth:`release` drops the hold once (idempotent; the last hold closes the login and waits
    for its refresh thread). A lease garbage collected unreleased drops its hold then, without
    waiting. Any thread may call.
    """

    def __init__(self, login: OAuthBearerLogin) -> None:
        self.login = login
        self._finalizer = weakref.finalize(self, login.release, wait=False)
        self._finalizer.atexit = False

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def release(self) -> None:
        if self._finalizer.detach() is not None:
            self.login.release()


def _refresh_loop(
    ref: weakref.ref[OAuthBearerLogin], stop: threading.Event, config: LoginRefreshConfig, start: float, expiry: float
) -> None:
    """The refresh thread: waits on ``stop`` until the next refresh moment, then renews the
    token of the login ``ref`` points to (held strongly only while it renews); ends when ``stop``
    is set or the login is gone. A failed renewal is retried after the backoff, doubling."""
    backoff = config.retry_backoff_s
    delay = refresh_delay_s(start, expiry, time.time(), config)
    while not stop.wait(delay):
        login = ref()
        if login is None:
            return
        try:
            start, expiry = login._login_once()
        except (OSError, ValueError) as exc:
            if not stop.is_set():
                log.warning("OAUTHBEARER token refresh failed (retrying in %.1f s): %s", backoff, exc)
            delay = backoff
            backoff = min(backoff * 2, config.retry_backoff_max_s)
            continue
        finally:
            del login
        backoff = config.retry_backoff_s
        delay = refresh_delay_s(start, expiry, time.time(), config)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class UnsecuredLogin(OAuthBearerLogin):
    """Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler`` (module docstring)."""

    def __init__(self, options: Mapping[str, str], refresh: LoginRefreshConfig | None = None) -> None:
        extensions = {
            k.removeprefix("unsecuredLoginExtension_"): v
            for k, v in options.items()
            if k.startswith("unsecuredLoginExtension_")
        }
        super().__init__(refresh or LoginRefreshConfig(), extensions)
        self.claims: dict[str, Any] = {}
        for key, value in options.items():
            name = key.partition("_")[2]
            if key.startswith("unsecuredLoginStringClaim_"):
                self.claims[name] = value
            elif key.startswith("unsecuredLoginNumberClaim_"):
                try:
                    self.claims[name] = float(value) if "." in value else int(value)
                except ValueError:
                    raise InvalidConfigError(f"Invalid JAAS option {key}: {value!r} is not a number") from None
            elif key.startswith("unsecuredLoginListClaim_"):
                self.claims[name] = [v for v in value[1:].split(value[0])] if value else []
        self.principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
        if not isinstance(self.claims.get(self.principal_claim), str) or not self.claims[self.principal_claim]:
            raise InvalidConfigError(
                f"Invalid JAAS options for OAuthBearerLoginModule: the principal claim {self.principal_claim} "
                f"needs unsecuredLoginStringClaim_{self.principal_claim}"
            )
        try:
            self.lifetime_s = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
        except ValueError:
            raise InvalidConfigError("Invalid JAAS option unsecuredLoginLifetimeSeconds: not an integer") from None
        for reserved in ("iat", "exp"):
            self.claims.pop(reserved, None)

    def _obtain(self) -> tuple[str, float, float]:
        now = time.time()
        claims = {**self.claims, "iat": now, "exp": now + self.lifetime_s}
        header = _b64url(b'{"alg":"none"}')
        body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
        return f"{header}.{body}.", now, now + self.lifetime_s


class ClientCredentialsLogin(OAuthBearerLogin):
    """Kafka's ``OAuthBearerLoginCallbackHandler`` with its ``HttpAccessTokenRetriever``."""

    def __init__(
        self,
        token_url: str,
        options: Mapping[str, str],
        *,
        refresh: LoginRefreshConfig | None = None,
        sub_claim: str = "sub",
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        extensions = {k.removeprefix("extension_"): v for k, v in options.items() if k.startswith("extension_")}
        super().__init__(refresh or LoginRefreshConfig(), extensions)
        scheme = urllib.parse.urlparse(token_url).scheme
        if scheme not in ("http", "https"):
            raise InvalidConfigError(
                f"Invalid value {token_url} for configuration sasl.oauthbearer.token.endpoint.url: http or https"
            )
        client_id, secret = options.get("clientId"), options.get("clientSecret")
        if not client_id or not secret:
            raise InvalidConfigError(
                "The OAuthBearerLoginModule JAAS options clientId and clientSecret are required with "
                f"{LOGIN_CALLBACK_HANDLER_CLASS}"
            )
        self.token_url = token_url
        self.client_id, self._secret = client_id, secret
        self.scope = options.get("scope")
        self.sub_claim = sub_claim
        self._ssl = ssl_context if scheme == "https" else None
        self._timeout_s = timeout_s
        self.join_timeout_s = timeout_s + 1.0

    def _request(self) -> urllib.request.Request:
        credentials = f"{urllib.parse.quote_plus(self.client_id)}:{urllib.parse.quote_plus(self._secret)}"
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        return urllib.request.Request(
            self.token_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": "Basic " + base64.b64encode(credentials.encode()).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                "Cache-Control": "no-cache",
            },
            method="POST",
        )

    def _obtain(self) -> tuple[str, float, float]:
        try:
            with urllib.request.urlopen(self._request(), timeout=self._timeout_s, context=self._ssl) as response:
                body = response.read(MAX_TOKEN_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", errors="replace")
            raise ValueError(f"the token endpoint {self.token_url} answered {exc.code}: {detail}") from None
        if len(body) > MAX_TOKEN_RESPONSE_BYTES:
            raise ValueError(f"the token endpoint's answer is larger than {MAX_TOKEN_RESPONSE_BYTES} bytes")
        try:
            answer = json.loads(body)
        except ValueError:
            raise ValueError(f"the token endpoint {self.token_url} did not answer JSON") from None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise ValueError(f"the token endpoint {self.token_url} answered no access_token")
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            raise ValueError(f"the access token is not a JWT: {exc}") from None
        exp, iat = claims.get("exp"), claims.get("iat", time.time())
        if not isinstance(exp, (int, float)) or not isinstance(iat, (int, float)):
            raise ValueError("the access token has no numeric exp")
        if not isinstance(claims.get(self.sub_claim), str):
            raise ValueError(f"the access token has no {self.sub_claim} claim")
        return token, float(iat), float(exp)
