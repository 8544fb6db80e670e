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

import contextlib
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.configdef import ConfigDef
from odradek.errors import InvalidConfigError
from odradek.security.tls_ciphers import CIPHER_SUITES, TLS13_CIPHER_SUITES

__all__ = [
    "CIPHER_SUITES",
    "SSL_CONFIG",
    "SslConfigError",
    "create_ssl_context",
    "openssl_cipher_list",
    "ssl_context_and_certificate",
]

PEM, PKCS12 = "PEM", "PKCS12"
JAVA_ONLY_TYPES = ("JKS", "JCEKS")
_JAVA_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")

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
    certificate = _load_keystore(ctx, values, server_side)
    _load_truststore(ctx, values)
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


# --- key store ---------------------------------------------------------------------------------

_PEM_ENTRY = (
    r"-+BEGIN\s*.*{name}[^-]*-+\s+(?:\s*[^\r\n]*:[^\r\n]*[\r\n]+)*([a-zA-Z0-9/+=\s]*)-+END\s*.*{name}[^-]*-+\s+"
)
_CERTIFICATE_ENTRY = re.compile(_PEM_ENTRY.format(name="CERTIFICATE"))
_PRIVATE_KEY_ENTRY = re.compile(_PEM_ENTRY.format(name=r"PRIVATE\s+KEY"))


def _pem_entries(pattern: re.Pattern[str], pem: str) -> list[bytes]:
    """DER bodies of PEM blocks, found as Kafka's ``PemParser`` finds them (blanks anywhere)."""
    import base64

    return [base64.b64decode(re.sub(r"\s", "", m.group(1))) for m in pattern.finditer(pem + "\n")]


def _certificates(pem: str, key: str) -> list[x509.Certificate]:
    try:
        certs = [x509.load_der_x509_certificate(der) for der in _pem_entries(_CERTIFICATE_ENTRY, pem)]
    except ValueError as e:
        raise SslConfigError(key, f"invalid certificate: {e}") from None
    if not certs:
        raise SslConfigError(key, "At least one certificate expected, but none found")
    return certs


def _private_key(pem: str, password: str | None, key: str) -> PrivateKeyTypes:
    try:
        entries = _pem_entries(_PRIVATE_KEY_ENTRY, pem)
    except ValueError as e:
        raise SslConfigError(key, f"invalid private key: {e}") from None
    if len(entries) != 1:
        problem = f"Expected one private key, but found {len(entries)}" if entries else "Private key not provided"
        raise SslConfigError(key, problem)
    secret = password.encode() if password is not None else None
    try:
        return serialization.load_der_private_key(entries[0], secret)
    except TypeError:
        if secret is None:
            raise SslConfigError("ssl.key.password", "the private key is encrypted but no password is set") from None
        return serialization.load_der_private_key(entries[0], None)  # not encrypted: the password is not needed
    except ValueError as e:
        blamed = key if secret is None else "ssl.key.password"
        raise SslConfigError(blamed, f"the private key could not be read: {e}") from None


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SslConfigError(key, f"cannot read {path}: {e.strerror}") from None


def _refuse_java_store(kind: str, store_type: str, path: str | None) -> None:
    raise SslConfigError(
        f"ssl.{kind}.type",
        f"{store_type} stores are Java's format and cannot be read; convert it with "
        f"`keytool -importkeystore -srckeystore {path or '<store>.jks'} -srcstoretype {store_type} "
        f"-destkeystore {(path or '<store>.jks').rsplit('.', 1)[0]}.p12 -deststoretype PKCS12` "
        f"and set ssl.{kind}.type=PKCS12 (or use PEM)",
    )


def _store_type(values: Mapping[str, Any], kind: str) -> str:
    store_type = str(values[f"ssl.{kind}.type"] or "").strip().upper()
    path = values[f"ssl.{kind}.location"]
    if store_type in JAVA_ONLY_TYPES:
        _refuse_java_store(kind, store_type, path)
    if store_type not in (PEM, PKCS12):
        raise SslConfigError(f"ssl.{kind}.type", f"{store_type} is not supported (PEM, PKCS12)")
    return store_type


def _load_keystore(ctx: ssl.SSLContext, values: Mapping[str, Any], server_side: bool) -> x509.Certificate | None:
    location = values["ssl.keystore.location"]
    store_password = values["ssl.keystore.password"]
    key_password = values["ssl.key.password"]
    inline_key, inline_chain = values["ssl.keystore.key"], values["ssl.keystore.certificate.chain"]
    if inline_key is None and inline_chain is None and location is None:
        if store_password is not None:
            raise SslConfigError(
                "ssl.keystore.password", "SSL key store is not specified, but key store password is specified."
            )
        if server_side:
            raise SslConfigError("ssl.keystore.location", "a TLS listener needs a key store (or ssl.keystore.key)")
        return None
    store_type = _store_type(values, "keystore")
    if inline_key is not None or inline_chain is not None:
        if inline_key is None:
            raise SslConfigError(
                "ssl.keystore.key", "SSL certificate chain is specified, but private key is not specified"
            )
        if inline_chain is None:
            raise SslConfigError(
                "ssl.keystore.certificate.chain",
                "SSL private key is specified, but certificate chain is not specified.",
            )
        if store_type != PEM:
            raise SslConfigError(
                "ssl.keystore.type",
                f"SSL private key can be specified only for PEM, but key store type is {store_type}.",
            )
        if location is not None:
            raise SslConfigError(
                "ssl.keystore.location", "Both SSL key store location and separate private key are specified."
            )
    if store_type == PEM:
        if store_password is not None:
            raise SslConfigError(
                "ssl.keystore.password",
                "SSL key store password cannot be specified with PEM format, only key password may be specified.",
            )
        if inline_key is not None:
            key_pem, chain_pem, key_name = str(inline_key), str(inline_chain), "ssl.keystore.key"
        else:
            key_pem = chain_pem = _read(str(location), "ssl.keystore.location").decode("utf-8", errors="replace")
            key_name = "ssl.keystore.location"
        private_key = _private_key(key_pem, key_password, key_name)
        chain = _certificates(chain_pem, "ssl.keystore.certificate.chain" if inline_chain else key_name)
    else:
        if store_password is None:
            raise SslConfigError(
                "ssl.keystore.password", "SSL key store is specified, but key store password is not specified."
            )
        private_key, chain = _load_pkcs12_keystore(str(location), str(store_password), key_password)
    if private_key.public_key() != chain[0].public_key():
        raise SslConfigError(
            "ssl.keystore.location" if location else "ssl.keystore.key",
            "the private key does not match the first certificate of the chain",
        )
    _load_cert_chain(ctx, private_key, chain)
    return chain[0]


def _load_pkcs12_keystore(
    path: str, password: str, key_password: str | None
) -> tuple[PrivateKeyTypes, list[x509.Certificate]]:
    data = _read(path, "ssl.keystore.location")
    if data[:4] in _JAVA_MAGIC:
        _refuse_java_store("keystore", "JKS" if data[:4] == _JAVA_MAGIC[0] else "JCEKS", path)
    loaded = None
    for secret in dict.fromkeys(p for p in (password, key_password) if p is not None):
        try:
            loaded = pkcs12.load_key_and_certificates(data, secret.encode())
            break
        except ValueError:
            continue
    if loaded is None:
        raise SslConfigError("ssl.keystore.password", f"Failed to load SSL keystore {path} of type PKCS12")
    key, cert, extra = loaded
    if key is None or cert is None:
        raise SslConfigError("ssl.keystore.location", f"{path} holds no private key entry with a certificate")
    return key, [cert, *extra]


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path to ``data`` readable only by this process, gone when the block ends."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd("odradek-ssl", 0)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="odradek-ssl-")
    try:
        os.write(fd, data)
        os.close(fd)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _load_cert_chain(ctx: ssl.SSLContext, key: PrivateKeyTypes, chain: list[x509.Certificate]) -> None:
    one_time = secrets.token_urlsafe(24)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()),
    )
    chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    with _private_file(chain_pem + key_pem) as path:
        try:
            ctx.load_cert_chain(path, password=one_time)
        except ssl.SSLError as e:
            raise SslConfigError("ssl.keystore.location", f"the key store could not be loaded: {e}") from None


# --- trust store -------------------------------------------------------------------------------


def _load_truststore(ctx: ssl.SSLContext, values: Mapping[str, Any]) -> None:
    location, password = values["ssl.truststore.location"], values["ssl.truststore.password"]
    inline = values["ssl.truststore.certificates"]
    if inline is None and location is None:
        if password is not None:
            raise SslConfigError(
                "ssl.truststore.password", "SSL trust store is not specified, but trust store password is specified."
            )
        ctx.load_default_certs(
            ssl.Purpose.SERVER_AUTH if ctx.protocol == ssl.PROTOCOL_TLS_CLIENT else ssl.Purpose.CLIENT_AUTH
        )
        return
    store_type = _store_type(values, "truststore")
    if inline is not None:
        if store_type != PEM:
            raise SslConfigError(
                "ssl.truststore.type",
                f"SSL trust store certs can be specified only for PEM, but trust store type is {store_type}.",
            )
        if location is not None:
            raise SslConfigError(
                "ssl.truststore.location",
                "Both SSL trust store location and separate trust certificates are specified.",
            )
    if store_type == PEM:
        if password is not None:
            raise SslConfigError(
                "ssl.truststore.password", "SSL trust store password cannot be specified for PEM format."
            )
        if inline is not None:
            certs = _certificates(str(inline), "ssl.truststore.certificates")
        else:
            pem = _read(str(location), "ssl.truststore.location").decode("utf-8", errors="replace")
            certs = _certificates(pem, "ssl.truststore.location")
    else:
        data = _read(str(location), "ssl.truststore.location")
        if data[:4] in _JAVA_MAGIC:
            _refuse_java_store("truststore", "JKS" if data[:4] == _JAVA_MAGIC[0] else "JCEKS", str(location))
        try:
            loaded = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
        except ValueError:
            raise SslConfigError(
                "ssl.truststore.password", f"Failed to load SSL truststore {location} of type PKCS12"
            ) from None
        certs = [c.certificate for c in loaded.additional_certs]
        if loaded.cert is not None:
            certs.insert(0, loaded.cert.certificate)
        if not certs:
            raise SslConfigError("ssl.truststore.location", f"{location} holds no certificate")
    cadata = "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)
    ctx.load_verify_locations(cadata=cadata)
