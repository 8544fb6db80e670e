"""Who is using the console: server-side sessions, sign-in against the cluster's SCRAM credentials, CSRF.

Model (see ``docs/console.md``):

- **Sessions are server-side.** The browser holds only a random 256-bit token in the
  ``odradek_console`` cookie (HttpOnly, SameSite=Strict); the :class:`Session` it names lives in
  :class:`SessionStore`, in the console's memory: the signed-in user, the CSRF token and the
  :class:`ClientSecurity` of the user's own cluster connection. No password is ever written to a
  cookie; a signed-in user's password stays in that server-side ClientSecurity (a reconnect needs
  it) until sign-out or expiry, when the connection is closed and the session dropped.
- **Sign-in** (``sign_in="scram"``): the form's user name and password replace the credentials of
  the console's ``--command-config`` (same protocol, TLS and SCRAM mechanism) and the console opens
  a connection with them: the broker's SCRAM exchange is the check. Every later request of that
  session goes through that connection, so **the brokers' own authorizer decides** what the user
  sees (a topic without DESCRIBE is absent from Metadata) and may change. Nothing about ACLs is
  re-implemented in the console.
- **CSRF**: every session (signed in or not) has a token; every form carries it in ``csrf_token``
  and every POST is refused (403) unless it matches (:func:`check_csrf`, constant-time compare).
- Sessions idle for :data:`IDLE_TIMEOUT_S` expire; at most :data:`MAX_SESSIONS` are kept (the least
  recently used is dropped first).

Used on the web server's event loop only (not thread-safe).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from odradek.client.security import ClientSecurity

__all__ = ["COOKIE", "IDLE_TIMEOUT_S", "MAX_SESSIONS", "Session", "SessionStore", "check_csrf"]

COOKIE = "odradek_console"
IDLE_TIMEOUT_S = 1800.0
MAX_SESSIONS = 10000


@dataclass
class Session:
    token: str
    csrf: str
    security: ClientSecurity
    """How this session's requests reach the cluster."""
    user: str | None = None
    """The signed-in user (None: anonymous, or sign-in not required)."""
    proxied: bool = False
    """``user`` was named by the authenticating proxy's header (not signed in with a password)."""
    last_seen: float = field(default_factory=time.monotonic)


class SessionStore:
    """Sessions by token, least recently used first."""

    def __init__(self, default_security: ClientSecurity) -> None:
        self.default_security = default_security
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def get(self, token: str | None) -> Session | None:
        """The live session of ``token`` (refreshing its idle timer), or None."""
        if not token:
            return None
        session = self._sessions.get(token)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_seen > IDLE_TIMEOUT_S:
            del self._sessions[token]
            return None
        session.last_seen = now
        self._sessions.move_to_end(token)
        return session

    def create(self) -> Session:
        """A new anonymous session with the console's own identity."""
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.popitem(last=False)
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), self.default_security)
        self._sessions[session.token] = session
        return session

    def rotate(self, session: Session) -> Session:
        """A fresh token and CSRF token for ``session`` (after sign-in: no session fixation)."""
        self._sessions.pop(session.token, None)
        session.token = secrets.token_urlsafe(32)
        session.csrf = secrets.token_urlsafe(32)
        self._sessions[session.token] = session
        return session

    def drop(self, session: Session) -> None:
        self._sessions.pop(session.token, None)

    def in_use(self, security: ClientSecurity) -> bool:
        """Whether a live session still reaches the cluster with ``security`` (its connection is shared)."""
        return security == self.default_security or any(s.security == security for s in self._sessions.values())

    def expired(self) -> list[Session]:
        """Remove and return the sessions idle longer than the timeout."""
        now = time.monotonic()
        gone = [s for s in self._sessions.values() if now - s.last_seen > IDLE_TIMEOUT_S]
        for s in gone:
            del self._sessions[s.token]
        return gone

    def __len__(self) -> int:
        return len(self._sessions)


def check_csrf(session: Session, submitted: object) -> bool:
    """True when ``submitted`` (the form's ``csrf_token``) is the session's token."""
    return isinstance(submitted, str) and hmac.compare_digest(submitted.encode(), session.csrf.encode())
