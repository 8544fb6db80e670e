"""The socket side of a client connection: requests written out, responses framed as they land.

:class:`ResponseStream` is an ``asyncio.BufferedProtocol`` over the connection's transport (plain
TCP or asyncio's TLS transport, which also feeds buffered protocols). Reads land in the memory a
:class:`~odradek.protocol.frames.FrameBuffer` hands out, so a large response (a follower's 1 MB
fetch answer) is received into one buffer of its own size, taken whole, and never copied again
through a stream reader's buffer (which appended every read to one ``bytearray``, cut the frame
out of it and moved the rest down: three extra copies of each answer, a fifth of a follower's CPU
when it was measured). Each complete frame is handed to ``on_frame`` at once, from the read
callback; no reader task wakes per frame.

Wire format: a 4-byte big-endian size N, then N bytes (a response: correlation id first). A size
below 4 (no room for the correlation id) or above ``max_frame_bytes`` ends the stream: ``on_lost``
gets the reason and the transport is closed, so every request in flight fails with it rather than
waiting for its timeout.

:meth:`write` and :meth:`drain` are what the connection needs of a stream writer: ``drain`` waits
while the transport's buffer is above its high-water mark (``pause_writing``) and raises
``ConnectionResetError`` once the connection is lost. :meth:`close` waits up to ``timeout_s`` for
the transport to close, then aborts it (unsent bytes to a peer that stopped reading would
otherwise keep it open).

Runs on the event loop that created the connection; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from odradek.protocol.frames import FrameBuffer, FrameError, WriteGate, kernel_pending_bytes

__all__ = ["MIN_RESPONSE_BYTES", "ResponseStream"]

MIN_RESPONSE_BYTES = 4
"""A response holds at least its correlation id."""


class ResponseStream(asyncio.BufferedProtocol):
    """Frames responses off one client socket and writes requests to it (module docstring)."""

    def __init__(
        self,
        address: str,
        max_frame_bytes: int,
        on_frame: Callable[[bytes | bytearray], None],
        on_lost: Callable[[str], None],
    ) -> None:
        self.address = address
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._frames = FrameBuffer(max_frame_bytes, pending_hint=self._pending_bytes)
        self._frames.limit_name = "the client's response size bound"
        self._transport: asyncio.Transport | None = None
        self._fd = -1
        self._writable = WriteGate()
        self._lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lost_reason: str | None = None

    # --- protocol callbacks (the event loop calls these) ---------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        # Over TLS the kernel's byte count is of encrypted records, still a fair size hint.
        self._fd = sock.fileno() if sock is not None else -1

    def get_buffer(self, sizehint: int) -> memoryview:
        try:
            return self._frames.get_buffer()
        except FrameError:  # already reported; the transport is closing
            return memoryview(bytearray(64 * 1024))

    def buffer_updated(self, nbytes: int) -> None:
        if self._lost_reason is not None:
            return
        frames = self._frames
        error: FrameError | None = None
        try:
            frames.buffer_updated(nbytes)
        except FrameError as exc:
            error = exc  # the frames complete before the bad size are still answers
        while frames.frame_count:
            frame = frames.next_frame()
            assert frame is not None
            if len(frame) < MIN_RESPONSE_BYTES:
                self._fail(f"invalid response size {len(frame)} from {self.address}")
                return
            self._on_frame(frame)
            if self._lost_reason is not None:
                return
        if error is not None:
            self._fail(f"invalid response from {self.address}: {error}")

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost reports it

    def connection_lost(self, exc: Exception | None) -> None:
        self._fd = -1
        reason = (
            f"connection to {self.address} failed: {exc}"
            if exc is not None
            else f"connection to {self.address} was closed by the broker"
        )
        self._report(reason)
        self._frames.release()
        if not self._lost.done():
            self._lost.set_result(None)
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writable.pause()

    def resume_writing(self) -> None:
        self._writable.resume()

    # --- what the connection calls ---------------------------------------------------------------

    def write(self, data: bytes | bytearray) -> None:
        if self._transport is None or self._lost_reason is not None:
            raise ConnectionResetError(self._lost_reason or f"not connected to {self.address}")
        self._transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport is above its write buffer's high-water mark."""
        await self._writable.wait()
        if self._lost_reason is not None:
            raise ConnectionResetError(self._lost_reason)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self, timeout_s: float) -> None:
        """Wait for the transport to close; abort it after ``timeout_s``."""
        try:
            await asyncio.wait_for(asyncio.shield(self._lost), timeout_s)
        except TimeoutError:
            if self._transport is not None:
                self._transport.abort()

    # --- internals -----------------------------------------------------------------------------

    def _pending_bytes(self) -> int:
        return kernel_pending_bytes(self._fd)

    def _report(self, reason: str) -> None:
        if self._lost_reason is None:
            self._lost_reason = reason
            self._on_lost(reason)

    def _fail(self, reason: str) -> None:
        self._report(reason)
        self.close()
