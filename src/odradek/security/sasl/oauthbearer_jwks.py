"""Where OAUTHBEARER's signed-JWT validator finds its verification keys (Kafka's
``VerificationKeyResolver`` implementations): :class:`JwksFile` (a ``file://`` JWKS, read again when
it changes) and :class:`JwksEndpoint` (a JWKS over https, fetched and refreshed as Kafka's
``RefreshingHttpsJwks``). Both answer :meth:`key` (TokenValidationError for an unknown ``kid``) and
:meth:`close`; any thread may call them.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
import urllib.request
import weakref
from collections.abc import Callable
from urllib.parse import unquote, urlparse

import jwt

from odradek.errors import InvalidConfigError
from odradek.security.sasl.oauthbearer import TokenValidationError

__all__ = ["JWKS_MAX_BYTES", "MISSING_KID_REFRESH_S", "JwksEndpoint", "JwksFile"]

log = logging.getLogger(__name__)


class JwksFile:
    """The keys of a JWKS file (``sasl.oauthbearer.jwks.endpoint.url=file:///...``), read again when
    the file changes (Kafka's ``FileJwksVerificationKeyResolver`` reads it once; a changed file
    taking effect without a restart is kinder and no less safe)."""

    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        if parsed.scheme != "file":
            raise InvalidConfigError(
                f"Invalid value for configuration sasl.oauthbearer.jwks.endpoint.url: {url} "
                "(a file:// URL; https ones are fetched by JwksEndpoint)"
            )
        self.path = unquote(parsed.path)
        self._stamp: tuple[int, int] | None = None
        self._keys: dict[str | None, jwt.PyJWK] = {}
        try:
            self._load()
        except (OSError, jwt.PyJWKError, ValueError) as exc:
            raise InvalidConfigError(
                f"Invalid value for configuration sasl.oauthbearer.jwks.endpoint.url: cannot read {self.path}: {exc}"
            ) from None

    def _load(self) -> None:
        st = os.stat(self.path)
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        with open(self.path, encoding="utf-8") as f:
            jwks = jwt.PyJWKSet.from_json(f.read())
        self._keys = {k.key_id: k for k in jwks.keys if k.public_key_use in (None, "sig")}
        self._stamp = stamp

    def close(self) -> None:
        pass

    def key(self, kid: str | None) -> jwt.PyJWK:
        try:
            self._load()
        except (OSError, jwt.PyJWKError, ValueError) as exc:
            log.warning("could not read the JWKS file %s, using the keys read before: %s", self.path, exc)
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        key = self._keys.get(kid)
        if key is None:
            raise TokenValidationError(f"No key with kid {kid!r} in the JWKS {self.path}")
        return key


JWKS_MAX_BYTES = 1 << 20
MISSING_KID_REFRESH_S = 10.0
"""An unknown ``kid`` asks for a refresh at most this often (Kafka's ``RefreshingHttpsJwks``
expedites a refresh for a missing key id, rate-limited the same way)."""


class JwksEndpoint:
    """The keys of a JWKS served over https (or http), as Kafka's ``RefreshingHttpsJwks``: fetched
    once at start (blocking, as Kafka's ``init``), then again every ``refresh_ms`` and soon after a
    token names an unknown ``kid``; a failed fetch is retried after ``backoff_ms``, doubling up to
    ``backoff_max_ms``, and the keys fetched before stay in use meanwhile. Fetches after the first
    run on a daemon thread that wakes when the next one is due (``scheduled``; by default when the
    clock is the real one) or on a short-lived thread for an unknown ``kid``, never on the
    caller's: :meth:`key` only reads what is there (a token whose ``kid`` is not there yet is
    refused; the client's retry finds it). :meth:`close` stops the schedule."""

    def __init__(
        self,
        url: str,
        *,
        refresh_ms: int = 3600000,
        backoff_ms: int = 100,
        backoff_max_ms: int = 10000,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        scheduled: bool | None = None,
    ) -> None:
        scheme = urlparse(url).scheme
        if scheme not in ("https", "http"):
            raise InvalidConfigError(
                f"Invalid value for configuration sasl.oauthbearer.jwks.endpoint.url: {url} (file, http or https)"
            )
        self.url = url
        self.refresh_s = refresh_ms / 1000
        self.backoff_s = backoff_ms / 1000
        self.backoff_max_s = max(backoff_max_ms, backoff_ms) / 1000
        self._ssl = ssl_context if scheme == "https" else None
        self._timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._next_attempt = 0.0
        self._failures = 0
        self._missing_asked: dict[str, float] = {}
        self._running: threading.Thread | None = None
        self._wake = threading.Event()
        self._closed = False
        self.refresh()
        if clock is time.monotonic if scheduled is None else scheduled:
            # the thread holds the endpoint weakly: a listener reconfigured or a broker dropped ends it
            ref, wake = weakref.ref(self), self._wake
            weakref.finalize(self, wake.set)
            threading.Thread(target=_schedule, args=(ref, wake), name="jwks-schedule", daemon=True).start()

    def close(self) -> None:
        """Stop the scheduled fetches."""
        self._closed = True
        self._wake.set()

    def _fetch(self) -> dict[str | None, jwt.PyJWK]:
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=self._timeout_s, context=self._ssl) as response:
            body = response.read(JWKS_MAX_BYTES + 1)
        if len(body) > JWKS_MAX_BYTES:
            raise ValueError(f"the JWKS is larger than {JWKS_MAX_BYTES} bytes")
        jwks = jwt.PyJWKSet.from_json(body.decode("utf-8"))
        return {k.key_id: k for k in jwks.keys if k.public_key_use in (None, "sig")}

    def refresh(self) -> bool:
        """Fetch the JWKS now, on this thread; False (logged) when it could not be fetched."""
        try:
            keys = self._fetch()
        except (OSError, ValueError, jwt.PyJWKError, jwt.PyJWKSetError) as exc:
            with self._lock:
                self._failures += 1
                delay = min(self.backoff_s * 2 ** (self._failures - 1), self.backoff_max_s)
                self._next_attempt = self._clock() + delay
            self._wake.set()
            log.warning("could not fetch the JWKS at %s (retrying in %.1f s): %s", self.url, delay, exc)
            return False
        with self._lock:
            self._keys = keys
            self._fetched_at = self._clock()
            self._failures = 0
            self._next_attempt = self._fetched_at + self.refresh_s
        log.info("fetched %d key(s) from the JWKS at %s", len(keys), self.url)
        return True

    def _refresh_in_background(self) -> None:
        with self._lock:
            if self._running is not None and self._running.is_alive():
                return
            self._running = threading.Thread(target=self.refresh, name="jwks-refresh", daemon=True)
            self._running.start()

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        keys = self._keys
        return keys.get(kid) if kid is not None or len(keys) != 1 else next(iter(keys.values()))

    def key(self, kid: str | None) -> jwt.PyJWK:
        now = self._clock()
        due = now >= self._next_attempt
        key = self._lookup(kid)
        if key is None and kid is not None and now >= self._missing_asked.get(kid, 0.0):
            if len(self._missing_asked) > 1000:
                self._missing_asked.clear()
            self._missing_asked[kid] = now + MISSING_KID_REFRESH_S
            due = due or self._failures == 0
        if due:
            self._refresh_in_background()
            key = self._lookup(kid)  # a refresh that finished at once (a refresh runs concurrently)
        if key is None:
            raise TokenValidationError(f"No key with kid {kid!r} in the JWKS at {self.url}")
        return key


def _schedule(ref: weakref.ref[JwksEndpoint], wake: threading.Event) -> None:
    """:class:`JwksEndpoint`'s schedule: refresh whenever the next fetch is due (``refresh_ms``
    after a success, the backoff after a failure), woken early when a failure elsewhere moved the
    next attempt; ends when the endpoint is closed or collected."""
    while True:
        endpoint = ref()
        if endpoint is None or endpoint._closed:
            return
        with endpoint._lock:
            wait = max(0.0, endpoint._next_attempt - endpoint._clock())
        del endpoint
        wake.wait(wait)
        wake.clear()
        endpoint = ref()
        if endpoint is None or endpoint._closed:
            return
        if endpoint._clock() >= endpoint._next_attempt:
            endpoint.refresh()
        del endpoint
