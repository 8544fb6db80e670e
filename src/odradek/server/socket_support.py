"""Pieces of the socket server that do not depend on a connection: handing freed heap memory back
to the OS, :class:`AckAtOnce` for TLS connections, and :func:`write_parts` (a response's bytes and
file ranges). Runs on the broker's event loop."""

from __future__ import annotations

import asyncio
import ctypes
import functools
import os
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from odradek.server.request_channel import FramePart


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


class AckAtOnce(asyncio.BufferedProtocol):
    """Between a TLS connection's socket transport and asyncio's TLS protocol: acknowledges every
    read at once (``TCP_QUICKACK``, which the kernel clears again), then hands the bytes on.

    A client that keeps Nagle's algorithm on (librdkafka's default) sends a request's TLS records
    in several segments and holds each small one back until the previous one is acknowledged;
    with the kernel's delayed acknowledgement every such request would wait up to 40 ms.
    PLAINTEXT requests arrive in one write and need none of this."""

    __slots__ = ("inner", "sock")

    def __init__(self, inner: asyncio.BaseProtocol, sock: socket.socket) -> None:
        self.inner = cast(asyncio.BufferedProtocol, inner)
        self.sock = sock

    def get_buffer(self, sizehint: int) -> memoryview:
        return cast(memoryview, self.inner.get_buffer(sizehint))

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        except OSError:
            pass
        self.inner.buffer_updated(nbytes)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


async def write_parts(
    transport: asyncio.Transport, parts: Sequence[FramePart], tls: bool, is_closed: Callable[[], bool]
) -> None:
    """Write byte parts with ``writelines``; send file slices with ``sendfile`` (the kernel copies
    page-cache pages to the socket). ``tls``: the transport encrypts, so file ranges are read
    (``pread``) and written through it instead; ``is_closed`` stops the sending between slices
    once the connection has closed. Event loop only.

    A slice is first sent at once with ``os.sendfile`` on the segment's own descriptor, when the
    transport has nothing buffered (so the bytes follow what was written before them): a follower's
    1 MB answer usually goes out in one call. Only what the socket does not take then (its buffer
    is full) goes through ``loop.sendfile``, which waits for the socket to become writable; that
    path duplicates the descriptor first, so a segment deleted by retention meanwhile stays
    readable until the send completes, and falls back to read + write where the loop has no
    sendfile (uvloop). Sending through the loop for every slice cost a writer registration, a loop
    turn, its removal and a pause and resume of reading per response: a quarter of a replication
    leader's event-loop time when measured."""
    pending: list[bytes | bytearray | memoryview] = []
    sock = None if tls else transport.get_extra_info("socket")
    for part in parts:
        if isinstance(part, (bytes, bytearray, memoryview)):
            pending.append(part)
            continue
        if tls:  # TLS: no sendfile, the bytes are copied
            fd = part.dup_fd()
            try:
                pending.append(os.pread(fd, part.size, part.position))
            finally:
                os.close(fd)
            continue
        if pending:
            transport.writelines(pending)
            pending = []
        sent = 0
        if sock is not None and transport.get_write_buffer_size() == 0:
            sent = _sendfile_now(sock.fileno(), part.fd, part.position, part.size)
        if sent < part.size:
            fd = part.dup_fd()
            with os.fdopen(fd, "rb", buffering=0) as f:
                try:
                    await asyncio.get_running_loop().sendfile(transport, f, part.position + sent, part.size - sent)
                except NotImplementedError:  # an event loop without sendfile (uvloop): read, then write
                    transport.write(os.pread(f.fileno(), part.size - sent, part.position + sent))
        if is_closed():
            return
    if pending:
        transport.writelines(pending)


def _sendfile_now(sock_fd: int, file_fd: int, position: int, size: int) -> int:
    """Bytes of the range the non-blocking socket takes now (``os.sendfile`` until it would block,
    or until the file ends short of the range: the caller's path then reports that). A broken
    connection raises its OSError."""
    sent = 0
    while sent < size:
        try:
            n = os.sendfile(sock_fd, file_fd, position + sent, size - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:
            break
        sent += n
    return sent
