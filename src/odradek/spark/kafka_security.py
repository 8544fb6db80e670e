"""The security options of the ``odradek`` data source, as Spark's Kafka source takes them.

Spark hands every ``kafka.``-prefixed option, prefix stripped, to the Kafka client: a job sets
Java's client keys (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.location``, ``kafka.ssl.keystore.*``, ...). This data source talks to brokers
with confluent-kafka (librdkafka), whose names differ; :func:`librdkafka_params` translates:

=========================================================  ===================================================
Java client key                                            librdkafka
=========================================================  ===================================================
``security.protocol``, ``sasl.mechanism``                  the same (any case)
``sasl.jaas.config`` (``username="..." password="..."``)   ``sasl.username``, ``sasl.password``
``ssl.truststore.location`` (type PEM)                     ``ssl.ca.location``
``ssl.truststore.location`` (type PKCS12, password)        ``ssl.ca.pem`` (the store's certificates, read here)
``ssl.truststore.certificates`` (inline PEM)               ``ssl.ca.pem``
``ssl.keystore.location`` (type PKCS12, password)          ``ssl.keystore.location``, ``ssl.keystore.password``
``ssl.keystore.location`` (type PEM: key and chain)        ``ssl.certificate.location``, ``ssl.key.location``
``ssl.keystore.key``, ``ssl.keystore.certificate.chain``   ``ssl.key.pem``, ``ssl.certificate.pem``
``ssl.key.password``                                       the same
``ssl.endpoint.identification.algorithm`` (empty)          ``none`` (``https``, Kafka's default, kept)
``ssl.cipher.suites`` (IANA names)                         OpenSSL's names (TLS 1.3 suites cannot be chosen)
=========================================================  ===================================================

Java-only keys (``ssl.truststore.type``/``ssl.keystore.type`` once used, ``ssl.protocol``,
``ssl.enabled.protocols``, ``ssl.provider``, ``ssl.keymanager.algorithm``,
``ssl.trustmanager.algorithm``, ``ssl.secure.random.implementation``) are dropped; librdkafka's own
names (``ssl.ca.location``, ``sasl.username``, ...) pass unchanged, and win over a translation.
JKS stores are refused naming the conversion, as odradek's own TLS does. :func:`client_security`
gives the same options as odradek's client's :class:`~odradek.client.security.ClientSecurity`.
Problems raise ``ValueError`` naming the ``kafka.`` option. Pure (reads a PKCS12 trust store);
any thread.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.client.security import ClientSecurity
from odradek.errors import InvalidConfigError
from odradek.security.sasl.jaas import parse_single_login_module
from odradek.security.tls import openssl_cipher_list

__all__ = ["client_security", "librdkafka_params"]

_DROPPED = frozenset(
    {
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.keystore.type",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.provider",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "sasl.jaas.config",
    }
)
_JAVA_STORES = ("JKS", "JCEKS")


def _refuse_java_store(kind: str, store_type: str) -> ValueError:
    return ValueError(
        f"Option 'kafka.ssl.{kind}.type' is {store_type}: Java's key store formats cannot be read; convert the "
        f"store with `keytool -importkeystore -srcstoretype {store_type} -deststoretype PKCS12 ...` and set "
        f"kafka.ssl.{kind}.type=PKCS12 (or use PEM)"
    )


def _sniff(path: str) -> str:
    """A store's type from its first bytes, when ``ssl.<kind>.type`` is not given (Kafka's default
    is JKS; librdkafka's ``ssl.keystore.location`` is PKCS12): PEM text, Java's magic, else PKCS12."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return "PKCS12"  # librdkafka names the missing file
    if head[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    if head[:4] == b"\xce\xce\xce\xce":
        return "JCEKS"
    return "PEM" if b"-----BEGIN" in head or head.lstrip()[:1] in (b"-", b"#") else "PKCS12"


def _store_type(params: Mapping[str, str], kind: str) -> str:
    given = params.get(f"ssl.{kind}.type")
    store_type = (given if given is not None else _sniff(params[f"ssl.{kind}.location"])).strip().upper()
    if store_type in _JAVA_STORES:
        raise _refuse_java_store(kind, store_type)
    if store_type not in ("PEM", "PKCS12"):
        raise ValueError(f"Option 'kafka.ssl.{kind}.type' must be PEM or PKCS12, got '{store_type}'")
    return store_type


@functools.lru_cache(maxsize=16)
def _pkcs12_certificates(path: str, password: str | None) -> str:
    """The certificates of a PKCS12 trust store as PEM text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        loaded = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except OSError as e:
        raise ValueError(f"Option 'kafka.ssl.truststore.location': cannot read {path}: {e.strerror}") from None
    except ValueError:
        raise ValueError(
            f"Option 'kafka.ssl.truststore.password': cannot read the PKCS12 trust store {path} with it"
        ) from None
    certs = [c.certificate for c in loaded.additional_certs]
    if loaded.cert is not None:
        certs.insert(0, loaded.cert.certificate)
    if not certs:
        raise ValueError(f"Option 'kafka.ssl.truststore.location': {path} holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def _truststore(params: Mapping[str, str], out: dict[str, str]) -> None:
    location, inline = params.get("ssl.truststore.location"), params.get("ssl.truststore.certificates")
    if inline is not None:
        out["ssl.ca.pem"] = inline
    elif location is not None:
        if _store_type(params, "truststore") == "PEM":
            out["ssl.ca.location"] = location
        else:
            out["ssl.ca.pem"] = _pkcs12_certificates(location, params.get("ssl.truststore.password"))


def _keystore(params: Mapping[str, str], out: dict[str, str]) -> None:
    location = params.get("ssl.keystore.location")
    key, chain = params.get("ssl.keystore.key"), params.get("ssl.keystore.certificate.chain")
    if key is not None or chain is not None:
        if key is None or chain is None:
            missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
            raise ValueError(f"Option 'kafka.{missing}' must be set with the other inline key store option")
        out["ssl.key.pem"], out["ssl.certificate.pem"] = key, chain
    elif location is not None:
        if _store_type(params, "keystore") == "PEM":
            out["ssl.certificate.location"] = out["ssl.key.location"] = location
        else:
            out["ssl.keystore.location"] = location
            if "ssl.keystore.password" in params:
                out["ssl.keystore.password"] = params["ssl.keystore.password"]
    out.pop("ssl.keystore.key", None)
    out.pop("ssl.keystore.certificate.chain", None)


def librdkafka_params(params: Mapping[str, str]) -> dict[str, str]:
    """``params`` (``kafka.*`` options without the prefix) with Java's security keys translated
    to librdkafka's (module docstring); other keys unchanged. ValueError naming the option."""
    out = {
        k: v for k, v in params.items() if k not in _DROPPED and not k.startswith(("ssl.truststore.", "ssl.keystore."))
    }
    translated: dict[str, str] = {}
    _truststore(params, translated)
    _keystore(params, translated)
    jaas = params.get("sasl.jaas.config")
    if jaas is not None and jaas.strip():
        try:
            entry = parse_single_login_module(jaas, key="kafka.sasl.jaas.config")
        except InvalidConfigError as e:
            raise ValueError(str(e)) from None
        for option in ("username", "password"):
            if option in entry.options:
                translated[f"sasl.{option}"] = entry.options[option]
    algorithm = params.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        out["ssl.endpoint.identification.algorithm"] = algorithm.strip().lower() or "none"
    suites = params.get("ssl.cipher.suites")
    names = [s.strip() for s in (suites or "").split(",") if s.strip()]
    if names and all(n.startswith("TLS_") for n in names):  # Kafka's (IANA) names, not OpenSSL's
        try:
            openssl, _ = openssl_cipher_list(names)
        except InvalidConfigError as e:
            raise ValueError(f"Option 'kafka.ssl.cipher.suites': {e}") from None
        if openssl:
            out["ssl.cipher.suites"] = openssl
        else:  # TLS 1.3 suites only: OpenSSL's defaults
            out.pop("ssl.cipher.suites", None)
    for key, value in translated.items():
        out.setdefault(key, value)  # librdkafka's own name, when also given, wins
    return out


def client_security(params: Mapping[str, str]) -> ClientSecurity:
    """odradek's client security from the same options; ValueError naming the problem. The
    caller owns it: :meth:`ClientSecurity.close` releases an OAUTHBEARER login."""
    try:
        return ClientSecurity.from_properties(params)
    except InvalidConfigError as e:
        raise ValueError(f"Kafka client options: {e}") from None
