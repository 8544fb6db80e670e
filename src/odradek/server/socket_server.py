"""The socket server: one asyncio protocol object per client connection.

Per connection (Kafka's ``Processor`` + ``RequestChannel`` in one place):

- the kernel reads straight into buffers handed out by a sans-IO
  :class:`~odradek.protocol.frames.FrameBuffer` (``asyncio.BufferedProtocol``: ``recv_into``, no
  intermediate bytes objects). Reads land in one scratch buffer per server (its event loop serves
  one connection's read at a time); a request costs memory only as its bytes arrive, and a frame
  larger than ``socket.request.max.bytes`` is refused before any of it is buffered;
- whole frames queue up; one worker task (started with the first request) handles them one at a
  time, so responses go out in request order (Kafka's per-connection ordering guarantee). When
  ``queued.max.requests`` frames wait, the broker stops reading from that socket until the worker
  catches up; when the socket's write buffer is full the worker waits for it to drain;
- a frame that cannot be parsed, an unknown API key, or an unsupported version (other than
  ApiVersions, which gets KIP-511's fallback answer) is logged with the client's address and the
  connection is closed; other connections are not affected. Closing drops every buffer the
  connection held.

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
import collections
import fcntl
import gc
import itertools
import logging
import os
import socket
import ssl
import struct
import termios
import time
from collections.abc import Callable, Sequence
from typing import cast

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import peek_api
from odradek.protocol.frames import FrameBuffer, FrameError, new_scratch
from odradek.security.principal import ANONYMOUS, NoMatchingRule
from odradek.server.connection_quotas import ConnectionQuotas, parse_connection_overrides
from odradek.server.listener_security import ListenerSecurity
from odradek.server.request_channel import (
    CloseConnection,
    FramePart,
    RequestHandlerProtocol,
    RequestObserver,
    RequestTimes,
    SendfileResponse,
    SendResponse,
)
from odradek.server.sasl_authenticator import SaslServerAuthenticator, SaslStep
from odradek.server.session import Session
from odradek.server.socket_support import AckAtOnce, release_free_memory

log = logging.getLogger(__name__)

_ids = itertools.count(1)
_FIONREAD_ARG = b"\0\0\0\0"
MAX_TLS_HANDSHAKE_S = 60.0
PLAINTEXT_LISTENER = ListenerSecurity("PLAINTEXT", "PLAINTEXT")
TRIM_AFTER_CLOSES = 256
"""Closed connections after which a garbage collection runs and freed heap memory is handed back
to the OS: asyncio's socket transports hold a bound method of their own, so a closed transport
(its socket object, buffers, protocol references) waits for the cyclic collector."""
TRIM_AFTER_FREED_BYTES = 16 * 1024 * 1024
"""Request-buffer bytes freed by closing connections after which the heap is trimmed."""
TRIM_DELAY_S = 0.5


class KafkaServerConnection(asyncio.BufferedProtocol):
    """One client connection as the broker serves it (the client side is
    :class:`odradek.client.connection.KafkaConnection`); its settings live on the
    :class:`SocketServer`. Satisfies :class:`~odradek.server.request_channel.ConnectionInfo`."""

    __slots__ = (
        "_closed",
        "_fd",
        "_lost",
        "_out",
        "_reading_paused",
        "_waiter",
        "_worker",
        "_writable",
        "arrivals",
        "authenticator",
        "busy",
        "connection_id",
        "frames",
        "handler",
        "ip",
        "last_active",
        "muted_until",
        "peer",
        "security",
        "server",
        "session",
        "times",
        "transport",
    )

    def __init__(self, server: SocketServer, security: ListenerSecurity = PLAINTEXT_LISTENER) -> None:
        self.server = server
        self.security = security
        self.session: Session | None = None
        """Who is on the other end; None until the TLS handshake or SASL exchange is done."""
        self.authenticator: SaslServerAuthenticator | None = None
        self.handler = server.handler
        self.frames = FrameBuffer(server.max_request_bytes, server.scratch, self._pending_bytes)
        self.connection_id = f"conn-{next(_ids)}"
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip = ""
        self.last_active = time.monotonic()
        self.busy = False
        self._fd = -1
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._closed = False
        self._out: list[bytes | bytearray | memoryview] = []
        """Responses queued for the next flush (:meth:`_queue_out`)."""
        self._lost = False
        self.times = RequestTimes()
        """The request in flight, as the handler describes it (see :class:`RequestObserver`)."""
        self.muted_until = 0.0
        """Set by a throttled request (KIP-219): ``time.monotonic()`` until which the connection reads
        nothing once its response is sent (0: not throttled)."""
        self.arrivals: collections.deque[float] = collections.deque()
        """When each queued frame was complete (kept only while a request observer is set)."""

    # --- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not a subclass of asyncio.Transport, hence no isinstance)
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.ip = str(peer[0]) if peer else "?"
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        quotas = self.server.quotas
        throttle_ms = quotas.ip_throttle_ms(self.ip)
        if throttle_ms > 0:  # KIP-612: not counted, served nothing, closed after the throttle time
            quotas.log_refusal(self.ip, f"connection_creation_rate exceeded, closing it after {throttle_ms} ms")
            self.ip = ""
            self._closed = True
            self.frames.release()
            self.transport.pause_reading()
            asyncio.get_running_loop().call_later(throttle_ms / 1000, self.transport.abort)
            return
        refusal = quotas.try_add(self.ip)
        if refusal is not None:
            quotas.log_refusal(self.ip, refusal)
            self.ip = ""  # not counted
            self._closed = True
            self.frames.release()
            self.transport.abort()
            return
        delay_s = quotas.listener_delay_s(self.security.listener_name)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._fd = sock.fileno()
            options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            for name, size in zip((socket.SO_SNDBUF, socket.SO_RCVBUF), self.server.socket_buffers, strict=True):
                if size > 0:
                    options.append((socket.SOL_SOCKET, name, size))
            for level, name, value in options:
                try:
                    sock.setsockopt(level, name, value)
                except OSError as exc:
                    log.warning("cannot set socket option %s=%s for %s: %s", name, value, self.peer, exc)
        self.transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        self.server.connections.add(self)
        security = self.security
        accepted = self.server.accepted
        accepted[security.listener_name] = accepted.get(security.listener_name, 0) + 1
        if security.uses_sasl:
            self.authenticator = SaslServerAuthenticator(security, self.ip)
            self.frames.allow_empty = True  # SaslHandshake v0's raw tokens may be empty
            if security.max_receive_size < self.frames.max_frame_bytes:
                self.frames.max_frame_bytes = security.max_receive_size
                self.frames.limit_name = "sasl.server.max.receive.size"
        if security.ssl_context is not None:
            self.transport.pause_reading()  # nothing is read before the TLS handshake takes over
            loop = asyncio.get_running_loop()
            self._worker = loop.create_task(self._start_tls(security.ssl_context, delay_s), name=self.connection_id)
            return
        if self.authenticator is None:
            self.session = Session(ANONYMOUS, self.ip, security.listener_name, security.security_protocol)
        if delay_s > 0:  # max.connection.creation.rate: served once the listener's rate allows
            self.transport.pause_reading()
            asyncio.get_running_loop().call_later(delay_s, self._accept_delay_over)

    def _accept_delay_over(self) -> None:
        if self.transport is not None and not self._closed and not self._reading_paused:
            self.transport.resume_reading()

    async def _start_tls(self, context: ssl.SSLContext, delay_s: float = 0.0) -> None:
        """The TLS handshake on the event loop (``loop.start_tls``), after ``delay_s`` (the
        listener's connection rate); then the principal, and the worker. A failed handshake is
        logged once and the connection closed."""
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        transport = self.transport
        if transport is None or self._closed:
            self._worker = None
            return
        timeout = min(MAX_TLS_HANDSHAKE_S, self.server.connections_max_idle_ms / 1000)
        try:
            tls = await asyncio.get_running_loop().start_tls(
                transport, self, context, server_side=True, ssl_handshake_timeout=timeout
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # SSLError, a timeout, a reset: this connection only
            log.warning("closing connection from %s: TLS handshake failed: %s", self.peer, exc or type(exc).__name__)
            self._worker = None
            transport.abort()
            self.connection_lost(None)
            return
        if tls is None or self._closed:
            self._worker = None
            return
        self.transport = tls
        tls.set_write_buffer_limits(high=4 * 1024 * 1024)
        raw = transport.get_extra_info("socket")
        if raw is not None and hasattr(socket, "TCP_QUICKACK"):
            transport.set_protocol(AckAtOnce(transport.get_protocol(), raw))
        if self.authenticator is None:
            ssl_object = tls.get_extra_info("ssl_object")
            certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            mapper = self.security.principal_mapper
            try:
                principal = mapper.principal(certificate) if mapper is not None else ANONYMOUS
            except NoMatchingRule as exc:
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.close()
                return
            self.session = Session(principal, self.ip, self.security.listener_name, self.security.security_protocol)
        self.last_active = time.monotonic()
        await self._work()

    def _pending_bytes(self) -> int:
        """Bytes the kernel holds for this socket (FIONREAD); 0 when unknown."""
        if self._fd < 0:
            return 0
        try:
            return int(struct.unpack("i", fcntl.ioctl(self._fd, termios.FIONREAD, _FIONREAD_ARG))[0])
        except OSError:
            return 0

    def get_buffer(self, sizehint: int) -> memoryview:
        try:
            return self.frames.get_buffer()
        except FrameError:  # already reported; the transport is closing: read into the scratch
            return memoryview(self.server.scratch)

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        self.last_active = time.monotonic()
        frames = self.frames
        before = frames.frame_count
        try:
            frames.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        count = frames.frame_count
        if not count:
            return
        if count > before and self.server.request_observer is not None:
            now = time.perf_counter()
            if count - before == 1:
                self.arrivals.append(now)
            else:
                self.arrivals.extend([now] * (count - before))
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=self.connection_id)
        elif self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        if count >= self.server.queued_max_requests and not self._reading_paused and self.transport:
            self.transport.pause_reading()
            self._reading_paused = True

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lost:  # a failed TLS handshake reports it itself
            return
        self._lost = True
        self._closed = True
        self.resume_writing()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self.server.connections.discard(self)
        if self.ip:
            self.server.quotas.remove(self.ip)
            self.ip = ""
            closed = self.server.closed
            closed[self.security.listener_name] = closed.get(self.security.listener_name, 0) + 1
        freed = self.frames.release()
        if self._worker is not None and not self._worker.done() and self._worker is not asyncio.current_task():
            self._worker.cancel()
        self._worker = None
        self.transport = None
        self.server.connection_closed(freed)
        for listener in self.server.close_listeners:
            listener(self.connection_id)

    # --- worker --------------------------------------------------------------------------------

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        frames = self.frames
        while not self._closed:
            frame = frames.next_frame()
            if frame is None:
                self._waiter = loop.create_future()
                await self._waiter
                self._waiter = None
                continue
            if self._reading_paused and frames.frame_count < self.server.queued_max_requests // 2 and self.transport:
                self.transport.resume_reading()
                self._reading_paused = False
            observer = self.server.request_observer
            if observer is not None:
                dequeued = time.perf_counter()
                arrived = self.arrivals.popleft() if self.arrivals else dequeued
                self.times.reset()
            self.busy = True
            try:
                if self.authenticator is not None and self._sasl_frame(frame):
                    step = self.authenticator.receive(frame)
                    if not await self._sasl_step(step):
                        return
                    if not step.forward:
                        continue
                response = await self.handler.handle(frame, self)
                handled = time.perf_counter()
            except CloseConnection as exc:
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.close()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("unexpected error handling a request from %s; closing the connection", self.peer)
                self.close()
                return
            finally:
                del frame
                self.busy = False
            if self.transport is not None and not self._closed:
                send_started = time.perf_counter()
                try:
                    if isinstance(response, SendResponse):
                        self._queue_out(response.frame)
                    elif isinstance(response, SendfileResponse):
                        self._flush_out()
                        await self._write_parts(response.parts)
                    else:  # NO_RESPONSE
                        if observer is not None:
                            observer.completed(self.times, self, arrived, dequeued, handled, handled, handled)
                        if self.muted_until:
                            await self._mute()
                        continue
                except asyncio.CancelledError:
                    raise
                except Exception:  # e.g. a segment file that cannot be read: this response is lost
                    log.exception("cannot send a response to %s; closing the connection", self.peer)
                    self.close()
                    return
                self.last_active = time.monotonic()
                if self._writable is not None and not self._writable.done():
                    await self._writable
                if observer is not None:
                    observer.completed(self.times, self, arrived, dequeued, handled, send_started, time.perf_counter())
                if self.muted_until:
                    await self._mute()

    def _queue_out(self, frame: bytes | bytearray | memoryview) -> None:
        """Send ``frame`` with the other responses finished in this turn of the event loop: a
        pipelining client's responses leave in one ``writelines`` (one ``send`` system call for
        several responses, which at 100-byte records cost a fifth of the broker's time as one call
        each). The flush runs at the loop's next turn, so a response waits for no handler that
        suspends."""
        self._out.append(frame)
        if len(self._out) == 1:
            asyncio.get_running_loop().call_soon(self._flush_out)

    def _flush_out(self) -> None:
        """Write the queued responses now (before any other write, so responses keep their order)."""
        if not self._out:
            return
        out, self._out = self._out, []
        if self.transport is not None and not self._closed:
            self.transport.writelines(out)

    def mute_for(self, ms: int) -> None:
        """Throttle the channel for ``ms`` from now (Kafka's ``ThrottledChannel``: its end time is
        fixed when the request is throttled, and the channel stays muted until both the response
        is sent and that time has passed)."""
        self.muted_until = max(self.muted_until, time.monotonic() + ms / 1000)

    async def _mute(self) -> None:
        """Read and serve nothing until ``muted_until`` (the client backs off meanwhile), then go on."""
        self._flush_out()
        delay, self.muted_until = self.muted_until - time.monotonic(), 0.0
        if self.transport is None or self._closed or delay <= 0:
            return
        if not self._reading_paused:
            self.transport.pause_reading()
        await asyncio.sleep(delay)
        if self.transport is not None and not self._closed and not self._reading_paused:
            self.transport.resume_reading()

    def _sasl_frame(self, frame: bytes | bytearray) -> bool:
        """Whether an authenticated connection's frame goes to the authenticator (a KIP-368
        SaslHandshake); raises CloseConnection for a request after the session's end."""
        auth = self.authenticator
        assert auth is not None
        if auth.authenticating:
            return True
        if auth.session_expires_at is None:
            return False
        try:
            api_key = peek_api(frame)[0]
        except Exception:
            api_key = -1
        if api_key == ApiKey.SASL_HANDSHAKE and auth.can_reauthenticate():
            auth.reauthenticate()
            return True
        if auth.session_expired():
            raise CloseConnection("SASL session expired (connections.max.reauth.ms) and not re-authenticated")
        return False

    async def _sasl_step(self, step: SaslStep) -> bool:
        """Carry out one authenticator step; False when the connection is closed."""
        auth = self.authenticator
        assert auth is not None and self.transport is not None
        if step.close is not None:
            log.warning("closing connection from %s: %s", self.peer, step.close)
            self.close()
            return False
        if step.failure is not None:
            log.info(
                "Failed authentication with %s on listener %s (%s)",
                self.peer,
                self.security.listener_name,
                step.failure,
            )
            if step.delay_s > 0:
                await asyncio.sleep(step.delay_s)
            if self.transport is not None and step.response is not None:
                self._flush_out()
                self.transport.write(step.response)
            self.close()
            return False
        if step.response is not None:
            self._flush_out()
            self.transport.write(step.response)
        if auth.session is not None and not auth.authenticating:
            self.session = auth.session
            self.frames.allow_empty = False
            self.frames.max_frame_bytes = self.server.max_request_bytes
            self.frames.limit_name = "socket.request.max.bytes"
        self.last_active = time.monotonic()
        return True

    async def _write_parts(self, parts: Sequence[FramePart]) -> None:
        """Write byte parts with ``writelines``; send file slices with ``loop.sendfile`` (the
        kernel copies page-cache pages to the socket; falls back to read+write where sendfile is
        unavailable). The slice's descriptor is duplicated first, so a segment deleted by retention
        meanwhile stays readable until the send completes."""
        transport = self.transport
        assert transport is not None
        pending: list[bytes | bytearray | memoryview] = []
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                pending.append(part)
                continue
            if self.security.ssl_context is not None:  # TLS: no sendfile, the bytes are copied
                fd = part.dup_fd()
                try:
                    pending.append(os.pread(fd, part.size, part.position))
                finally:
                    os.close(fd)
                continue
            fd = part.dup_fd()
            if pending:
                transport.writelines(pending)
                pending = []
            with os.fdopen(fd, "rb", buffering=0) as f:
                try:
                    await asyncio.get_running_loop().sendfile(transport, f, part.position, part.size)
                except NotImplementedError:  # an event loop without sendfile (uvloop): read, then write
                    transport.write(os.pread(f.fileno(), part.size, part.position))
            if self._closed:
                return
        if pending:
            transport.writelines(pending)

    def close(self) -> None:
        """Close the connection; the responses already queued (:meth:`_queue_out`) go first, as
        they would have gone had each been written at once."""
        self._flush_out()
        self._closed = True
        if self.transport is not None:
            self.transport.close()


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
            for conn in [c for c in self.connections if c.last_active < deadline and not c.busy]:
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
