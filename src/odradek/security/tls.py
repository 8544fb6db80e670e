"""An ``ssl.SSLContext`` from Kafka's ``ssl.*`` keys (Kafka's ``DefaultSslEngineFactory``).

``create_ssl_context(config, server_side=...)`` takes the keys already resolved for one listener
(:func:`odradek.security.listener_config.listener_config` strips ``listener.name.<l>.``).

Key store (the certificate this side presents):

- ``ssl.keystore.type=PEM``: ``ssl.keystore.location`` is a file with the private key and the
  certificate chain (leaf first), or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` hold
  them inline; ``ssl.key.password`` decrypts an encrypted key; ``ssl.keystore.password`` must not be
  set (Kafka's rule).
- ``ssl.keystore.type=PKCS12``: ``ssl.keystore.location`` and ``ssl.keystore.password`` (the key is
  read with it, or with ``ssl.key.password`` when that differs), read by ``cryptography``.
- ``JKS`` (Kafka's default type) and ``JCEKS`` are refused, naming the conversion to PKCS12.

Python's ``ssl`` reads a key and chain only from a file: they are written, the key encrypted with a
one-time random password, to an anonymous in-memory file (``memfd``) or, where there is none, a
private temporary file removed at once.

Trust store (the CAs this side accepts): ``ssl.truststore.type`` PEM (``ssl.truststore.location``
or inline ``ssl.truststore.certificates``; no password) or PKCS12 (``ssl.truststore.password``).
Without one, the system's default CAs are trusted (Java uses its ``cacerts``).

Other keys: ``ssl.client.auth`` none/requested/required (server side: no request, optional,
required certificate); ``ssl.enabled.protocols`` TLSv1.2 and/or TLSv1.3 (older protocols are
refused); ``ssl.cipher.suites`` in Kafka's (Java's, IANA) names, mapped to OpenSSL's by
:data:`CIPHER_SUITES`. Python's ``ssl`` cannot restrict TLS 1.3 suites: TLS 1.3 names are accepted
and all of OpenSSL's TLS 1.3 suites stay enabled; a list naming only TLS 1.3 suites turns TLS 1.2
off. ``ssl.endpoint.identification.algorithm`` ``https`` (default) makes a client check the
server's certificate against the host it connects to (SAN DNS names and IP addresses); empty turns
the check off. Java-only keys (``ssl.protocol``, ``ssl.provider``, ``ssl.keymanager.algorithm``,
``ssl.trustmanager.algorithm``, ``ssl.secure.random.implementation``) are accepted and ignored;
``ssl.engine.factory.class`` is refused.

Every problem raises :class:`SslConfigError` naming the key. Building a context reads files and may
take tens of milliseconds: call it at start-up or off the event loop.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.configdef import ConfigDef
from odradek.errors import InvalidConfigError
from odradek.security.tls_ciphers import CIPHER_SUITES, TLS13_CIPHER_SUITES

if TYPE_CHECKING:
    from cryptography import x509

__all__ = [
    "CIPHER_SUITES",
    "SSL_CONFIG",
    "SslConfigError",
    "create_ssl_context",
    "openssl_cipher_list",
    "ssl_context_and_certificate",
]


SSL_CONFIG = (
    ConfigDef()
    .define("ssl.protocol", "string", "TLSv1.3", "Accepted and ignored: the protocols are ssl.enabled.protocols.")
    .define("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions enabled: TLSv1.2, TLSv1.3.")
    .define("ssl.cipher.suites", "list", [], "Cipher suites by IANA name; empty: OpenSSL's defaults.")
    .define("ssl.keystore.type", "string", "JKS", "PEM or PKCS12 (JKS is refused).")
    .define("ssl.keystore.location", "string", None, "The key store file.")
    .define("ssl.keystore.password", "password", None, "The PKCS12 key store's password.")
    .define("ssl.key.password", "password", None, "The private key's password.")
    .define("ssl.keystore.key", "password", None, "Inline PEM private key.")
    .define("ssl.keystore.certificate.chain", "password", None, "Inline PEM certificate chain.")
    .define("ssl.truststore.type", "string", "JKS", "PEM or PKCS12 (JKS is refused).")
    .define("ssl.truststore.location", "string", None, "The trust store file.")
    .define("ssl.truststore.password", "password", None, "The PKCS12 trust store's password.")
    .define("ssl.truststore.certificates", "password", None, "Inline PEM trusted certificates.")
    .define("ssl.client.auth", "string", "none", "none, requested or required.")
    .define("ssl.endpoint.identification.algorithm", "string", "https", "https or empty.")
    .define("ssl.engine.factory.class", "string", None, "Refused: a Java class.")
    .define(
        "ssl.allow.dn.changes",
        "boolean",
        False,
        "Whether a dynamic key store update may change the certificate's distinguished name.",
    )
    .define(
        "ssl.allow.san.changes",
        "boolean",
        False,
        "Whether a dynamic key store update may drop subject alternative names of the certificate.",
    )
)

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class SslConfigError(InvalidConfigError):
    """A bad ``ssl.*`` value; ``key`` names the configuration key."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"Invalid configuration {key}: {problem}")
        self.key = key


def openssl_cipher_list(names: list[str]) -> tuple[str, bool]:
    """(OpenSSL cipher list for TLS 1.2, whether any TLS 1.3 suite was named) for Kafka's names."""
    openssl: list[str] = []
    tls13 = False
    for name in names:
        if name in TLS13_CIPHER_SUITES:
            tls13 = True
        elif name in CIPHER_SUITES:
            openssl.append(CIPHER_SUITES[name])
        else:
            raise SslConfigError("ssl.cipher.suites", f"unknown or unsupported cipher suite {name}")
    return ":".join(openssl), tls13


def create_ssl_context(config: Mapping[str, Any], *, server_side: bool) -> ssl.SSLContext:
    """The context for one listener (``server_side``) or one client connection's side."""
    return ssl_context_and_certificate(config, server_side=server_side)[0]


def ssl_context_and_certificate(
    config: Mapping[str, Any], *, server_side: bool
) -> tuple[ssl.SSLContext, x509.Certificate | None]:
    """:func:`create_ssl_context` and the key store's own (first) certificate, None without one."""
    ssl_props = {k: v for k, v in config.items() if k.startswith("ssl.")}
    values = SSL_CONFIG.parse(ssl_props, allow_unknown=True)
    if values["ssl.engine.factory.class"]:
        raise SslConfigError("ssl.engine.factory.class", "custom SSL engine factories (Java classes) are not supported")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, values)
    # the stores are read with cryptography, loaded here: a process without TLS never loads it
    from odradek.security.tls_stores import load_keystore, load_truststore

    certificate = load_keystore(ctx, values, server_side)
    load_truststore(ctx, values)
    if server_side:
        auth = str(values["ssl.client.auth"]).strip().lower()
        if auth not in _CLIENT_AUTH:
            raise SslConfigError("ssl.client.auth", f"{auth!r} must be one of none, requested, required")
        ctx.verify_mode = _CLIENT_AUTH[auth]
    else:
        algorithm = (values["ssl.endpoint.identification.algorithm"] or "").strip().lower()
        if algorithm not in ("https", ""):
            raise SslConfigError("ssl.endpoint.identification.algorithm", f"{algorithm!r} must be https or empty")
        ctx.check_hostname = algorithm == "https"
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx, certificate


def _set_protocols(ctx: ssl.SSLContext, values: Mapping[str, Any]) -> None:
    protocols = values["ssl.enabled.protocols"] or ["TLSv1.2", "TLSv1.3"]
    unknown = [p for p in protocols if p not in _PROTOCOLS]
    if unknown:
        raise SslConfigError("ssl.enabled.protocols", f"{', '.join(unknown)} not supported (TLSv1.2, TLSv1.3)")
    versions = sorted(_PROTOCOLS[p] for p in protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    suites = values["ssl.cipher.suites"]
    if not suites:
        return
    openssl, tls13 = openssl_cipher_list(suites)
    if openssl:
        try:
            ctx.set_ciphers(openssl)
        except ssl.SSLError as e:
            raise SslConfigError("ssl.cipher.suites", f"no cipher suite usable: {e}") from None
    elif tls13 and ssl.TLSVersion.TLSv1_3 in versions:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    else:
        raise SslConfigError("ssl.cipher.suites", "names only TLS 1.3 suites but TLSv1.3 is not enabled")
