"""How a client connection secures itself: Kafka's client keys as one immutable :class:`ClientSecurity`.

Built by :meth:`ClientSecurity.from_properties` from a map of Kafka's client keys (a
``--command-config`` file, Spark's ``kafka.*`` options stripped of their prefix, a broker's
inter-broker settings):

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (any case);
- ``ssl.*`` as Kafka's clients read them (``ssl.truststore.*``, ``ssl.keystore.*``,
  ``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (default ``https``: the broker's
  certificate must name the host connected to), ``ssl.enabled.protocols``, ``ssl.cipher.suites``),
  turned into an ``ssl.SSLContext`` by :func:`odradek.security.tls.create_ssl_context`; librdkafka's
  names are accepted too: ``ssl.ca.location`` (a PEM file of CAs), ``ssl.certificate.location`` +
  ``ssl.key.location`` (PEM files; ``ssl.key.password``), ``ssl.endpoint.identification.algorithm=none``;
- ``sasl.mechanism`` (librdkafka: ``sasl.mechanisms``): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
  OAUTHBEARER or GSSAPI (Kafka's default);
- the credentials: ``sasl.jaas.config`` (``...LoginModule required username="alice" password="...";``,
  parsed by :mod:`odradek.security.sasl.jaas`, never evaluated), else librdkafka's
  ``sasl.username`` / ``sasl.password``; for OAUTHBEARER the ``OAuthBearerLoginModule`` entry with
  ``sasl.login.callback.handler.class`` and ``sasl.oauthbearer.token.endpoint.url``
  (:func:`odradek.security.sasl.oauthbearer_config.client_login`: unsecured tokens, or tokens of an
  OAuth 2 token endpoint, refreshed before they expire);
- a delegation token (KIP-48): ``ScramLoginModule required username="<token id>" password="<base64
  HMAC>" tokenauth="true";`` (Kafka's clients' form): the SCRAM client-first message carries the
  extension ``tokenauth=true``;
- GSSAPI: ``sasl.kerberos.service.name`` (or the JAAS ``serviceName``; required) and the login:
  a ``Krb5LoginModule`` JAAS entry (``useKeyTab=true keyTab="..." principal="..."``), else
  librdkafka's ``sasl.kerberos.keytab`` + ``sasl.kerberos.principal``, else the default ticket
  cache (``KRB5CCNAME``). The ticket asked for is ``<service>/<host connected to>``.

Other keys (``client.id``, ``request.timeout.ms``, ...) are ignored here. Every problem raises
:class:`~odradek.errors.InvalidConfigError` naming the key. The SSL context is built once per
distinct ``ssl.*`` map and cached (building reads files: :meth:`ClientSecurity.ssl_context_async`
builds it off the event loop). :func:`inter_broker_client_security` is what a broker's own
connections (controller channel, replica fetchers, transaction markers, controlled shutdown) use.

Immutable and hashable: safe from any thread; :meth:`ClientSecurity.sasl_client` returns a fresh
mechanism state machine per connection. OAUTHBEARER's login is the one resource a security holds:
whoever builds a security closes it (:meth:`ClientSecurity.close`) when done with it: a broker at
shutdown, a command when it ends; the login, shared by the securities of one configuration, stops
refreshing when the last of them closes.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from odradek.configdef import parse_properties
from odradek.errors import InvalidConfigError
from odradek.security.listener_config import jaas_config_key, listener_config
from odradek.security.sasl import (
    GSSAPI,
    OAUTHBEARER,
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslClient,
)
from odradek.security.sasl.jaas import parse_single_login_module
from odradek.security.sasl.plain import PlainSaslClient
from odradek.security.sasl.scram import TOKEN_AUTH, ScramSaslClient
from odradek.security.tls import SSL_CONFIG, create_ssl_context

if TYPE_CHECKING:
    # GSSAPI's and OAUTHBEARER's modules load gssapi and PyJWT: imported where a login of that
    # mechanism is built from config (below), so a client or broker without them never loads them
    from odradek.security.sasl.gssapi import KeytabLogin
    from odradek.security.sasl.oauthbearer_login import LoginLease, OAuthBearerLogin

__all__ = [
    "PLAINTEXT_SECURITY",
    "SECURITY_PROTOCOLS",
    "SUPPORTED_MECHANISMS",
    "ClientSecurity",
    "InterBrokerConfig",
    "inter_broker_client_security",
    "is_security_key",
    "read_properties_file",
]

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER, GSSAPI)
DEFAULT_SASL_MECHANISM = GSSAPI
"""Kafka's default ``sasl.mechanism`` (and ``sasl.mechanism.inter.broker.protocol``)."""

SOURCE_ADDRESS_CONFIG = "odradek.broker.source.address"
"""odradek's broker key (Kafka has none): the local address of the broker's own outgoing connections."""

_CONTEXTS: dict[tuple[tuple[str, str], ...], ssl.SSLContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def _text(value: Any) -> str:
    """A config value as text (lists as Kafka's comma-separated form)."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class ClientSecurity:
    """One client's security settings (see the module docstring)."""

    security_protocol: str = PLAINTEXT
    ssl_config: tuple[tuple[str, str], ...] = ()
    """The ``ssl.*`` keys in Kafka's names, sorted (librdkafka's already translated)."""
    sasl_mechanism: str = DEFAULT_SASL_MECHANISM
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    kerberos: KeytabLogin | None = None
    """GSSAPI's login (keytab and principal; None fields: the default ticket cache)."""
    kerberos_service_name: str | None = None
    """GSSAPI's service name: the ticket is for ``<service>/<broker host>``."""
    source_address: str | None = None
    """The local address a connection's socket binds before connecting (port chosen by the OS);
    None lets the OS pick. A broker's own connections take it from ``odradek.broker.source.address``
    (:data:`SOURCE_ADDRESS_CONFIG`); a client has none."""
    sasl_token_auth: bool = False
    """Log in with a delegation token (SCRAM with the ``tokenauth=true`` extension)."""
    oauthbearer: LoginLease | None = field(default=None, compare=False, repr=False)
    """This security's hold on OAUTHBEARER's token holder (a login shared per configuration,
    refreshing on a thread of its own until its last holder closes); None for the other mechanisms."""

    @property
    def oauthbearer_login(self) -> OAuthBearerLogin | None:
        """OAUTHBEARER's shared token holder (None for the other mechanisms)."""
        return None if self.oauthbearer is None else self.oauthbearer.login

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in (SSL, SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in (SASL_PLAINTEXT, SASL_SSL)

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | None) -> ClientSecurity:
        """From Kafka's (or librdkafka's) client keys; :data:`PLAINTEXT_SECURITY` for none.

        Raises InvalidConfigError naming the key: an unknown protocol, a SASL protocol with an
        unsupported mechanism or without credentials, a malformed JAAS string.
        """
        props = {str(k): v for k, v in (props or {}).items() if v is not None}
        protocol = _text(props.get("security.protocol", PLAINTEXT)).strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"Invalid value {protocol} for configuration security.protocol: String must be one of: "
                + ", ".join(SECURITY_PROTOCOLS)
            )
        ssl_config = _ssl_keys(props) if protocol in (SSL, SASL_SSL) else ()
        if protocol not in (SASL_PLAINTEXT, SASL_SSL):
            return cls(protocol, ssl_config)
        mechanism = _text(props.get("sasl.mechanism", props.get("sasl.mechanisms", DEFAULT_SASL_MECHANISM)))
        mechanism = mechanism.strip().upper()
        check_mechanism(mechanism, "sasl.mechanism")
        if mechanism == OAUTHBEARER:
            return cls(protocol, ssl_config, mechanism, oauthbearer=_oauthbearer_login(props, "sasl.jaas.config"))
        if mechanism == GSSAPI:
            login = _client_kerberos_login(props)
            service = _service_name(props.get("sasl.kerberos.service.name"), login, "sasl.kerberos.service.name")
            return cls(protocol, ssl_config, mechanism, kerberos=login, kerberos_service_name=service)
        username, password = _credentials(props, "sasl.jaas.config")
        if username is None or password is None:
            raise InvalidConfigError(
                f"security.protocol {protocol} needs the client's credentials: sasl.jaas.config "
                f'(e.g. {_module_for(mechanism)} required username="alice" password="...";) '
                "or sasl.username and sasl.password"
            )
        token_auth = _token_auth(props, "sasl.jaas.config")
        if token_auth and mechanism not in (SCRAM_SHA_256, SCRAM_SHA_512):
            raise InvalidConfigError(f"tokenauth needs a SCRAM sasl.mechanism, not {mechanism}")
        return cls(protocol, ssl_config, mechanism, username, password, sasl_token_auth=token_auth)

    # --- what a connection uses --------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client-side context (None unless SSL or SASL_SSL), built once per ``ssl.*`` map.

        Raises :class:`~odradek.security.tls.SslConfigError` naming the key. May read files."""
        if not self.uses_ssl:
            return None
        with _CONTEXTS_LOCK:
            context = _CONTEXTS.get(self.ssl_config)
        if context is None:
            context = create_ssl_context(dict(self.ssl_config), server_side=False)
            with _CONTEXTS_LOCK:
                context = _CONTEXTS.setdefault(self.ssl_config, context)
        return context

    async def ssl_context_async(self) -> ssl.SSLContext | None:
        """:meth:`ssl_context`, built in a worker thread the first time (event loop callers)."""
        if not self.uses_ssl:
            return None
        with _CONTEXTS_LOCK:
            context = _CONTEXTS.get(self.ssl_config)
        return context if context is not None else await asyncio.to_thread(self.ssl_context)

    def sasl_client(self, host: str = "") -> SaslClient:
        """A fresh client mechanism for one exchange with ``host`` (SASL protocols only). GSSAPI's
        first use of a keytab builds its credentials (no KDC contact yet)."""
        if self.uses_sasl and self.sasl_mechanism == GSSAPI:
            assert self.kerberos is not None and self.kerberos_service_name is not None
            return self.kerberos.sasl_client(self.kerberos_service_name, host)
        if self.uses_sasl and self.oauthbearer_login is not None:
            return self.oauthbearer_login.sasl_client()
        if not self.uses_sasl or self.sasl_username is None or self.sasl_password is None:
            raise InvalidConfigError(f"security.protocol {self.security_protocol} does not authenticate with SASL")
        if self.sasl_mechanism == PLAIN:
            return PlainSaslClient(self.sasl_username, self.sasl_password)
        extensions = {TOKEN_AUTH: "true"} if self.sasl_token_auth else None
        return ScramSaslClient(self.sasl_mechanism, self.sasl_username, self.sasl_password, extensions=extensions)

    # --- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Release what this security holds: OAUTHBEARER's login, whose refresh thread ends
        (joined here) when its last holder closes. Blocking for at most a token request's timeout
        (a refresh under way); idempotent; copies made by ``dataclasses.replace`` share the hold,
        so one close releases it for all. The owner (who built it by :meth:`from_properties` or
        :func:`inter_broker_client_security`) closes it when its clients are closed; a security
        never closed releases its hold when garbage collected. A no-op for the other mechanisms."""
        if self.oauthbearer is not None:
            self.oauthbearer.release()

    async def aclose(self) -> None:
        """:meth:`close` from an event loop: the join runs in a worker thread (only when there is
        a login to release)."""
        if self.oauthbearer is not None and not self.oauthbearer.released:
            await asyncio.to_thread(self.close)


PLAINTEXT_SECURITY = ClientSecurity()


def is_security_key(key: str) -> bool:
    """Whether ``key`` is one :meth:`ClientSecurity.from_properties` reads (``security.protocol``,
    ``ssl.*``, ``sasl.*``)."""
    return key == "security.protocol" or key.startswith(("ssl.", "sasl."))


def check_mechanism(mechanism: str, key: str) -> None:
    """InvalidConfigError unless ``mechanism`` is one odradek's clients speak."""
    if mechanism not in SUPPORTED_MECHANISMS:
        raise InvalidConfigError(
            f"Invalid value {mechanism} for configuration {key}: odradek's clients support "
            f"{', '.join(SUPPORTED_MECHANISMS)} only"
        )


def _oauthbearer_login(props: Mapping[str, Any], jaas_key: str) -> LoginLease:
    """A hold on the started login of an OAUTHBEARER client whose keys are ``props`` (JAAS entry
    at ``jaas_key``)."""
    from odradek.security.sasl.oauthbearer_config import client_login

    jaas = props.get(jaas_key)
    if jaas is None or not str(jaas).strip():
        raise InvalidConfigError(
            f"Missing configuration {jaas_key}: OAUTHBEARER needs {OAUTHBEARER_LOGIN_MODULE} required "
            'unsecuredLoginStringClaim_sub="..."; (unsecured tokens) or clientId="..." clientSecret="..."; with '
            "sasl.login.callback.handler.class and sasl.oauthbearer.token.endpoint.url"
        )

    def value(key: str) -> Any:
        raw = props.get(f"oauthbearer.{key}", props.get(key))
        return None if raw is None else _text(raw)

    return client_login(value, str(jaas), jaas_key)


def _service_name(configured: Any, login: KeytabLogin, key: str) -> str:
    """GSSAPI's service name: ``key``'s value, else the JAAS ``serviceName`` (Kafka's order)."""
    service = str(configured).strip() if configured is not None and str(configured).strip() else login.service_name
    if not service:
        raise InvalidConfigError(
            f"Missing configuration {key}: GSSAPI needs the brokers' Kerberos service name (e.g. kafka), "
            "or serviceName in the Krb5LoginModule JAAS entry"
        )
    return service


def _client_kerberos_login(props: Mapping[str, Any]) -> KeytabLogin:
    """GSSAPI's login from ``sasl.jaas.config`` (Krb5LoginModule), else librdkafka's keys."""
    from odradek.security.sasl.gssapi import KeytabLogin

    jaas = props.get("sasl.jaas.config")
    if jaas is not None and str(jaas).strip():
        entry = parse_single_login_module(str(jaas), key="sasl.jaas.config")
        return KeytabLogin.from_jaas(entry, key="sasl.jaas.config")
    keytab, principal = props.get("sasl.kerberos.keytab"), props.get("sasl.kerberos.principal")
    return KeytabLogin(None if principal is None else str(principal), None if keytab is None else str(keytab))


def _module_for(mechanism: str) -> str:
    kind = "plain.PlainLoginModule" if mechanism == PLAIN else "scram.ScramLoginModule"
    return f"org.apache.kafka.common.security.{kind}"


def _credentials(props: Mapping[str, Any], jaas_key: str) -> tuple[str | None, str | None]:
    """(username, password) from the JAAS option ``jaas_key`` in ``props``, else librdkafka's keys."""
    jaas = props.get(jaas_key)
    if jaas is not None and str(jaas).strip():
        entry = parse_single_login_module(str(jaas), key=jaas_key)
        return entry.options.get("username"), entry.options.get("password")
    username, password = props.get("sasl.username"), props.get("sasl.password")
    return (None if username is None else str(username)), (None if password is None else str(password))


def _token_auth(props: Mapping[str, Any], jaas_key: str) -> bool:
    """The JAAS option ``tokenauth="true"`` (any case) of ``props[jaas_key]``."""
    jaas = props.get(jaas_key)
    if jaas is None or not str(jaas).strip():
        return False
    entry = parse_single_login_module(str(jaas), key=jaas_key)
    return str(entry.options.get("tokenauth", "false")).lower() == "true"


def _read_text(path: str, key: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InvalidConfigError(f"Invalid value {path} for configuration {key}: {e.strerror}") from None


def _ssl_keys(props: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Kafka's ``ssl.*`` keys from ``props``, with librdkafka's names translated (module docstring)."""
    out = {k: _text(v) for k, v in props.items() if k in SSL_CONFIG}
    ca = props.get("ssl.ca.location")
    if ca is not None and "ssl.truststore.location" not in out and "ssl.truststore.certificates" not in out:
        out["ssl.truststore.location"] = str(ca)
        out["ssl.truststore.type"] = "PEM"
    cert, key = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    if (cert is not None or key is not None) and "ssl.keystore.location" not in out:
        if cert is None or key is None:
            missing = "ssl.certificate.location" if cert is None else "ssl.key.location"
            raise InvalidConfigError(f"Missing configuration {missing}: a client certificate needs both files")
        out["ssl.keystore.certificate.chain"] = _read_text(str(cert), "ssl.certificate.location")
        out["ssl.keystore.key"] = _read_text(str(key), "ssl.key.location")
        out["ssl.keystore.type"] = "PEM"
    if out.get("ssl.endpoint.identification.algorithm", "").strip().lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""  # librdkafka's spelling of "off"
    return tuple(sorted(out.items()))


def read_properties_file(path: str, option: str = "--command-config") -> dict[str, str]:
    """A Java properties file of client keys (``--command-config``, ``--producer.config``, ...);
    InvalidConfigError naming ``option`` when it cannot be read."""
    return parse_properties(_read_text(path, option))


# --- the broker's own connections ------------------------------------------------------------


class InterBrokerConfig(Protocol):
    """What :func:`inter_broker_client_security` reads of a broker's ``KafkaConfig``."""

    originals: dict[str, Any]
    inter_broker_listener_name: str

    def security_protocol_map(self) -> dict[str, str]: ...


def inter_broker_client_security(config: InterBrokerConfig) -> ClientSecurity:
    """How this broker connects to the others (Kafka's inter-broker ``ChannelBuilder``).

    The protocol is the one ``listener.security.protocol.map`` gives the inter-broker listener
    (``inter.broker.listener.name``, or the listener named by ``security.inter.broker.protocol``);
    the TLS settings are the listener's (``listener.name.<l>.ssl.*`` over ``ssl.*``, so a broker's
    key store is also its client certificate, as Kafka's); the SASL mechanism is
    ``sasl.mechanism.inter.broker.protocol`` (Kafka's default GSSAPI: the listener's Krb5LoginModule
    keytab and ``sasl.kerberos.service.name``); otherwise the credentials are the ``username`` /
    ``password`` options of the listener's JAAS entry (``listener.name.<l>.<mechanism>.sasl.jaas.config``,
    then ``sasl.jaas.config``); for OAUTHBEARER that entry and the listener's ``sasl.login.*`` keys
    make the broker's login (unsecured or client-credentials tokens; blocking: the first token is
    obtained here).
    Raises InvalidConfigError naming the key.
    """
    listener = config.inter_broker_listener_name
    protocol = config.security_protocol_map().get(listener.upper(), listener.upper())
    return inter_broker_security_for(config.originals, listener, protocol)


def inter_broker_security_for(props: Mapping[str, Any], listener: str, protocol: str) -> ClientSecurity:
    """:func:`inter_broker_client_security` from a broker's raw keys, its inter-broker listener
    name and that listener's security protocol; ``odradek.broker.source.address`` sets
    :attr:`ClientSecurity.source_address`."""
    security = _inter_broker_security(props, listener, protocol)
    source = props.get(SOURCE_ADDRESS_CONFIG)
    return replace(security, source_address=str(source)) if source else security


def _inter_broker_security(props: Mapping[str, Any], listener: str, protocol: str) -> ClientSecurity:
    resolved = listener_config({str(k): v for k, v in props.items() if v is not None}, listener)
    protocol = protocol.upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise InvalidConfigError(
            f"Invalid value {protocol} for the security protocol of the inter-broker listener {listener}"
        )
    ssl_config = _ssl_keys(resolved) if protocol in (SSL, SASL_SSL) else ()
    if protocol not in (SASL_PLAINTEXT, SASL_SSL):
        return ClientSecurity(protocol, ssl_config)
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = _text(resolved.get(key, DEFAULT_SASL_MECHANISM)).strip().upper()
    check_mechanism(mechanism, key)
    prefixed = f"listener.name.{listener.lower()}.{jaas_config_key(mechanism)}"
    if mechanism == GSSAPI:
        return _inter_broker_kerberos(resolved, protocol, ssl_config, prefixed)
    jaas_key = jaas_config_key(mechanism) if jaas_config_key(mechanism) in resolved else "sasl.jaas.config"
    if mechanism == OAUTHBEARER:
        # the broker's own login: the listener's OAuthBearerLoginModule entry and its sasl.login.* keys
        if not str(resolved.get(jaas_key) or "").strip():
            raise InvalidConfigError(
                f"Missing configuration {prefixed}: the inter-broker listener {listener} uses {protocol} with "
                f'OAUTHBEARER; its {OAUTHBEARER_LOGIN_MODULE} entry needs unsecuredLoginStringClaim_sub="..." '
                "(unsecured tokens) or clientId/clientSecret with sasl.login.callback.handler.class and "
                "sasl.oauthbearer.token.endpoint.url (OAUTHBEARER needs a login)"
            )
        return ClientSecurity(protocol, ssl_config, mechanism, oauthbearer=_oauthbearer_login(resolved, jaas_key))
    jaas = resolved.get(jaas_key)
    if jaas is None or not str(jaas).strip():
        raise InvalidConfigError(
            f"Missing configuration {prefixed}: the inter-broker listener {listener} uses {protocol} with "
            f'{mechanism}; its JAAS entry needs username="..." password="..." for the broker\'s own connections'
        )
    entry = parse_single_login_module(str(jaas), key=prefixed if jaas_key != "sasl.jaas.config" else jaas_key)
    username, password = entry.options.get("username"), entry.options.get("password")
    if username is None or password is None:
        raise InvalidConfigError(
            f"Invalid value for configuration {prefixed}: the inter-broker listener's JAAS entry needs "
            'username="..." and password="..." (the credentials this broker presents to the others)'
        )
    return ClientSecurity(protocol, ssl_config, mechanism, username, password)


def _inter_broker_kerberos(
    resolved: Mapping[str, Any], protocol: str, ssl_config: tuple[tuple[str, str], ...], prefixed: str
) -> ClientSecurity:
    """GSSAPI between brokers: the listener's Krb5LoginModule entry (the keytab the listener
    accepts with also logs this broker in) and ``sasl.kerberos.service.name``."""
    from odradek.security.sasl.gssapi import KeytabLogin

    jaas_key = jaas_config_key(GSSAPI) if jaas_config_key(GSSAPI) in resolved else "sasl.jaas.config"
    jaas = resolved.get(jaas_key)
    if jaas is None or not str(jaas).strip():
        raise InvalidConfigError(
            f"Missing configuration {prefixed}: the inter-broker listener uses GSSAPI; its Krb5LoginModule entry "
            "(useKeyTab=true keyTab=... principal=...) logs the broker in to the others"
        )
    key = prefixed if jaas_key != "sasl.jaas.config" else jaas_key
    login = KeytabLogin.from_jaas(parse_single_login_module(str(jaas), key=key), key=key)
    service = _service_name(resolved.get("sasl.kerberos.service.name"), login, "sasl.kerberos.service.name")
    return ClientSecurity(protocol, ssl_config, GSSAPI, kerberos=login, kerberos_service_name=service)
