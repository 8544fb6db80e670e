"""The socket server: one asyncio protocol object per client connection.

Per connection (Kafka's ``Processor`` + ``RequestChannel`` in one place):

- the kernel reads straight into buffers owned by a sans-IO
  :class:`~odradek.protocol.frames.FrameBuffer` (``asyncio.BufferedProtocol``: ``recv_into``, no
  intermediate bytes objects), which refuses a frame larger than ``socket.request.max.bytes``
  before buffering it;
- whole frames queue up; one worker task handles them one at a time, so responses go out in
  request order (Kafka's per-connection ordering guarantee). When more than
  ``queued.max.requests`` frames wait, the broker stops reading from that socket until the worker
  catches up; when the socket's write buffer is full the worker waits for it to drain;
- a frame that cannot be parsed, an unknown API key, or an unsupported version (other than
  ApiVersions, which gets KIP-511's fallback answer) is logged with the client's address and the
  connection is closed; other connections are not affected.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import socket
from typing import TYPE_CHECKING, Any, cast

from odradek.protocol.frames import FrameBuffer, FrameError

if TYPE_CHECKING:
    from odradek.server.request_handler import RequestHandler

log = logging.getLogger(__name__)

_ids = itertools.count(1)


class CloseConnection(Exception):
    """Raised by the request handler when the connection must be closed (reason in the message)."""


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection. ``socket_buffers`` is (SO_SNDBUF, SO_RCVBUF); -1 keeps the OS's
    default (autotuned) size."""

    def __init__(
        self,
        handler: RequestHandler,
        max_request_bytes: int,
        queued_max_requests: int,
        socket_buffers: tuple[int, int] = (-1, -1),
    ) -> None:
        self.handler = handler
        self.socket_buffers = socket_buffers
        self.frames = FrameBuffer(max_request_bytes)
        self.queued_max_requests = queued_max_requests
        self.connection_id = f"conn-{next(_ids)}"
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._pending: collections.deque[bytes | bytearray] = collections.deque()
        self._wakeup: asyncio.Event = asyncio.Event()
        self._writable: asyncio.Event = asyncio.Event()
        self._writable.set()
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._closed = False

    # --- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not a subclass of asyncio.Transport, hence no isinstance)
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            for name, size in zip((socket.SO_SNDBUF, socket.SO_RCVBUF), self.socket_buffers, strict=True):
                if size > 0:
                    options.append((socket.SOL_SOCKET, name, size))
            for level, name, value in options:
                try:
                    sock.setsockopt(level, name, value)
                except OSError as exc:
                    log.warning("cannot set socket option %s=%s for %s: %s", name, value, self.peer, exc)
        self.transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        self._worker = asyncio.get_running_loop().create_task(self._work(), name=self.connection_id)
        self.handler.connections.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        try:
            return self.frames.get_buffer()
        except FrameError:  # already reported; the transport is closing
            return memoryview(bytearray(65536))

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.frames.buffer_updated(nbytes)
            while True:
                frame = self.frames.next_frame()
                if frame is None:
                    break
                self._pending.append(frame)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        if self._pending:
            self._wakeup.set()
            if len(self._pending) >= self.queued_max_requests and not self._reading_paused and self.transport:
                self.transport.pause_reading()
                self._reading_paused = True

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._writable.set()
        self._wakeup.set()
        self.handler.connections.discard(self)
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()

    # --- worker --------------------------------------------------------------------------------

    async def _work(self) -> None:
        while not self._closed:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            frame = self._pending.popleft()
            if self._reading_paused and len(self._pending) < self.queued_max_requests // 2 and self.transport:
                self.transport.resume_reading()
                self._reading_paused = False
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
            if response is not None and self.transport is not None and not self._closed:
                try:
                    if isinstance(response, list):
                        await self._write_parts(response)
                    else:
                        self.transport.write(response)
                except asyncio.CancelledError:
                    raise
                except Exception:  # e.g. a segment file that cannot be read: this response is lost
                    log.exception("cannot send a response to %s; closing the connection", self.peer)
                    self.close()
                    return
                if not self._writable.is_set():
                    await self._writable.wait()

    async def _write_parts(self, parts: list[Any]) -> None:
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
        handler: RequestHandler,
        max_request_bytes: int,
        queued_max_requests: int,
        socket_buffers: tuple[int, int] = (-1, -1),
    ) -> None:
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.queued_max_requests = queued_max_requests
        self.socket_buffers = socket_buffers
        self.servers: list[asyncio.Server] = []

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: KafkaConnection(
                self.handler, self.max_request_bytes, self.queued_max_requests, self.socket_buffers
            ),
            host=host or None,
            port=port,
            reuse_address=True,
            backlog=1024,
        )
        self.servers.append(server)
        sockname = server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for conn in list(self.handler.connections):
            conn.close()
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2)
            except TimeoutError:
                pass
        self.servers.clear()
