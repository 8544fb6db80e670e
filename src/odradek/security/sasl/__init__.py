"""SASL mechanisms as sans-IO state machines, and the JAAS syntax that configures them.

A server mechanism is fed each client token with ``evaluate_response(token) -> challenge`` until
``complete``; then ``authorization_id`` names the authenticated user (the principal is
``User:<authorization id>``). A client mechanism is fed each server challenge (the empty one first)
with ``evaluate_challenge(challenge) -> response | None``. Mechanisms hold no sockets: the
SaslHandshake/SaslAuthenticate layer (or the legacy v0 framing) carries the tokens.

Failures raise :class:`SaslAuthenticationError`. As Kafka's ``SaslServerAuthenticator`` does, only
messages Kafka throws as ``SaslAuthenticationException`` reach the client
(``Authentication failed: Invalid username or password``); the others (``SaslException``: malformed
tokens, unknown users, wrong SCRAM proofs) are logged and the client is told only
``Authentication failed during authentication due to invalid credentials with SASL mechanism <m>``
(:meth:`SaslAuthenticationError.client_message`). :class:`RetriableSaslError` closes the
connection with no answer (GSSAPI's replay and not-yet-valid errors). A token in a state that expects none raises
:class:`IllegalSaslStateError` (ILLEGAL_SASL_STATE; Kafka closes the connection).
"""

from __future__ import annotations

from typing import Protocol

from odradek.errors import ErrorCode, KafkaError

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
GSSAPI = "GSSAPI"
OAUTHBEARER = "OAUTHBEARER"
# the login modules naming the mechanisms whose implementations load heavier libraries
# (gssapi, PyJWT), kept here so configuration code can name them without importing those
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class SaslAuthenticationError(KafkaError):
    """A failed exchange. ``public`` says whether the message itself may reach the client."""

    error_code = ErrorCode.sasl_authentication_failed

    def __init__(self, message: str, *, mechanism: str, public: bool = False) -> None:
        super().__init__(message)
        self.mechanism = mechanism
        self.public = public

    def client_message(self, reauthentication: bool = False) -> str:
        """The ``error_message`` of the SaslAuthenticate response."""
        if self.public:
            return str(self)
        phase = "re-authentication" if reauthentication else "authentication"
        return f"Authentication failed during {phase} due to invalid credentials with SASL mechanism {self.mechanism}"


class RetriableSaslError(SaslAuthenticationError):
    """A failure the client should retry on a new connection (Kafka's retriable ``KerberosError``:
    a replayed authenticator, a ticket or client not yet valid): the connection closes without
    an answer, as Kafka closes it, and the client reconnects."""


class IllegalSaslStateError(SaslAuthenticationError):
    """A token or a question the mechanism's state does not allow (Kafka's ``IllegalSaslStateException``)."""

    error_code = ErrorCode.illegal_sasl_state

    def __init__(self, message: str, *, mechanism: str) -> None:
        super().__init__(message, mechanism=mechanism, public=True)


class SaslServer(Protocol):
    mechanism: str

    def evaluate_response(self, response: bytes) -> bytes: ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...


class SaslClient(Protocol):
    mechanism: str

    def evaluate_challenge(self, challenge: bytes) -> bytes | None: ...

    @property
    def complete(self) -> bool: ...


def not_completed(mechanism: str) -> IllegalSaslStateError:
    return IllegalSaslStateError("Authentication exchange has not completed", mechanism=mechanism)


class SingleIdentityServer:
    """What the PLAIN and GSSAPI servers share: the exchange ends once, with one authorization id.

    A subclass sets ``mechanism``, calls :meth:`_refuse_if_complete` first in its
    ``evaluate_response`` (a token after completion is an illegal state) and :meth:`_succeed` with
    the authorization id at the end. Single-threaded per connection, like the servers.
    """

    mechanism: str

    def __init__(self) -> None:
        self._complete = False
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete or self._authorization_id is None:
            raise not_completed(self.mechanism)
        return self._authorization_id

    def _refuse_if_complete(self) -> None:
        if self._complete:
            raise IllegalSaslStateError(
                f"Unexpected SASL/{self.mechanism} token after authentication completed", mechanism=self.mechanism
            )

    def _succeed(self, authorization_id: str) -> None:
        self._authorization_id = authorization_id
        self._complete = True
