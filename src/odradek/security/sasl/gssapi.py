"""SASL/GSSAPI (Kerberos V5, RFC 4752) as Kafka serves it through the JDK's ``GssKrb5Server``.

The server (:class:`GssapiSaslServer`) runs three stages:

0. each client token goes to ``gss_accept_sec_context`` with the listener's acceptor credentials
   (the keytab's key for the JAAS ``principal``); its output token (the AP-REP when the client
   asked for mutual authentication) is the challenge. When the context is established with no
   output token, the server goes straight to stage 1's message.
1. the client's next token must be empty; the challenge is the 4-byte security layer offer,
   GSS-wrapped without confidentiality: ``0x01`` (only "no security layer", Kafka sets no
   ``javax.security.sasl.qop``) then the largest message the server receives, 65536, as 3 bytes
   big-endian (``01 01 00 00``).
2. the client's token is unwrapped: 4 bytes or more, the first octet the chosen layer (it must
   include bit 0x01), 3 bytes of size, then an optional authorization id in UTF-8. As Kafka's
   ``SaslServerCallbackHandler`` does, the authorization id asked for is ignored: the session
   is the authenticated initiator's name (``alice@EXAMPLE.COM``), mapped to its short name by
   ``sasl.kerberos.principal.to.local.rules`` (:mod:`odradek.security.kerberos`); the empty
   challenge completes the exchange.

A malformed or forged token, an expired ticket, a ticket for another service or a name no rule
maps raise :class:`SaslAuthenticationError` whose message (logged, never sent to the client) names
the GSS failure; the client is told Kafka's generic text. Kafka's retriable Kerberos errors (a
replayed authenticator, which the JDK's replay cache reports for two connections opened in the
same instant; a ticket or client not yet valid) raise :class:`RetriableSaslError`: the broker
closes the connection unanswered and the client connects again.

The client (:class:`GssapiSaslClient`) is the initiator side for the broker's own connections
and odradek's tools: target ``<service>@<host>`` (a host-based service name), credentials from a
keytab (MIT's ``client_keytab`` credential store, kept in a ``MEMORY:`` cache of this process, so
tickets are fetched and renewed from the keytab as needed) or the default ticket cache. Its steps
may ask the KDC for a ticket: call them off the event loop (:attr:`GssapiSaslClient.blocking`).

:class:`KeytabLogin` reads ``com.sun.security.auth.module.Krb5LoginModule``'s JAAS options
(``useKeyTab``, ``keyTab``, ``principal``, ``serviceName``, ``useTicketCache``); others
(``storeKey``, ``debug``, ``doNotPrompt``, ...) are accepted and ignored. One server or client per
connection, fed one token at a time by that connection's loop; credentials are shared.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass

import gssapi
import gssapi.raw

from odradek.errors import InvalidConfigError
from odradek.security.kerberos import KerberosName, KerberosShortNamer, NoMatchingRule
from odradek.security.sasl import (
    GSSAPI,
    KRB5_LOGIN_MODULE,
    IllegalSaslStateError,
    RetriableSaslError,
    SaslAuthenticationError,
    SingleIdentityServer,
)
from odradek.security.sasl.jaas import LoginModuleEntry

__all__ = [
    "GSSAPI",
    "KRB5_LOGIN_MODULE",
    "GssapiSaslClient",
    "GssapiSaslServer",
    "KeytabLogin",
]

log = logging.getLogger(__name__)

NO_SECURITY_LAYER = 0x01
MAX_RECEIVE_SIZE = 65536
_GSS_ERRORS = (gssapi.raw.misc.GSSError, ValueError, TypeError)
_CACHE_IDS = itertools.count(1)
_KRB5_ERROR_BASE = 2529638912  # MIT's krb5 error table: minor code = base + Kerberos error number
RETRIABLE_KERBEROS_ERRORS = {21: "CLIENT_NOT_YET_VALID", 33: "TICKET_NOT_YET_VALID", 34: "REPLAY"}
"""Kafka's retriable ``KerberosError``s: the broker closes the connection without answering."""


def _gss_text(exc: BaseException) -> str:
    text = getattr(exc, "gen_message", None)
    try:
        return str(text()) if callable(text) else str(exc)
    except Exception:
        return type(exc).__name__


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


@dataclass(frozen=True)
class KeytabLogin:
    """The Krb5LoginModule options that matter (module docstring)."""

    principal: str | None
    keytab: str | None = None
    service_name: str | None = None

    @classmethod
    def from_jaas(cls, entry: LoginModuleEntry, *, key: str) -> KeytabLogin:
        """From a Krb5LoginModule entry; InvalidConfigError naming ``key`` for another module or a
        ``useKeyTab=true`` entry whose ``keyTab`` is missing."""
        if entry.login_module != KRB5_LOGIN_MODULE:
            raise InvalidConfigError(
                f"Invalid value for configuration {key}: login module {entry.login_module} given, "
                f"{KRB5_LOGIN_MODULE} expected for GSSAPI"
            )
        options = entry.options
        keytab = options.get("keyTab") if _true(options.get("useKeyTab")) else None
        if _true(options.get("useKeyTab")) and not keytab:
            raise InvalidConfigError(f'Invalid value for configuration {key}: useKeyTab=true needs keyTab="<path>"')
        return cls(options.get("principal"), keytab, options.get("serviceName"))

    def _name(self) -> gssapi.Name | None:
        if not self.principal or self.principal == "*":
            return None
        return gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)

    def acceptor_credentials(self, *, key: str) -> gssapi.Credentials:
        """The listener's acceptor credentials (reads the keytab; InvalidConfigError naming ``key``
        when the keytab lacks the principal or cannot be read). ``principal="*"``: any key in it."""
        store: dict[bytes | str, bytes | str] | None = {b"keytab": self.keytab.encode()} if self.keytab else None
        try:
            return gssapi.Credentials(name=self._name(), usage="accept", store=store)
        except _GSS_ERRORS as exc:
            raise InvalidConfigError(
                f"Invalid value for configuration {key}: cannot use {self.principal} from keytab "
                f"{self.keytab or '(default)'} to accept GSSAPI logins: {_gss_text(exc)}"
            ) from None

    def initiator_credentials(self) -> gssapi.Credentials | None:
        """Credentials for initiating: from the keytab (tickets kept in a ``MEMORY:`` cache of
        this process), else None for the default ticket cache. Talks to no KDC yet."""
        if not self.keytab:
            return None
        store: dict[bytes | str, bytes | str] = {
            b"client_keytab": self.keytab.encode(),
            b"ccache": f"MEMORY:odradek-{next(_CACHE_IDS)}".encode(),
        }
        return gssapi.Credentials(name=self._name(), usage="initiate", store=store)

    def sasl_client(self, service_name: str, host: str) -> GssapiSaslClient:
        """A fresh client exchange for ``<service_name>/<host>`` with this login's process-wide
        initiator credentials (:func:`shared_initiator_credentials`). Any thread."""
        return GssapiSaslClient(service_name, host, shared_initiator_credentials(self))


class GssapiSaslServer(SingleIdentityServer):
    """The acceptor side of one exchange (module docstring)."""

    mechanism = GSSAPI
    final_challenge_absent = True
    """The JDK's server returns no challenge (null) for the last token: the legacy SaslHandshake
    v0 flow sends nothing then (SaslAuthenticate still answers, with empty bytes)."""

    def __init__(self, credentials: gssapi.Credentials, short_namer: KerberosShortNamer) -> None:
        self._credentials = credentials
        self._namer = short_namer
        self._context: gssapi.SecurityContext | None = None
        self._stage = 0
        super().__init__()
        self.authentication_id: str | None = None
        """The initiator's full Kerberos name once the context is established."""

    def evaluate_response(self, response: bytes) -> bytes:
        self._refuse_if_complete()
        if self._stage == 1:
            if response:
                raise SaslAuthenticationError("Handshake expecting no response data from server", mechanism=GSSAPI)
            return self._offer_security_layer()
        if self._stage == 2:
            return self._choose_security_layer(response)
        if not response:
            raise SaslAuthenticationError("GSS initiate failed: empty GSS token", mechanism=GSSAPI)
        if self._context is None:
            self._context = gssapi.SecurityContext(creds=self._credentials, usage="accept")
        try:
            token = self._context.step(response)
            established = self._context.complete
            peer = str(self._context.initiator_name) if established else None
        except _GSS_ERRORS as exc:
            minor = getattr(exc, "min_code", None)
            if isinstance(minor, int) and minor - _KRB5_ERROR_BASE in RETRIABLE_KERBEROS_ERRORS:
                raise RetriableSaslError(f"GSS initiate failed: {_gss_text(exc)}", mechanism=GSSAPI) from None
            raise SaslAuthenticationError(f"GSS initiate failed: {_gss_text(exc)}", mechanism=GSSAPI) from None
        if peer is None:
            return token or b""
        self.authentication_id = peer
        self._stage = 1
        return token if token else self._offer_security_layer()

    def _offer_security_layer(self) -> bytes:
        assert self._context is not None
        offer = bytes([NO_SECURITY_LAYER]) + MAX_RECEIVE_SIZE.to_bytes(3, "big")
        try:
            wrapped = self._context.wrap(offer, False).message
        except _GSS_ERRORS as exc:
            raise SaslAuthenticationError(f"Problem wrapping handshake1: {_gss_text(exc)}", mechanism=GSSAPI) from None
        self._stage = 2
        return bytes(wrapped)

    def _choose_security_layer(self, response: bytes) -> bytes:
        assert self._context is not None and self.authentication_id is not None
        try:
            message = bytes(self._context.unwrap(response).message)
        except _GSS_ERRORS as exc:
            raise SaslAuthenticationError(f"Final handshake step failed: {_gss_text(exc)}", mechanism=GSSAPI) from None
        if len(message) < 4:
            raise SaslAuthenticationError(
                f"Final handshake step failed: {len(message)} bytes where 4 or more are expected", mechanism=GSSAPI
            )
        if not message[0] & NO_SECURITY_LAYER:
            raise SaslAuthenticationError(f"Client selected unsupported protection: {message[0]}", mechanism=GSSAPI)
        requested = message[4:].decode("utf-8", "replace") if len(message) > 4 else self.authentication_id
        try:
            short = self._namer.short_name(KerberosName.parse(self.authentication_id))
        except (NoMatchingRule, ValueError) as exc:
            raise SaslAuthenticationError(
                f"Failed to set name for '{self.authentication_id}' based on Kerberos authentication rules: {exc}",
                mechanism=GSSAPI,
            ) from None
        log.info(
            "Successfully authenticated client: authenticationID=%s; authorizationID=%s.",
            self.authentication_id,
            requested,
        )
        self._succeed(short)
        return b""


class GssapiSaslClient:
    """The initiator side of one exchange (module docstring)."""

    mechanism = GSSAPI
    blocking = True
    """Steps may wait for the KDC: run them in a worker thread."""

    def __init__(self, service_name: str, host: str, credentials: gssapi.Credentials | None = None) -> None:
        self.target = f"{service_name}@{host}"
        self._credentials = credentials
        self._context: gssapi.SecurityContext | None = None
        self._awaiting_offer = False
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if self._complete:
            if challenge:
                raise IllegalSaslStateError("Unexpected challenge after SASL/GSSAPI authentication", mechanism=GSSAPI)
            return None
        try:
            if self._context is None:
                name = gssapi.Name(self.target, gssapi.NameType.hostbased_service)
                self._context = gssapi.SecurityContext(name=name, creds=self._credentials, usage="initiate")
                return bytes(self._context.step(None) or b"")
            if not self._context.complete:
                token = self._context.step(challenge)
                return bytes(token or b"")
            if not challenge:
                raise SaslAuthenticationError("Empty security layer offer from the server", mechanism=GSSAPI)
            offer = bytes(self._context.unwrap(challenge).message)
            if len(offer) < 4 or not offer[0] & NO_SECURITY_LAYER:
                raise SaslAuthenticationError(
                    f"Server offers no acceptable security layer ({offer[:1].hex() or 'nothing'})", mechanism=GSSAPI
                )
            # RFC 4752: size 0 with no layer; then the authorization id, our own name (as Kafka's
            # Java client asks for its principal; Kafka's broker ignores it)
            answer = bytes([NO_SECURITY_LAYER]) + b"\x00\x00\x00" + str(self._context.initiator_name).encode()
            self._complete = True
            return bytes(self._context.wrap(answer, False).message)
        except _GSS_ERRORS as exc:
            raise SaslAuthenticationError(
                f"GSSAPI exchange with {self.target} failed: {_gss_text(exc)}", mechanism=GSSAPI
            ) from None


_INITIATORS: dict[KeytabLogin, gssapi.Credentials | None] = {}
_INITIATORS_LOCK = threading.Lock()


def shared_initiator_credentials(login: KeytabLogin) -> gssapi.Credentials | None:
    """One initiator credential per login for the whole process (its ``MEMORY:`` cache keeps the
    TGT, so each new connection asks the KDC only for a service ticket it lacks). Any thread."""
    with _INITIATORS_LOCK:
        if login not in _INITIATORS:
            _INITIATORS[login] = login.initiator_credentials()
        return _INITIATORS[login]
