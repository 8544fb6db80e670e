"""Who is on the other end of a connection (Kafka's ``RequestChannel.Session``).

The socket layer creates one :class:`Session` per connection once it knows the principal: at
accept for PLAINTEXT (``User:ANONYMOUS``) and SSL (the certificate's principal, or ANONYMOUS
without a client certificate), after a successful SASL exchange for SASL_PLAINTEXT / SASL_SSL.
Every request handler sees it as ``RequestContext.session``; authorization uses
``principal`` and ``client_host``, listener rules use ``listener_name``.

Plain data: safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["PLAINTEXT_SESSION", "Session"]


@dataclass(frozen=True, slots=True)
class Session:
    principal: KafkaPrincipal
    client_host: str
    listener_name: str
    security_protocol: str
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    sasl_mechanism: str | None = None
    token_authenticated: bool = False
    """Authenticated with a delegation token (SCRAM with ``tokenauth=true``): the principal is the
    token's owner, and token requests are refused (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""


PLAINTEXT_SESSION = Session(ANONYMOUS, "", "PLAINTEXT", "PLAINTEXT")
"""The session of a PLAINTEXT connection whose host is not known (in-process callers, tests)."""
