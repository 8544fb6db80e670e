"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` and the JDK's PLAIN client implement it.

The client's one message is ``[authzid] NUL authcid NUL passwd`` in UTF-8; Kafka's client sends an
empty authzid. The server splits at the first two NULs (anything after a third NUL is ignored, a
missing part is empty), then checks in Kafka's order:

1. empty user name -> ``Authentication failed: username not specified`` (not shown to the client);
2. empty password -> ``Authentication failed: password not specified`` (not shown);
3. the password against the JAAS option ``user_<name>`` of the listener's PlainLoginModule, compared
   in constant time -> ``Authentication failed: Invalid username or password`` (shown);
4. a non-empty authzid other than the user name -> ``Authentication failed: Client requested an
   authorization id that is different from username`` (shown).

The server answers the empty challenge and is complete; a second token is an illegal state.
Single-threaded per connection; no I/O.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from odradek.security.sasl import PLAIN, IllegalSaslStateError, SaslAuthenticationError, SingleIdentityServer
from odradek.security.sasl.jaas import LoginModuleEntry, plain_users


class PlainSaslServer(SingleIdentityServer):
    mechanism = PLAIN

    def __init__(self, passwords: Mapping[str, str]) -> None:
        self._passwords = passwords
        super().__init__()

    @classmethod
    def from_jaas(cls, entry: LoginModuleEntry) -> PlainSaslServer:
        return cls(plain_users(entry))

    def evaluate_response(self, response: bytes) -> bytes:
        self._refuse_if_complete()
        parts = response.decode("utf-8", errors="replace").split("\x00", 3)[:3]
        authzid, username, password = ([*parts, "", ""])[:3]
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified", mechanism=PLAIN)
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified", mechanism=PLAIN)
        expected = self._passwords.get(username)
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            raise SaslAuthenticationError(
                "Authentication failed: Invalid username or password", mechanism=PLAIN, public=True
            )
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username",
                mechanism=PLAIN,
                public=True,
            )
        self._succeed(username)
        return b""


class PlainSaslClient:
    """The client side: one initial response, then complete."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str, authorization_id: str = "") -> None:
        self._message = f"{authorization_id}\x00{username}\x00{password}".encode()
        self._complete = False

    @classmethod
    def from_jaas(cls, entry: LoginModuleEntry) -> PlainSaslClient:
        """From a PlainLoginModule entry's ``username`` and ``password`` options."""
        return cls(entry.options.get("username", ""), entry.options.get("password", ""))

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if self._complete:
            raise IllegalSaslStateError("Unexpected challenge after SASL/PLAIN authentication", mechanism=PLAIN)
        self._complete = True
        return self._message

    def initial_response(self) -> bytes:
        """The only message the client sends (``authzid NUL username NUL password``)."""
        return self._message
