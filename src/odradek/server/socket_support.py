"""Pieces of the socket server that do not depend on a connection: handing freed heap memory back
to the OS, and :class:`AckAtOnce` for TLS connections. Runs on the broker's event loop."""

from __future__ import annotations

import asyncio
import ctypes
import functools
import socket
from typing import cast


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
