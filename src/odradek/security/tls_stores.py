"""Kafka's key and trust stores read into an ``ssl.SSLContext`` (PEM and PKCS12, with ``cryptography``).

The store formats and keys are described in :mod:`odradek.security.tls`, whose
:func:`~odradek.security.tls.create_ssl_context` imports this module when it builds a context (so
a process without TLS never loads ``cryptography``). Every problem raises
:class:`~odradek.security.tls.SslConfigError` naming the key. Reads files: start-up or a worker
thread only.
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

from odradek.security.tls import SslConfigError

__all__ = ["JAVA_ONLY_TYPES", "PEM", "PKCS12", "load_keystore", "load_truststore"]

PEM, PKCS12 = "PEM", "PKCS12"
JAVA_ONLY_TYPES = ("JKS", "JCEKS")
_JAVA_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")


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


def load_keystore(ctx: ssl.SSLContext, values: Mapping[str, Any], server_side: bool) -> x509.Certificate | None:
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


def load_truststore(ctx: ssl.SSLContext, values: Mapping[str, Any]) -> None:
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
