"""The socket server: the listeners, and the settings their connections share.

Each accepted socket gets a :class:`~odradek.server.server_connection.KafkaServerConnection`
(framing, the per-connection worker, TLS and SASL, the produce pipeline); this module binds the
listeners, owns what the connections share (the scratch read buffer, the connection quotas, the
request observer) and tidies up after them.

Connection limits (Kafka's ``ConnectionQuotas``): ``max.connections`` across the listeners and
``max.connections.per.ip`` (``max.connections.per.ip.overrides`` per address) are checked when a
connection is accepted; one past a limit is closed at once, and the refusal is logged once per
address every 10 s with a count. ``connections.max.idle.ms``: a connection with no request in
flight and nothing received for that long is closed (swept every tenth of it, at most every 30 s).

Listeners (:class:`~odradek.server.listener_security.ListenerSecurity`, one per ``start``; a new
one from :meth:`SocketServer.update_security` applies to the connections accepted after it):

- PLAINTEXT: the connection's :class:`~odradek.server.session.Session` is ``User:ANONYMOUS`` from
  the start;
- SSL and SASL_SSL: asyncio's own TLS (``loop.start_tls`` on the accepted transport, so the
  handshake and every record are driven by the event loop, never a blocking ``SSLSocket`` call).
  Reading is paused until the handshake is done; a handshake that fails (plaintext or garbage on
  the port, an untrusted or missing client certificate under ``ssl.client.auth=required``) is one
  log line and a closed connection. For SSL the principal is the client certificate's subject
  mapped by ``ssl.principal.mapping.rules`` (``User:ANONYMOUS`` without one). TLS rules out
  ``sendfile``: Fetch's file ranges are read (``pread``) and written through the TLS transport;
- SASL_PLAINTEXT and SASL_SSL: frames go to a
  :class:`~odradek.server.sasl_authenticator.SaslServerAuthenticator` until it completes (only
  ApiVersions reaches the handler before that; any other request closes the connection), and
  are bounded by ``sasl.server.max.receive.size`` meanwhile; a failed authentication is one log
  line, its answer held back ``connection.failed.authentication.delay.ms``, then the connection
  closes. With ``connections.max.reauth.ms`` a request after the session's end closes the
  connection, and a SaslHandshake starts KIP-368 re-authentication.

Each frame goes to the handler (a :class:`~odradek.server.request_channel.RequestHandlerProtocol`,
the broker's ``RequestHandler``), which answers with a
:data:`~odradek.server.request_channel.Response`: a frame written as it is, a Fetch frame whose
file ranges go out with ``sendfile``, or nothing; this module does not import the handler's.

With a :class:`~odradek.server.request_channel.RequestObserver` set (the broker's request metrics
and request log), each request is timed on its way: when its frame was complete, when the worker
took it, when the handler returned, when writing started and when the bytes were in the socket
(after a full write buffer drained); the handler fills in the connection's
:class:`~odradek.server.request_channel.RequestTimes` (API, version, when a delayed operation
began). Without one, nothing is timed. Each listener's accepted and closed connections are counted.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import time
from collections.abc import Callable, Sequence

from odradek.protocol.frames import new_scratch
from odradek.server.connection_quotas import ConnectionQuotas, parse_connection_overrides
from odradek.server.listener_security import ListenerSecurity
from odradek.server.request_channel import RequestHandlerProtocol, RequestObserver
from odradek.server.server_connection import PLAINTEXT_LISTENER, KafkaServerConnection
from odradek.server.socket_support import release_free_memory

__all__ = ["PLAINTEXT_LISTENER", "KafkaServerConnection", "SocketServer"]

log = logging.getLogger(__name__)

TRIM_AFTER_CLOSES = 256
"""Closed connections after which a garbage collection runs and freed heap memory is handed back
to the OS: asyncio's socket transports hold a bound method of their own, so a closed transport
(its socket object, buffers, protocol references) waits for the cyclic collector."""
TRIM_AFTER_FREED_BYTES = 16 * 1024 * 1024
"""Request-buffer bytes freed by closing connections after which the heap is trimmed."""
TRIM_DELAY_S = 0.5
QUEUED_MAX_BYTES = 2 * 1024 * 1024
"""Read-ahead per connection: complete request bytes buffered beyond the one being handled
before reading pauses. Kafka reads one request per connection at a time (the channel is muted
until its response is sent); reading a pipelining producer's 1 MB requests hundreds deep would
hold hundreds of fresh megabytes, each page faulted in on arrival. A few megabytes keep the
socket busy without that."""


class SocketServer:
    """Listens on the configured listeners; ``start`` returns the bound (host, port) per listener."""

    def __init__(
        self,
        handler: RequestHandlerProtocol,
        max_request_bytes: int,
        queued_max_requests: int,
        socket_buffers: tuple[int, int] = (-1, -1),
        *,
        max_connections: int = 2**31 - 1,
        max_connections_per_ip: int = 2**31 - 1,
        max_connections_per_ip_overrides: str = "",
        connections_max_idle_ms: int = 600000,
        quota_samples: int = 11,
        quota_window_s: float = 1.0,
    ) -> None:
        self.handler = handler
        self.connections: set[KafkaServerConnection] = set()
        """The open connections (each adds itself when accepted and removes itself when lost)."""
        self.max_request_bytes = max_request_bytes
        self.queued_max_requests = queued_max_requests
        self.socket_buffers = socket_buffers
        """(SO_SNDBUF, SO_RCVBUF); -1 keeps the OS's default (autotuned) size."""
        self.quotas = ConnectionQuotas(
            max_connections,
            max_connections_per_ip,
            parse_connection_overrides(max_connections_per_ip_overrides),
            quota_samples,
            quota_window_s,
        )
        self.connections_max_idle_ms = connections_max_idle_ms
        self.scratch = new_scratch()
        self.servers: list[asyncio.Server] = []
        self.securities: dict[str, ListenerSecurity] = {}
        """Listener name -> the security new connections get (:meth:`update_security` replaces it)."""
        self.queued_max_bytes = QUEUED_MAX_BYTES
        """Bytes of complete requests a connection reads ahead of the one being handled before it
        stops reading (with ``queued_max_requests``, whichever comes first)."""
        self.pipelined_produce_requests = 5
        """acks=all Produce requests a connection may hold waiting for the ISR while it reads the
        next (``odradek.produce.pipelined.requests``; 1: one request at a time, as Kafka)."""
        self.request_observer: RequestObserver | None = None
        """Told about every completed request (request metrics, ``kafka.request.logger``); None
        skips the timing altogether."""
        self.accepted: dict[str, int] = {}
        """Listener name -> connections accepted (not counting those refused by a limit)."""
        self.closed: dict[str, int] = {}
        """Listener name -> accepted connections since closed."""
        self._sweeper: asyncio.Task[None] | None = None
        self.close_listeners: list[Callable[[str], None]] = []
        """Told the id of each connection as it closes (e.g. share sessions end with theirs)."""
        self._closed_since_trim = 0
        self._freed_since_trim = 0
        self._trim_scheduled = False

    def connection_closed(self, freed_bytes: int) -> None:
        """Called by each connection as it closes, with the request-buffer bytes it freed; after a
        burst of closes (or of freed bytes) collects garbage and trims the heap, once, a little later."""
        self._closed_since_trim += 1
        self._freed_since_trim += freed_bytes
        if self._trim_scheduled:
            return
        if self._closed_since_trim >= TRIM_AFTER_CLOSES or self._freed_since_trim >= TRIM_AFTER_FREED_BYTES:
            self._trim_scheduled = True
            asyncio.get_running_loop().call_later(TRIM_DELAY_S, self._trim)

    def _trim(self) -> None:
        self._trim_scheduled = False
        if self._closed_since_trim >= TRIM_AFTER_CLOSES:
            gc.collect()
        self._closed_since_trim = self._freed_since_trim = 0
        release_free_memory()

    async def start(self, sockets: Sequence[socket.socket], security: ListenerSecurity = PLAINTEXT_LISTENER) -> None:
        """Serve one listener on its bound, not yet listening ``sockets`` (one per address of the
        listener's host, all on one port); this server owns and closes them."""
        loop = asyncio.get_running_loop()
        name = security.listener_name
        self.securities[name] = security
        for sock in sockets:
            server = await loop.create_server(
                lambda: KafkaServerConnection(self, self.securities[name]), sock=sock, backlog=1024
            )
            self.servers.append(server)
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep_idle(), name="idle-connection-sweeper")

    def update_security(self, security: ListenerSecurity) -> None:
        """Serve the listener's new connections with ``security`` (a dynamic ``listener.name.<l>.ssl.*``
        or ``sasl.*`` change, Kafka's ``SslFactory.reconfigure``); connections already accepted keep
        the security they started with. Loop-only."""
        self.securities[security.listener_name] = security

    async def _sweep_idle(self) -> None:
        idle_s = self.connections_max_idle_ms / 1000
        interval = min(max(idle_s / 10, 0.01), 30.0)
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - idle_s
            for conn in [c for c in self.connections if c.last_active < deadline and not c.serving]:
                if conn.frames.frame_count == 0:
                    log.info(
                        "closing connection from %s: idle for more than connections.max.idle.ms=%d",
                        conn.peer,
                        self.connections_max_idle_ms,
                    )
                    conn.close()

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for server in self.servers:
            server.close()
        for security in self.securities.values():
            if security.token_validator is not None:
                security.token_validator.close()  # OAUTHBEARER's scheduled JWKS fetches
        for conn in list(self.connections):
            conn.close()
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2)
            except TimeoutError:
                pass
        self.servers.clear()
