"""kazoo's threading handler with TLS from an ``ssl.SSLContext`` built by odradek.

kazoo 2.11 builds its own context from file names on every connection (``use_ssl``, ``keyfile``,
``certfile``, ``ca``): no PKCS12, no protocol or cipher choice, and a handshake failure is only
logged before the next attempt. :class:`TlsThreadingHandler` connects with the context of
:func:`odradek.security.zookeeper_tls.ZkTlsConfig.ssl_context` instead (the key stays in memory)
and remembers why the last handshake failed, so a store that cannot connect says so
(:attr:`TlsThreadingHandler.last_failure`) rather than "cannot reach".

The host name kazoo passes is the one of ``zookeeper.connect``: the context's ``check_hostname``
matches the server's certificate against it (SAN DNS names and IP addresses).

Threading: ``create_connection`` runs on kazoo's connection thread; ``last_failure`` is one
reference written there and read by whoever reports the failure.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler

__all__ = ["TlsThreadingHandler"]

_HINTS = {
    "SSLV3_ALERT_BAD_CERTIFICATE": "the server refused this client's certificate, or none was sent "
    "(zookeeper.ssl.keystore.location)",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the server requires a client certificate (zookeeper.ssl.keystore.location)",
    "TLSV1_ALERT_UNKNOWN_CA": "the server does not trust the CA of this client's certificate",
    "TLSV1_ALERT_PROTOCOL_VERSION": "no TLS version in common with the server "
    "(zookeeper.ssl.protocol, zookeeper.ssl.enabled.protocols)",
    "UNSUPPORTED_PROTOCOL": "no TLS version in common with the server "
    "(zookeeper.ssl.protocol, zookeeper.ssl.enabled.protocols)",
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "no cipher suite or protocol in common with the server",
    "WRONG_VERSION_NUMBER": "the server did not answer in TLS: is this ZooKeeper's secureClientPort?",
}
"""OpenSSL's reason -> what it usually means with ZooKeeper, appended to the failure."""


class TlsThreadingHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's default handler, whose connections are TLS with ``context``."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self.context = context
        self.last_failure: str | None = None
        """Why the last TLS connection failed (None after a success)."""

    def create_connection(
        self, address: tuple[str, int], hostname: str | None = None, timeout: float | None = None, **_kazoo: Any
    ) -> ssl.SSLSocket:
        """A connected, handshaken TLS socket to ``address`` (kazoo's own TLS options are ignored).
        Raises OSError (ssl.SSLError included), which kazoo treats as a dropped connection."""
        host = hostname if isinstance(hostname, str) and hostname else address[0]  # kazoo's command() passes a port
        where = f"{host}:{address[1]}"
        try:
            raw = socket.create_connection(address, timeout)
        except OSError as e:
            self.last_failure = f"cannot connect to {where}: {e.strerror or e}"
            raise
        try:
            tls = self.context.wrap_socket(raw, server_hostname=host, do_handshake_on_connect=False)
            tls.settimeout(timeout)
            tls.do_handshake()
        except ssl.SSLCertVerificationError as e:
            raw.close()
            self.last_failure = f"TLS handshake with {where} failed: certificate verify failed: {e.verify_message}"
            raise
        except ssl.SSLError as e:
            raw.close()
            hint = _HINTS.get(e.reason or "")
            self.last_failure = f"TLS handshake with {where} failed: {e.reason or e}" + (f": {hint}" if hint else "")
            raise
        except OSError as e:
            raw.close()
            self.last_failure = f"TLS handshake with {where} failed: {e.strerror or e or 'connection closed'}"
            raise
        tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.last_failure = None
        return tls
