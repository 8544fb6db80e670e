"""What each listener asks of a connection before serving it (Kafka's ``ChannelBuilders``).

One :class:`ListenerSecurity` per listener, built at start-up by :func:`listener_securities` from
the broker's keys, resolved for the listener (``listener.name.<l>.<key>`` over ``<key>``):

- ``security_protocol`` from ``listener.security.protocol.map``;
- SSL and SASL_SSL: an ``ssl.SSLContext`` (:func:`odradek.security.tls.create_ssl_context`, server
  side) and the ``ssl.principal.mapping.rules`` mapper for client certificates;
- SASL_PLAINTEXT and SASL_SSL: the enabled mechanisms (``sasl.enabled.mechanisms``), PLAIN's users
  from the PlainLoginModule JAAS entry (``listener.name.<l>.plain.sasl.jaas.config``, else
  ``sasl.jaas.config``), SCRAM's credentials from the broker's
  :class:`~odradek.metadata.scram_credentials.CredentialCache`, ``sasl.server.max.receive.size``,
  ``connection.failed.authentication.delay.ms`` and ``connections.max.reauth.ms``.

OAUTHBEARER's token validator from ``sasl.server.callback.handler.class``, the ``sasl.oauthbearer.*``
keys and the OAuthBearerLoginModule JAAS entry, each resolved per listener and mechanism
(:mod:`odradek.security.sasl.oauthbearer_config`).

GSSAPI's acceptor (the keytab of the Krb5LoginModule JAAS entry
``listener.name.<l>.gssapi.sasl.jaas.config``, ``sasl.kerberos.principal.to.local.rules``):
:mod:`odradek.security.sasl.gssapi_config`.

A mechanism odradek cannot serve on a SASL listener, a PLAIN mechanism
without a JAAS entry, or any bad ``ssl.*`` value raises
:class:`~odradek.errors.InvalidConfigError` naming the key. Reading key stores takes tens of
milliseconds: called at start-up and when a dynamic ``listener.name.<l>.*`` key changes, on the
event loop. The objects are immutable: a change builds a new one for the listener's new connections.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from odradek.errors import InvalidConfigError
from odradek.security.listener_config import jaas_config_key, listener_prefix
from odradek.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper
from odradek.security.sasl import (
    GSSAPI,
    KRB5_LOGIN_MODULE,
    OAUTHBEARER,
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslServer,
)
from odradek.security.sasl.jaas import PLAIN_LOGIN_MODULE, parse_single_login_module, plain_users
from odradek.security.sasl.plain import PlainSaslServer
from odradek.security.sasl.scram import ScramSaslServer
from odradek.server.config import BROKER_CONFIGS, SASL_PROTOCOLS, TLS_PROTOCOLS, KafkaConfig

if TYPE_CHECKING:
    # TLS (cryptography), OAUTHBEARER (PyJWT) and GSSAPI (gssapi) are imported where a listener
    # enabling them is built (listener_security and its helpers): a broker without them never loads them
    from cryptography import x509

    from odradek.metadata.scram_credentials import CredentialCache
    from odradek.security.sasl.gssapi_config import GssapiAcceptor
    from odradek.security.sasl.oauthbearer import TokenValidator

__all__ = [
    "SUPPORTED_MECHANISMS",
    "ListenerSecurity",
    "ensure_compatible",
    "listener_securities",
    "listener_security",
]

SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER, GSSAPI)


@dataclass(frozen=True)
class ListenerSecurity:
    listener_name: str
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    mechanisms: tuple[str, ...] = ()
    """Enabled SASL mechanisms, in the configured order (what UNSUPPORTED_SASL_MECHANISM lists)."""
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    credentials: CredentialCache | None = field(default=None, repr=False)
    max_receive_size: int = 524288
    failed_authentication_delay_ms: int = 100
    max_reauth_ms: int = 0
    store_files: tuple[tuple[str, tuple[int, int, int] | None], ...] = ()
    """(path, (mtime ns, size, inode) or None) of the key and trust store files read (TLS only)."""
    certificate: x509.Certificate | None = field(default=None, repr=False)
    """The key store's own certificate (TLS only)."""
    token_validator: TokenValidator | None = field(default=None, repr=False)
    """OAUTHBEARER's validator, when the mechanism is enabled."""
    oauthbearer_server: Callable[[], SaslServer] | None = field(init=False, default=None, repr=False, compare=False)
    """A fresh OAUTHBEARER server checking tokens with ``token_validator`` (set from it)."""
    gssapi: GssapiAcceptor | None = field(default=None, repr=False)
    """GSSAPI's acceptor (keytab credentials, principal mapping), when the mechanism is enabled."""

    def __post_init__(self) -> None:
        if self.token_validator is not None:
            # OAUTHBEARER's module (PyJWT) loads only for a listener that enables the mechanism
            from odradek.security.sasl.oauthbearer import OAuthBearerSaslServer

            object.__setattr__(self, "oauthbearer_server", partial(OAuthBearerSaslServer, self.token_validator))

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None

    def stores_modified(self) -> bool:
        """Whether a key or trust store file changed since it was read (Kafka's
        ``SecurityStore.modified``: reloaded by an AlterConfigs of this broker)."""
        return any(_file_stamp(path) != stamp for path, stamp in self.store_files)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS

    def certificate_principal(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """An SSL connection's principal: the client certificate's subject mapped by
        ``ssl.principal.mapping.rules`` (``User:ANONYMOUS`` without a mapper or a certificate, as
        Kafka's ``DefaultKafkaPrincipalBuilder``). Raises NoMatchingRule when no rule matches."""
        certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        return self.principal_mapper.principal(certificate) if self.principal_mapper is not None else ANONYMOUS

    def sasl_server(self, mechanism: str) -> SaslServer:
        """A fresh server of an enabled mechanism (the caller checked ``mechanism in mechanisms``)."""
        if mechanism == PLAIN:
            return PlainSaslServer(self.plain_users)
        if mechanism == OAUTHBEARER:
            assert self.oauthbearer_server is not None
            return self.oauthbearer_server()
        if mechanism == GSSAPI:
            assert self.gssapi is not None
            return self.gssapi.sasl_server()
        assert self.credentials is not None
        return ScramSaslServer(
            mechanism, self.credentials.lookup(mechanism), tokens=self.credentials.token_lookup(mechanism)
        )


def _file_stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def listener_security(config: KafkaConfig, name: str, credentials: CredentialCache | None) -> ListenerSecurity:
    """One listener's security from ``config`` (reads its key stores; InvalidConfigError naming
    the key when one cannot be used)."""
    protocol = config.listener_security_protocol(name)
    props = config.for_listener(name)
    ssl_context = mapper = certificate = None
    stores: tuple[tuple[str, tuple[int, int, int] | None], ...] = ()
    if protocol in TLS_PROTOCOLS:
        from odradek.security.tls import ssl_context_and_certificate

        paths = (props.get("ssl.keystore.location"), props.get("ssl.truststore.location"))
        stores = tuple((str(p), _file_stamp(str(p))) for p in paths if p)  # stamped before reading
        ssl_context, certificate = ssl_context_and_certificate(props, server_side=True)
        mapper = SslPrincipalMapper(config.listener_value(name, "ssl.principal.mapping.rules"))
    mechanisms: tuple[str, ...] = ()
    users: dict[str, str] = {}
    validator: TokenValidator | None = None
    acceptor: GssapiAcceptor | None = None
    if protocol in SASL_PROTOCOLS:
        mechanisms = tuple(config.sasl_enabled_mechanisms(name))
        prefix = listener_prefix(name)
        if not mechanisms:
            raise InvalidConfigError(f"{prefix}sasl.enabled.mechanisms: no SASL mechanism enabled on listener {name}")
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported:
            raise InvalidConfigError(
                f"Invalid value for configuration sasl.enabled.mechanisms of listener {name}: "
                f"{', '.join(unsupported)} not supported (supported: {', '.join(SUPPORTED_MECHANISMS)})"
            )
        if PLAIN in mechanisms:
            key = jaas_config_key(PLAIN)
            text = props.get(key) or props.get("sasl.jaas.config")
            if not text:
                raise InvalidConfigError(
                    f"No JAAS configuration for SASL/PLAIN on listener {name}: set {prefix}{key} "
                    '(PlainLoginModule with user_<name>="<password>" options)'
                )
            entry = parse_single_login_module(str(text), key=f"{prefix}{key}", expected_module=PLAIN_LOGIN_MODULE)
            users = plain_users(entry)
        if OAUTHBEARER in mechanisms:
            validator = _oauthbearer_validator(config, name, props)
        if GSSAPI in mechanisms:
            acceptor = _gssapi_acceptor(config, name, props)
    return ListenerSecurity(
        name,
        protocol,
        ssl_context,
        mapper,
        mechanisms,
        users,
        credentials,
        max_receive_size=int(config.listener_value(name, "sasl.server.max.receive.size")),
        failed_authentication_delay_ms=int(config.listener_value(name, "connection.failed.authentication.delay.ms")),
        max_reauth_ms=int(config.listener_value(name, "connections.max.reauth.ms")),
        store_files=stores,
        certificate=certificate,
        token_validator=validator,
        gssapi=acceptor,
    )


def _oauthbearer_validator(config: KafkaConfig, name: str, props: dict[str, Any]) -> TokenValidator:
    """OAUTHBEARER's validator for listener ``name``: each key's ``oauthbearer.<key>`` value for the
    listener, else its listener or broker value."""
    from odradek.security.sasl.oauthbearer_config import oauthbearer_validator

    def value(key: str) -> Any:
        raw = props.get(f"{OAUTHBEARER.lower()}.{key}")
        return config.listener_value(name, key) if raw is None else BROKER_CONFIGS.validate_one(key, raw)

    text = props.get(jaas_config_key(OAUTHBEARER)) or props.get("sasl.jaas.config")
    if text and OAUTHBEARER_LOGIN_MODULE not in str(text):
        text = props.get(jaas_config_key(OAUTHBEARER))  # the shared entry is another mechanism's
    return oauthbearer_validator(value, str(text) if text else None, listener_prefix(name))


def _gssapi_acceptor(config: KafkaConfig, name: str, props: dict[str, Any]) -> GssapiAcceptor:
    """GSSAPI's acceptor for listener ``name`` from its Krb5LoginModule entry (the shared
    ``sasl.jaas.config`` only when it is a Krb5LoginModule entry)."""
    from odradek.security.sasl.gssapi_config import gssapi_acceptor

    key = jaas_config_key(GSSAPI)
    text = props.get(key)
    jaas_key = f"{listener_prefix(name)}{key}"
    if not text and KRB5_LOGIN_MODULE in str(props.get("sasl.jaas.config") or ""):
        text, jaas_key = props.get("sasl.jaas.config"), "sasl.jaas.config"
    return gssapi_acceptor(lambda k: config.listener_value(name, k), str(text) if text else None, jaas_key=jaas_key)


def listener_securities(config: KafkaConfig, credentials: CredentialCache | None) -> dict[str, ListenerSecurity]:
    """Listener name -> its security, for every configured listener."""
    return {e.listener: listener_security(config, e.listener, credentials) for e in config.listeners}


def _dn(cert: x509.Certificate) -> str:
    """The subject as Java's ``X500Principal.toString`` writes it (``CN=broker-1, O=Acme, C=US``)."""
    return ", ".join(rdn.rfc4514_string() for rdn in reversed(cert.subject.rdns))


def _sans(cert: x509.Certificate) -> list[tuple[int, str]]:
    """(Java's general name type number, value) of each subject alternative name."""
    from cryptography import x509

    types: dict[type, int] = {
        x509.RFC822Name: 1,
        x509.DNSName: 2,
        x509.DirectoryName: 4,
        x509.UniformResourceIdentifier: 6,
        x509.IPAddress: 7,
        x509.RegisteredID: 8,
    }
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [(types.get(type(n), 0), str(n.value)) for n in names]


def ensure_compatible(old: ListenerSecurity, new: ListenerSecurity, allow_dn: bool, allow_san: bool) -> None:
    """Kafka's ``CertificateEntries.ensureCompatible`` for a dynamic key store update: the new
    certificate keeps the old one's subject (unless ``ssl.allow.dn.changes``) and every one of its
    subject alternative names (unless ``ssl.allow.san.changes``; added names are fine).
    InvalidConfigError with Kafka's text otherwise."""
    if old.certificate is None or new.certificate is None:
        return
    before, after = old.certificate, new.certificate
    if not allow_dn and before.subject != after.subject:
        raise InvalidConfigError(
            "Keystore DistinguishedName does not match:  "
            f"existing={{alias=kafka, DN={_dn(before)}}}, new={{alias=kafka, DN={_dn(after)}}}"
        )
    old_sans, new_sans = _sans(before), _sans(after)
    if not allow_san and not set(old_sans) <= set(new_sans):

        def text(sans: list[tuple[int, str]]) -> str:
            return "[" + ", ".join(f"[{t}, {v}]" for t, v in sans) + "]"

        raise InvalidConfigError(
            "Keystore SubjectAltNames do not match:  "
            f"existing={{alias=kafka, SAN={text(old_sans)}}}, new={{alias=kafka, SAN={text(new_sans)}}}"
        )
