"""One client connection as the broker serves it (Kafka's ``Processor`` + ``RequestChannel`` for
one socket); the listener that accepts it is :class:`odradek.server.socket_server.SocketServer`,
which holds the settings every connection reads.

- The kernel reads straight into buffers handed out by a sans-IO
  :class:`~odradek.protocol.frames.FrameBuffer` (``asyncio.BufferedProtocol``: ``recv_into``, no
  intermediate bytes objects). Reads land in one scratch buffer per server (its event loop serves
  one connection's read at a time); a request costs memory only as its bytes arrive, and a frame
  larger than ``socket.request.max.bytes`` is refused before any of it is buffered.
- Whole frames queue up; one worker task (started with the first request) handles them one at a
  time, so responses go out in request order (Kafka's per-connection ordering guarantee). When
  ``queued.max.requests`` frames, or :data:`~odradek.server.socket_server.QUEUED_MAX_BYTES` of
  them, wait, the connection stops reading from its socket until the worker catches up; when the
  socket's write buffer is full the worker waits for it to drain.
- With ``odradek.produce.pipelined.requests`` > 1, acks=all Produce requests are the exception:
  each is handed to the handler as soon as the one before it has appended, and the answers still
  leave in order (:mod:`odradek.server.produce_pipeline`).
- A frame that cannot be parsed, an unknown API key, or an unsupported version (other than
  ApiVersions, which gets KIP-511's fallback answer) is logged with the client's address and the
  connection is closed; other connections are not affected. Closing drops every buffer the
  connection held.
- TLS runs on the event loop (``loop.start_tls``); SASL frames go to a
  :class:`~odradek.server.sasl_authenticator.SaslServerAuthenticator` until it completes, and a
  SaslHandshake after the session's end starts KIP-368 re-authentication (see the listener
  module for what each security protocol means).

With a :class:`~odradek.server.request_channel.RequestObserver` set (the broker's request metrics
and request log), each request is timed on its way: when its frame was complete, when the worker
took it, when the handler returned, when writing started and when the bytes were in the socket
(after a full write buffer drained); the handler fills in the request's
:class:`~odradek.server.request_channel.RequestTimes` (API, version, when a delayed operation
began). Without one, nothing is timed.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
import socket
import ssl
import time
from typing import TYPE_CHECKING, Protocol, cast

from odradek.protocol.frames import FrameBuffer, FrameError, WriteGate, kernel_pending_bytes
from odradek.security.principal import ANONYMOUS, NoMatchingRule
from odradek.server.listener_security import ListenerSecurity
from odradek.server.produce_pipeline import InFlight, produce_acks
from odradek.server.request_channel import (
    CloseConnection,
    RequestTimes,
    Response,
    SendfileResponse,
    SendResponse,
)
from odradek.server.sasl_authenticator import SaslServerAuthenticator, SaslStep
from odradek.server.session import Session
from odradek.server.socket_support import AckAtOnce, write_parts

if TYPE_CHECKING:
    from collections.abc import Callable

    from odradek.server.connection_quotas import ConnectionQuotas
    from odradek.server.request_channel import RequestHandlerProtocol, RequestObserver

log = logging.getLogger("odradek.server.socket_server")
"""The socket layer's one logger (connections, their limits, TLS and SASL failures), named as before
the connection had a module of its own, so logger settings that name it keep working."""

_ids = itertools.count(1)
MAX_TLS_HANDSHAKE_S = 60.0
PLAINTEXT_LISTENER = ListenerSecurity("PLAINTEXT", "PLAINTEXT")


def _resolve(future: asyncio.Future[None], *_: object) -> None:
    """Complete ``future`` unless it is done; a callback for tasks and for ``RequestTimes.on_delayed``."""
    if not future.done():
        future.set_result(None)


class ConnectionHost(Protocol):
    """What a connection reads from the listener that accepted it (the
    :class:`~odradek.server.socket_server.SocketServer`, whose docstrings explain each) and tells it."""

    handler: RequestHandlerProtocol
    connections: set[KafkaServerConnection]
    quotas: ConnectionQuotas
    accepted: dict[str, int]
    closed: dict[str, int]
    close_listeners: list[Callable[[str], None]]
    request_observer: RequestObserver | None
    scratch: bytearray
    socket_buffers: tuple[int, int]
    connections_max_idle_ms: int
    max_request_bytes: int
    queued_max_requests: int
    queued_max_bytes: int
    pipelined_produce_requests: int

    def connection_closed(self, freed_bytes: int) -> None: ...


class KafkaServerConnection(asyncio.BufferedProtocol):
    """One client connection as the broker serves it (the client side is
    :class:`odradek.client.connection.KafkaConnection`); its settings live on the
    :class:`SocketServer`. Satisfies :class:`~odradek.server.request_channel.ConnectionInfo`."""

    __slots__ = (
        "_closed",
        "_fd",
        "_inflight",
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

    def __init__(self, server: ConnectionHost, security: ListenerSecurity = PLAINTEXT_LISTENER) -> None:
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
        self._writable = WriteGate()
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
        self._inflight: collections.deque[InFlight] = collections.deque()
        """Pipelined acks=all Produce requests waiting for the ISR, oldest first."""

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
            try:
                principal = self.security.certificate_principal(tls.get_extra_info("ssl_object"))
            except NoMatchingRule as exc:
                log.warning("closing connection from %s: %s", self.peer, exc)
                self.close()
                return
            self.session = Session(principal, self.ip, self.security.listener_name, self.security.security_protocol)
        self.last_active = time.monotonic()
        await self._work()

    def _pending_bytes(self) -> int:
        """Bytes the kernel holds for this socket (FIONREAD); 0 when unknown."""
        return kernel_pending_bytes(self._fd)

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
        if (
            (count >= self.server.queued_max_requests or frames.queued_bytes >= self.server.queued_max_bytes)
            and not self._reading_paused
            and self.transport
        ):
            self.transport.pause_reading()
            self._reading_paused = True

    def pause_writing(self) -> None:
        self._writable.pause()

    def resume_writing(self) -> None:
        self._writable.resume()

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
        while self._inflight:
            self._inflight.popleft().task.cancel()
        self._worker = None
        self.transport = None
        self.server.connection_closed(freed)
        for listener in self.server.close_listeners:
            listener(self.connection_id)

    # --- worker --------------------------------------------------------------------------------

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        frames = self.frames
        inflight = self._inflight
        depth = self.server.pipelined_produce_requests
        while not self._closed:
            if inflight and inflight[0].task.done():
                if not await self._answer_inflight():
                    return
                continue
            frame = frames.next_frame()
            if frame is None:
                self._waiter = loop.create_future()
                if inflight:  # woken by a new frame or by the oldest pipelined answer
                    await asyncio.wait((self._waiter, inflight[0].task), return_when=asyncio.FIRST_COMPLETED)
                else:
                    await self._waiter
                self._waiter = None
                continue
            if (
                self._reading_paused
                and frames.frame_count < self.server.queued_max_requests // 2
                and frames.queued_bytes < self.server.queued_max_bytes // 2
                and self.transport
            ):
                self.transport.resume_reading()
                self._reading_paused = False
            auth = self.authenticator
            pipelined = depth > 1 and (auth is None or auth.passes_requests_through) and produce_acks(frame) == -1
            while inflight and (not pipelined or len(inflight) >= depth):
                await asyncio.wait((inflight[0].task,))
                if not await self._answer_inflight():
                    return
            observer = self.server.request_observer
            arrived = dequeued = 0.0
            if observer is not None:
                dequeued = time.perf_counter()
                arrived = self.arrivals.popleft() if self.arrivals else dequeued
            if pipelined:
                started = await self._start_inflight(frame, arrived, dequeued)
                del frame
                if not started:
                    return
                continue
            if observer is not None:
                self.times.reset()
            self.busy = True
            try:
                if self.authenticator is not None and self.authenticator.takes(frame):
                    step = self.authenticator.receive(frame)
                    if not await self._sasl_step(step):
                        return
                    if not step.forward:
                        continue
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
            if not await self._send(response, self.times, arrived, dequeued, time.perf_counter()):
                return

    async def _start_inflight(self, frame: bytes | bytearray, arrived: float, dequeued: float) -> bool:
        """Hand an acks=all Produce to the handler as a task of its own and return once it has
        appended (entered its ISR wait) or finished; its answer is sent, in order, by the worker.
        Earlier answers that complete meanwhile are sent at once, not after this append. False
        once the connection is closed."""
        loop = asyncio.get_running_loop()
        times = self.times = RequestTimes()
        entered: asyncio.Future[None] = loop.create_future()
        times.on_delayed = functools.partial(_resolve, entered)
        task = loop.create_task(self.handler.handle(frame, self))
        task.add_done_callback(functools.partial(_resolve, entered))
        inflight = self._inflight
        self.busy = True
        try:
            while not entered.done():
                if inflight and inflight[0].task.done():
                    if not await self._answer_inflight():
                        task.cancel()
                        return False
                    continue
                waits = (entered, inflight[0].task) if inflight else (entered,)
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.busy = False
        times.on_delayed = None
        inflight.append(InFlight(task, times, arrived, dequeued))
        return True

    async def _answer_inflight(self) -> bool:
        """Send the oldest pipelined request's answer (its task is done); False once the
        connection is closed."""
        entry = self._inflight.popleft()
        try:
            response = entry.task.result()
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return False
        except asyncio.CancelledError:
            return False
        except Exception:
            log.exception("unexpected error handling a request from %s; closing the connection", self.peer)
            self.close()
            return False
        return await self._send(response, entry.times, entry.arrived, entry.dequeued, time.perf_counter())

    async def _send(
        self, response: Response, times: RequestTimes, arrived: float, dequeued: float, handled: float
    ) -> bool:
        """Write one response (and, for a throttled request, mute the channel after it); False
        once the connection is closed."""
        if self.transport is None or self._closed:
            return not self._closed
        observer = self.server.request_observer
        send_started = time.perf_counter()
        try:
            if isinstance(response, SendResponse):
                self._queue_out(response.frame)
            elif isinstance(response, SendfileResponse):
                self._flush_out()
                await write_parts(self.transport, response.parts, self.security.ssl_context is not None, self.is_closed)
            else:  # NO_RESPONSE
                if observer is not None:
                    observer.completed(times, self, arrived, dequeued, handled, handled, handled)
                if self.muted_until:
                    await self._mute()
                return not self._closed
        except asyncio.CancelledError:
            raise
        except Exception:  # e.g. a segment file that cannot be read: this response is lost
            log.exception("cannot send a response to %s; closing the connection", self.peer)
            self.close()
            return False
        self.last_active = time.monotonic()
        await self._writable.wait()
        if observer is not None:
            observer.completed(times, self, arrived, dequeued, handled, send_started, time.perf_counter())
        if self.muted_until:
            await self._mute()
        return not self._closed

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

    def is_closed(self) -> bool:
        return self._closed

    @property
    def serving(self) -> bool:
        """Whether a request of this connection is being handled or waits in the pipeline (such a
        connection is never idle, however long the wait)."""
        return self.busy or bool(self._inflight)

    def close(self) -> None:
        """Close the connection; the responses already queued (:meth:`_queue_out`) go first, as
        they would have gone had each been written at once."""
        self._flush_out()
        self._closed = True
        if self.transport is not None:
            self.transport.close()
