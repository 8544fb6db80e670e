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

Each frame goes to the handler (a :class:`~odradek.server.request_channel.RequestHandlerProtocol`,
the broker's ``RequestHandler``), which answers with a
:data:`~odradek.server.request_channel.Response`: a frame written as it is, a Fetch frame whose
file ranges go out with ``sendfile``, or nothing; this module does not import the handler's.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import dataclasses
import fcntl
import functools
import gc
import itertools
import logging
import os
import socket
import struct
import termios
import time
from collections.abc import Sequence
from typing import cast

from odradek.errors import InvalidConfigError
from odradek.protocol.frames import FrameBuffer, FrameError, new_scratch
from odradek.security.principal import ANONYMOUS
from odradek.server.request_channel import (
    CloseConnection,
    FramePart,
    RequestHandlerProtocol,
    SendfileResponse,
    SendResponse,
)
from odradek.server.session import Session

log = logging.getLogger(__name__)

_ids = itertools.count(1)
_FIONREAD_ARG = b"\0\0\0\0"
REFUSAL_LOG_INTERVAL_S = 10.0
TRIM_AFTER_CLOSES = 256
"""Closed connections after which a garbage collection runs and freed heap memory is handed back
to the OS: asyncio's socket transports hold a bound method of their own, so a closed transport
(its socket object, buffers, protocol references) waits for the cyclic collector."""
TRIM_AFTER_FREED_BYTES = 16 * 1024 * 1024
"""Request-buffer bytes freed by closing connections after which the heap is trimmed."""
TRIM_DELAY_S = 0.5


@functools.cache
def _malloc_trim() -> object | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release_free_memory() -> None:
    """Give the heap's free pages back to the OS (glibc's ``malloc_trim``; a no-op elsewhere).

    Buffers of closed connections are freed into malloc's arenas, which keep them mapped; after
    thousands of connections close the broker's RSS would stay at its high-water mark without this.
    Takes a few milliseconds; called at most once per ``TRIM_DELAY_S`` after a burst of closes.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)  # type: ignore[operator]


def parse_connection_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count,ip:count``) as {ip: count}.

    Host names are resolved once, at start-up; an entry that is not ``name:count`` with a
    non-negative count, or a name that does not resolve, raises InvalidConfigError.
    """
    out: dict[str, int] = {}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise InvalidConfigError(f"max.connections.per.ip.overrides: invalid entry {entry!r} (want host:count)")
        try:
            infos = socket.getaddrinfo(host.strip("[] "), None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise InvalidConfigError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None
        for info in infos:
            out[str(info[4][0])] = int(count)
    return out


class ConnectionQuotas:
    """Counts open connections per IP and in total; decides whether a new one may stay."""

    def __init__(self, max_connections: int, max_per_ip: int, overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = overrides
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()
        self._refusals: dict[str, tuple[float, int]] = {}

    def try_add(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; the refusal reason instead if a limit is reached."""
        limit = self.overrides.get(ip, self.max_per_ip)
        if self.per_ip[ip] >= limit:
            return f"max.connections.per.ip={limit} reached for {ip}"
        if self.total >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        self.per_ip[ip] += 1
        self.total += 1
        return None

    def remove(self, ip: str) -> None:
        self.total -= 1
        left = self.per_ip[ip] - 1
        if left > 0:
            self.per_ip[ip] = left
        else:
            del self.per_ip[ip]

    def log_refusal(self, ip: str, reason: str) -> None:
        now = time.monotonic()
        since, suppressed = self._refusals.get(ip, (0.0, 0))
        if now - since >= REFUSAL_LOG_INTERVAL_S:
            more = f" ({suppressed} more refused since the last line)" if suppressed else ""
            log.warning("refusing a connection from %s: %s%s", ip, reason, more)
            self._refusals[ip] = (now, 0)
        else:
            self._refusals[ip] = (since, suppressed + 1)


class KafkaServerConnection(asyncio.BufferedProtocol):
    """One client connection as the broker serves it (the client side is
    :class:`odradek.client.connection.KafkaConnection`); its settings live on the
    :class:`SocketServer`. Satisfies :class:`~odradek.server.request_channel.ConnectionInfo`."""

    __slots__ = (
        "_closed",
        "_fd",
        "_reading_paused",
        "_waiter",
        "_worker",
        "_writable",
        "busy",
        "connection_id",
        "frames",
        "handler",
        "ip",
        "last_active",
        "peer",
        "server",
        "session",
        "transport",
    )

    def __init__(self, server: SocketServer, listener: str = "PLAINTEXT", security_protocol: str = "PLAINTEXT") -> None:
        self.server = server
        self.session = Session(ANONYMOUS, "", listener, security_protocol)
        """Who is on the other end (the listener's; the client's address once connected)."""
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

    # --- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not a subclass of asyncio.Transport, hence no isinstance)
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.ip = str(peer[0]) if peer else "?"
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.session = dataclasses.replace(self.session, client_host=self.ip)
        refusal = self.server.quotas.try_add(self.ip)
        if refusal is not None:
            self.server.quotas.log_refusal(self.ip, refusal)
            self.ip = ""  # not counted
            self._closed = True
            self.frames.release()
            self.transport.abort()
            return
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
        try:
            frames.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        count = frames.frame_count
        if not count:
            return
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
        self._closed = True
        self.resume_writing()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self.server.connections.discard(self)
        if self.ip:
            self.server.quotas.remove(self.ip)
            self.ip = ""
        freed = self.frames.release()
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        self._worker = None
        self.transport = None
        self.server.connection_closed(freed)

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
            self.busy = True
            try:
                response = await self.handler.handle(frame, self)
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
                try:
                    if isinstance(response, SendResponse):
                        self.transport.write(response.frame)
                    elif isinstance(response, SendfileResponse):
                        await self._write_parts(response.parts)
                    else:  # NO_RESPONSE
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
    ) -> None:
        self.handler = handler
        self.connections: set[KafkaServerConnection] = set()
        """The open connections (each adds itself when accepted and removes itself when lost)."""
        self.max_request_bytes = max_request_bytes
        self.queued_max_requests = queued_max_requests
        self.socket_buffers = socket_buffers
        """(SO_SNDBUF, SO_RCVBUF); -1 keeps the OS's default (autotuned) size."""
        self.quotas = ConnectionQuotas(
            max_connections, max_connections_per_ip, parse_connection_overrides(max_connections_per_ip_overrides)
        )
        self.connections_max_idle_ms = connections_max_idle_ms
        self.scratch = new_scratch()
        self.servers: list[asyncio.Server] = []
        self._sweeper: asyncio.Task[None] | None = None
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

    async def start(
        self, host: str, port: int, listener: str = "PLAINTEXT", security_protocol: str = "PLAINTEXT"
    ) -> tuple[str, int]:
        """Listen on ``host:port`` for the listener named ``listener``; its connections' sessions
        carry that name (what inter-broker-only requests are checked against)."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: KafkaServerConnection(self, listener, security_protocol),
            host=host or None,
            port=port,
            reuse_address=True,
            backlog=1024,
        )
        self.servers.append(server)
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep_idle(), name="idle-connection-sweeper")
        sockname = server.sockets[0].getsockname()
        return sockname[0], sockname[1]

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
        for conn in list(self.connections):
            conn.close()
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2)
            except TimeoutError:
                pass
        self.servers.clear()
