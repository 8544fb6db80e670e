"""TLS to ZooKeeper from Kafka's ``zookeeper.ssl.*`` keys (KIP-515; Kafka's ``ZkConfigs`` and
``KafkaServer.zkClientConfigFromKafkaConfig``).

Keys (broker properties, or a ``--zk-tls-config-file`` properties file for the tools):

- ``zookeeper.ssl.client.enable`` (false): connect with TLS. Then ``zookeeper.clientCnxnSocket``
  must name ZooKeeper's Netty client socket, ``org.apache.zookeeper.ClientCnxnSocketNetty`` (or its
  simple name), as Kafka requires: its NIO socket has no TLS.
- ``zookeeper.ssl.keystore.location`` / ``.password`` / ``.type``: the client certificate. Types
  ``PEM`` (one file holding the private key and the chain, leaf first; the password, if any,
  decrypts the key: ZooKeeper has no separate key password) and ``PKCS12`` (the password opens
  the store and the key). No type: detected from the file name as ZooKeeper does (``.pem``,
  ``.p12``/``.pfx``, ``.jks``). ``JKS`` is refused with the ``keytool`` conversion to PKCS12.
- ``zookeeper.ssl.truststore.location`` / ``.password`` / ``.type``: the CAs trusted (PEM or
  PKCS12; a PEM trust store's password is ignored, as ZooKeeper ignores it). None: the system's CAs.
- ``zookeeper.ssl.protocol`` (``TLSv1.2``) and ``zookeeper.ssl.enabled.protocols`` (default: the
  protocol alone, as ZooKeeper); ``TLS`` means TLSv1.2 and TLSv1.3. ``zookeeper.ssl.cipher.suites``
  in IANA names (see :mod:`odradek.security.tls`).
- ``zookeeper.ssl.endpoint.identification.algorithm`` (``HTTPS``): ``HTTPS`` (any case) checks the
  server's certificate against the host of ``zookeeper.connect`` (SAN DNS names and IP
  addresses); empty (or anything else, as Kafka) turns the check off.
- ``zookeeper.ssl.crl.enable`` and ``zookeeper.ssl.ocsp.enable`` (false): Java fetches revocation
  lists and OCSP answers itself; Python's ``ssl`` does neither, so true is refused.

As Kafka, a key not set falls back on the ZooKeeper client's Java system property given as
``-D<name>=<value>`` in ``KAFKA_OPTS`` (``zookeeper.client.secure``,
``zookeeper.ssl.keyStore.location``, ``zookeeper.ssl.hostnameVerification`` ...:
:data:`SYSTEM_PROPERTIES`).

Every problem raises :class:`~odradek.errors.InvalidConfigError` naming the ``zookeeper.ssl.*``
key. Building a context reads files: call it at start-up, off the event loop if it runs. Pure
otherwise; any thread.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.configdef import ConfigDef, parse_properties
from odradek.errors import InvalidConfigError
from odradek.security.tls import SslConfigError, create_ssl_context
from odradek.security.zookeeper_auth import java_system_properties

__all__ = [
    "NETTY_SOCKET",
    "SYSTEM_PROPERTIES",
    "ZK_TLS_CONFIGS",
    "ZkTlsConfig",
    "load_zk_tls_config_file",
    "zk_tls_config",
]

CLIENT_ENABLE = "zookeeper.ssl.client.enable"
CNXN_SOCKET = "zookeeper.clientCnxnSocket"
NETTY_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNetty"
NIO_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNIO"

ZK_TLS_CONFIGS = (
    ConfigDef()
    .define(
        CLIENT_ENABLE,
        "boolean",
        False,
        "Connect to ZooKeeper with TLS; then zookeeper.clientCnxnSocket must be "
        "org.apache.zookeeper.ClientCnxnSocketNetty. Unset: -Dzookeeper.client.secure in KAFKA_OPTS.",
    )
    .define(
        CNXN_SOCKET,
        "string",
        None,
        "ZooKeeper's client socket class: org.apache.zookeeper.ClientCnxnSocketNetty for TLS "
        "(ClientCnxnSocketNIO has no TLS).",
    )
    .define("zookeeper.ssl.keystore.location", "string", None, "The client certificate and key for ZooKeeper TLS.")
    .define(
        "zookeeper.ssl.keystore.password",
        "password",
        None,
        "The PKCS12 key store's password, or the password of a PEM key store's encrypted key.",
    )
    .define(
        "zookeeper.ssl.keystore.type",
        "string",
        None,
        "PEM or PKCS12 (JKS is refused); unset: from the file name (.pem, .p12, .pfx).",
    )
    .define("zookeeper.ssl.truststore.location", "string", None, "The CAs trusted for ZooKeeper's certificate.")
    .define("zookeeper.ssl.truststore.password", "password", None, "The PKCS12 trust store's password.")
    .define(
        "zookeeper.ssl.truststore.type",
        "string",
        None,
        "PEM or PKCS12 (JKS is refused); unset: from the file name (.pem, .p12, .pfx).",
    )
    .define("zookeeper.ssl.protocol", "string", "TLSv1.2", "TLS protocol to ZooKeeper: TLSv1.2, TLSv1.3 or TLS.")
    .define(
        "zookeeper.ssl.enabled.protocols",
        "list",
        None,
        "TLS protocols enabled to ZooKeeper (TLSv1.2, TLSv1.3); unset: zookeeper.ssl.protocol.",
    )
    .define("zookeeper.ssl.cipher.suites", "list", None, "Cipher suites to ZooKeeper by IANA name.")
    .define(
        "zookeeper.ssl.endpoint.identification.algorithm",
        "string",
        "HTTPS",
        "HTTPS: check ZooKeeper's certificate against the connect string's host; empty: no check.",
    )
    .define("zookeeper.ssl.crl.enable", "boolean", False, "Refused when true: revocation lists are not fetched.")
    .define("zookeeper.ssl.ocsp.enable", "boolean", False, "Refused when true: OCSP is not queried.")
)

SYSTEM_PROPERTIES: dict[str, str] = {
    CLIENT_ENABLE: "zookeeper.client.secure",
    CNXN_SOCKET: "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.keystore.location": "zookeeper.ssl.keyStore.location",
    "zookeeper.ssl.keystore.password": "zookeeper.ssl.keyStore.password",
    "zookeeper.ssl.keystore.type": "zookeeper.ssl.keyStore.type",
    "zookeeper.ssl.truststore.location": "zookeeper.ssl.trustStore.location",
    "zookeeper.ssl.truststore.password": "zookeeper.ssl.trustStore.password",
    "zookeeper.ssl.truststore.type": "zookeeper.ssl.trustStore.type",
    "zookeeper.ssl.protocol": "zookeeper.ssl.protocol",
    "zookeeper.ssl.enabled.protocols": "zookeeper.ssl.enabledProtocols",
    "zookeeper.ssl.cipher.suites": "zookeeper.ssl.ciphersuites",
    "zookeeper.ssl.endpoint.identification.algorithm": "zookeeper.ssl.hostnameVerification",
    "zookeeper.ssl.crl.enable": "zookeeper.ssl.crl",
    "zookeeper.ssl.ocsp.enable": "zookeeper.ssl.ocsp",
}
"""Kafka's ``ZK_SSL_CONFIG_TO_SYSTEM_PROPERTY_MAP``: broker key -> ZooKeeper's system property."""

_SOCKETS = {
    NETTY_SOCKET: NETTY_SOCKET,
    "ClientCnxnSocketNetty": NETTY_SOCKET,
    NIO_SOCKET: NIO_SOCKET,
    "ClientCnxnSocketNIO": NIO_SOCKET,
}
_EXTENSIONS = {".pem": "PEM", ".crt": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS", ".bcfks": "BCFKS"}
_SSL_KEY = re.compile(r"(?<![\w.])ssl\.(keystore|truststore|key\.password|enabled|cipher|endpoint)")


@dataclass(frozen=True)
class ZkTlsConfig:
    """The ``zookeeper.ssl.*`` values in effect (after the system-property fallback)."""

    client_enable: bool = False
    cnxn_socket: str | None = None
    keystore_location: str | None = None
    keystore_password: str | None = None
    keystore_type: str | None = None
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_type: str | None = None
    protocol: str = "TLSv1.2"
    enabled_protocols: tuple[str, ...] = ()
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str = "HTTPS"
    crl_enable: bool = False
    ocsp_enable: bool = False

    def __repr__(self) -> str:
        return (
            f"ZkTlsConfig(client_enable={self.client_enable}, keystore={self.keystore_location!r}, "
            f"truststore={self.truststore_location!r}, protocol={self.protocol!r})"
        )

    @property
    def client_auth_enabled(self) -> bool:
        """Kafka's ``zkTlsClientAuthEnabled``: TLS on, a client socket named and a key store set."""
        return self.client_enable and bool(self.cnxn_socket) and bool(self.keystore_location)

    @property
    def hostname_verification(self) -> bool:
        return self.endpoint_identification_algorithm.strip().upper() == "HTTPS"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client context, or None when ``zookeeper.ssl.client.enable`` is false.

        Raises InvalidConfigError naming the key: no Netty client socket, CRL or OCSP asked for,
        a JKS or unreadable store, a wrong password, an unknown protocol or cipher suite."""
        if not self.client_enable:
            return None
        socket_class = _SOCKETS.get((self.cnxn_socket or "").strip())
        if socket_class != NETTY_SOCKET:
            got = f"it is {self.cnxn_socket}" if self.cnxn_socket else "it is not set"
            raise InvalidConfigError(
                f"{CLIENT_ENABLE} is true, so {CNXN_SOCKET} must be {NETTY_SOCKET} "
                f"(ZooKeeper's only client socket with TLS); {got}"
            )
        for key, on in (("zookeeper.ssl.crl.enable", self.crl_enable), ("zookeeper.ssl.ocsp.enable", self.ocsp_enable)):
            if on:
                raise InvalidConfigError(
                    f"Invalid configuration {key}: certificate revocation checking (CRL, OCSP) to ZooKeeper is "
                    "not supported; set it to false"
                )
        try:
            return create_ssl_context(self._ssl_props(), server_side=False)
        except SslConfigError as e:
            raise InvalidConfigError(_SSL_KEY.sub(_zookeeper_key, str(e))) from None

    def _ssl_props(self) -> dict[str, Any]:
        props: dict[str, Any] = {
            "ssl.enabled.protocols": list(self._protocols()),
            "ssl.cipher.suites": list(self.cipher_suites),
            "ssl.endpoint.identification.algorithm": "https" if self.hostname_verification else "",
        }
        if self.keystore_location:
            store_type = _store_type(self.keystore_type, self.keystore_location, "keystore")
            props |= {"ssl.keystore.location": self.keystore_location, "ssl.keystore.type": store_type}
            if self.keystore_password is not None:
                # ZooKeeper reads a PEM store's key, and a PKCS12 store, with the one password
                props["ssl.key.password" if store_type == "PEM" else "ssl.keystore.password"] = self.keystore_password
        if self.truststore_location:
            store_type = _store_type(self.truststore_type, self.truststore_location, "truststore")
            props |= {"ssl.truststore.location": self.truststore_location, "ssl.truststore.type": store_type}
            if store_type != "PEM" and self.truststore_password is not None:
                props["ssl.truststore.password"] = self.truststore_password
        return props

    def _protocols(self) -> tuple[str, ...]:
        protocols = self.enabled_protocols or (self.protocol.strip(),)
        expanded: list[str] = []
        for p in protocols:
            expanded += ["TLSv1.2", "TLSv1.3"] if p.upper() == "TLS" else [p]
        return tuple(dict.fromkeys(expanded))


def _zookeeper_key(match: re.Match[str]) -> str:
    """``ssl.<x>`` in a message of :mod:`odradek.security.tls` -> the ``zookeeper.ssl.<x>`` key
    (ZooKeeper's PEM key password is the key store's password)."""
    return "zookeeper.ssl.keystore.password" if match.group(1) == "key.password" else f"zookeeper.ssl.{match.group(1)}"


def _store_type(declared: str | None, location: str, kind: str) -> str:
    """The declared type, else ZooKeeper's ``KeyStoreFileType.fromFilename`` guess."""
    if declared and declared.strip():
        return declared.strip().upper()
    found = _EXTENSIONS.get(os.path.splitext(location)[1].lower())
    if found is None:
        raise InvalidConfigError(
            f"Invalid configuration zookeeper.ssl.{kind}.type: unable to auto-detect the store type from the "
            f"file name {location}; set it to PEM or PKCS12"
        )
    return found


def zk_tls_config(props: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> ZkTlsConfig:
    """The ``zookeeper.ssl.*`` keys of ``props`` (other keys ignored), each unset one taken from its
    ZooKeeper system property in ``KAFKA_OPTS`` (``environ``, default ``os.environ``). Raises
    InvalidConfigError for a value that does not parse."""
    given = {k: v for k, v in props.items() if k in ZK_TLS_CONFIGS and v is not None}
    system = java_system_properties((os.environ if environ is None else environ).get("KAFKA_OPTS", ""))
    fallback: dict[str, Any] = {}
    for key, prop in SYSTEM_PROPERTIES.items():
        if key in given or prop not in system:
            continue
        raw = system[prop]
        if key == "zookeeper.ssl.endpoint.identification.algorithm":
            fallback[key] = "HTTPS" if raw.strip().lower() == "true" else ""
        elif ZK_TLS_CONFIGS.keys[key].type == "boolean":
            fallback[key] = "true" if raw.strip().lower() == "true" else "false"
        else:
            fallback[key] = raw
    v = ZK_TLS_CONFIGS.parse({**fallback, **given})

    def text(key: str) -> str | None:
        value = v[key]
        return None if value is None else str(value)

    return ZkTlsConfig(
        client_enable=bool(v[CLIENT_ENABLE]),
        cnxn_socket=text(CNXN_SOCKET),
        keystore_location=text("zookeeper.ssl.keystore.location"),
        keystore_password=text("zookeeper.ssl.keystore.password"),
        keystore_type=text("zookeeper.ssl.keystore.type"),
        truststore_location=text("zookeeper.ssl.truststore.location"),
        truststore_password=text("zookeeper.ssl.truststore.password"),
        truststore_type=text("zookeeper.ssl.truststore.type"),
        protocol=str(v["zookeeper.ssl.protocol"] or "TLSv1.2"),
        enabled_protocols=tuple(v["zookeeper.ssl.enabled.protocols"] or ()),
        cipher_suites=tuple(v["zookeeper.ssl.cipher.suites"] or ()),
        endpoint_identification_algorithm=str(v["zookeeper.ssl.endpoint.identification.algorithm"] or ""),
        crl_enable=bool(v["zookeeper.ssl.crl.enable"]),
        ocsp_enable=bool(v["zookeeper.ssl.ocsp.enable"]),
    )


def load_zk_tls_config_file(path: str, environ: Mapping[str, str] | None = None) -> ZkTlsConfig:
    """A tool's ``--zk-tls-config-file``: a properties file whose ``zookeeper.ssl.*`` and
    ``zookeeper.clientCnxnSocket`` keys are read; any other key is ignored (as Kafka's tools).
    Raises InvalidConfigError for an unreadable file or a bad value."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InvalidConfigError(f"cannot read the ZooKeeper TLS configuration file {path}: {e.strerror}") from None
    return zk_tls_config(parse_properties(text), environ)
