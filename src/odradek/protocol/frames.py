"""Sans-IO framing of Kafka's wire protocol, shaped for ``recv_into``; memory follows bytes received.

Every request and response is a frame: a 4-byte big-endian signed size N followed by N bytes.
:class:`FrameBuffer` hands out the memory the next read should land in (``get_buffer``), is told
how many bytes arrived (``buffer_updated``), and yields whole frames (``next_frame``). This is the
shape of ``asyncio.BufferedProtocol``: the kernel copies bytes straight into our buffers, and
``receive_data`` remains for callers that already hold bytes (tests, fuzzers).

Memory (a frame costs what it carried, not what it declared):

- Reads land in a *scratch* buffer (64 KiB) that may be shared by every connection of one event
  loop: the loop calls ``get_buffer``, reads, and calls ``buffer_updated`` for one connection
  before it serves another (asyncio's selector loop and uvloop do), so an idle connection owns no
  read buffer at all. Whole frames are copied out of the scratch once each; the incomplete tail
  of a small frame is kept in a buffer of its own size.
- A frame larger than the scratch gets its own ``bytearray``, filled in place by the following
  reads and handed over as it is. It is sized by what has arrived, not by the size prefix: the
  bytes already read, plus what the kernel already holds for this socket (``pending_hint``, e.g.
  ``FIONREAD``), plus 64 KiB; when it fills before the frame is complete it grows to at least
  twice its size (one copy of what arrived), never past the declared size. A client that sends
  its request at once gets a buffer of exactly the frame's size and no copy; one that declares
  100 MB and stalls after 64 KiB holds about 128 KiB. The buffer is allocated without zeroing it:
  a frame is handed out only when every byte of it has been received, and a buffer that grows
  copies only the bytes received, so no byte of it is ever read before the socket wrote it.

Edge cases:
- A size <= 0 raises :class:`InvalidFrameError` (Kafka's ``InvalidReceiveException``).
- A size above ``max_frame_bytes`` (the broker's ``socket.request.max.bytes``) raises
  :class:`FrameTooLargeError` as soon as the 4 size bytes are in, before any of the body is
  buffered, so an oversized request costs no memory.
- After either error the buffer is poisoned: the stream has lost its framing and the caller
  must close the connection.

Not thread-safe: one FrameBuffer per connection, driven by that connection's loop; a shared
scratch belongs to one loop.

Beside it, the two pieces the broker's connections and the client's share around a FrameBuffer:
:func:`kernel_pending_bytes` (its ``pending_hint``) and :class:`WriteGate` (a transport's write
flow control as an awaitable).
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import struct
import termios
from collections.abc import Callable

_SIZE = 4
STAGING_BYTES = 64 * 1024
"""Size of the scratch buffer reads land in; frames up to this size never get a buffer of their own."""
GROWTH_SLACK_BYTES = 64 * 1024
"""Room a large frame's buffer gets beyond the bytes known to have arrived."""


def _uninitialized_allocator() -> Callable[[int], bytearray]:
    """``bytearray(n)`` without the zero fill, where CPython's C API offers it
    (``PyByteArray_FromStringAndSize(NULL, n)``); a large frame's buffer is overwritten by the
    socket before any of it is read, and zeroing 1 MB per produce request was a few percent of a
    broker's time. Elsewhere (no ``pythonapi``), ``bytearray``."""
    try:
        make = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:
        return bytearray
    make.restype = ctypes.py_object
    make.argtypes = (ctypes.c_char_p, ctypes.c_ssize_t)
    return lambda n: make(None, n)  # type: ignore[no-any-return]


_unzeroed = _uninitialized_allocator()


_FIONREAD_ARG = b"\0\0\0\0"


def kernel_pending_bytes(fd: int) -> int:
    """Bytes the kernel holds unread for socket ``fd`` (``FIONREAD``), a FrameBuffer's
    ``pending_hint``; 0 when ``fd`` is negative or the call fails."""
    if fd < 0:
        return 0
    try:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, _FIONREAD_ARG))[0])
    except OSError:
        return 0


class WriteGate:
    """A transport's flow control as something to await: ``pause()`` and ``resume()`` from the
    protocol's ``pause_writing``/``resume_writing`` (and ``resume()`` when the connection is lost),
    ``await wait()`` before writing more. Event loop only."""

    __slots__ = ("_writable",)

    def __init__(self) -> None:
        self._writable: asyncio.Future[None] | None = None

    def pause(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    async def wait(self) -> None:
        """Return once the transport takes writes again (at once when it was never paused)."""
        if self._writable is not None and not self._writable.done():
            await self._writable


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class InvalidFrameError(FrameError):
    pass


class FrameTooLargeError(FrameError):
    pass


def new_scratch() -> bytearray:
    """A scratch buffer to share between the FrameBuffers of one event loop."""
    return bytearray(STAGING_BYTES)


class FrameBuffer:
    """Splits a byte stream into size-prefixed frames; buffers only bytes that arrived."""

    __slots__ = (
        "_error",
        "_frames",
        "_head",
        "_large",
        "_large_filled",
        "_large_size",
        "_pending_hint",
        "_scratch",
        "allow_empty",
        "limit_name",
        "max_frame_bytes",
        "queued_bytes",
    )

    def __init__(
        self,
        max_frame_bytes: int = 104857600,
        scratch: bytearray | None = None,
        pending_hint: Callable[[], int] | None = None,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.limit_name = "socket.request.max.bytes"
        """The key ``max_frame_bytes`` comes from, named when a frame is refused."""
        self.allow_empty = False
        """Whether a frame of size 0 is a frame (an empty SASL token of the legacy, SaslHandshake
        v0 exchange) rather than an error."""
        self._scratch = scratch if scratch is not None else new_scratch()
        self._pending_hint = pending_hint
        self._head = bytearray()
        """An incomplete small frame (with its size prefix), or an incomplete size prefix."""
        self.queued_bytes = 0
        """Bytes of the complete frames waiting in ``next_frame`` (what the reader may pause on)."""
        self._large: bytearray | None = None
        self._large_filled = 0
        self._large_size = 0
        self._frames: list[bytes | bytearray] = []
        self._error: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as whole frames."""
        large = self._large_filled + _SIZE if self._large is not None else 0
        return len(self._head) + large + self.queued_bytes + _SIZE * len(self._frames)

    @property
    def allocated_bytes(self) -> int:
        """Memory this buffer holds beyond the shared scratch (for tests and accounting)."""
        large = len(self._large) if self._large is not None else 0
        return len(self._head) + large + sum(len(f) for f in self._frames)

    def get_buffer(self) -> memoryview:
        """Where the next read should write (never empty)."""
        if self._error is not None:
            raise self._error
        large = self._large
        if large is None:
            return memoryview(self._scratch)
        if self._large_filled == len(large):
            large = self._grow()
        return memoryview(large)[self._large_filled :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last ``get_buffer()``. May raise FrameError."""
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled == self._large_size:
                self._frames.append(self._large)
                self.queued_bytes += self._large_size
                self._large = None
            return
        view = memoryview(self._scratch)[:nbytes]
        rest = self._complete_head(view) if self._head else view
        if rest is not None:
            self._parse(rest)

    def _check_size(self, size: int) -> None:
        if size < 0 or (size == 0 and not self.allow_empty):
            self._error = InvalidFrameError(f"invalid frame size {size}")
            raise self._error
        if size > self.max_frame_bytes:
            self._error = FrameTooLargeError(
                f"frame of {size} bytes is larger than {self.limit_name}={self.max_frame_bytes}"
            )
            raise self._error

    def _complete_head(self, data: memoryview) -> memoryview | None:
        """Feed ``data`` to the incomplete frame in ``_head``; the bytes left, or None if all used."""
        head = self._head
        if len(head) < _SIZE:
            take = min(_SIZE - len(head), len(data))
            head += data[:take]
            data = data[take:]
            if len(head) < _SIZE:
                return None
            size = int.from_bytes(head[:_SIZE], "big", signed=True)
            self._check_size(size)
            if size + _SIZE > len(self._scratch):
                self._head = bytearray()
                self._start_large(size, data[: min(size, len(data))])
                rest = data[min(size, len(data)) :]
                return rest if self._large is None else None
        size = int.from_bytes(head[:_SIZE], "big", signed=True)
        need = size + _SIZE - len(head)
        take = min(need, len(data))
        head += data[:take]
        if take < need:
            return None
        self._frames.append(bytes(head[_SIZE:]))
        self.queued_bytes += size
        self._head = bytearray()
        return data[take:]

    def _parse(self, data: memoryview) -> None:
        pos = 0
        end = len(data)
        while end - pos >= _SIZE:
            size = int.from_bytes(data[pos : pos + _SIZE], "big", signed=True)
            self._check_size(size)
            available = end - pos - _SIZE
            if available >= size:
                self._frames.append(bytes(data[pos + _SIZE : pos + _SIZE + size]))
                self.queued_bytes += size
                pos += _SIZE + size
                continue
            if size + _SIZE > len(self._scratch):
                self._start_large(size, data[pos + _SIZE : end])
                return
            break
        if pos < end:
            self._head = bytearray(data[pos:end])

    def _start_large(self, size: int, have: memoryview) -> None:
        """A frame of ``size`` bytes of which ``have`` arrived: a buffer for what is known to come."""
        hint = self._pending_hint() if self._pending_hint is not None else 0
        capacity = min(size, len(have) + max(hint, 0) + GROWTH_SLACK_BYTES)
        large = _unzeroed(capacity)  # only bytes received are ever handed out (see the module docstring)
        large[: len(have)] = have
        if len(have) == size:  # cannot happen for a frame larger than the scratch, kept for safety
            self._frames.append(large)
            self.queued_bytes += size
            return
        self._large, self._large_filled, self._large_size = large, len(have), size

    def _grow(self) -> bytearray:
        old = self._large
        assert old is not None
        hint = self._pending_hint() if self._pending_hint is not None else 0
        capacity = min(self._large_size, max(2 * len(old), self._large_filled + max(hint, 0) + GROWTH_SLACK_BYTES))
        large = _unzeroed(capacity)
        large[: self._large_filled] = old
        self._large = large
        return large

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes already read (copies them into the buffers ``get_buffer`` hands out)."""
        view = memoryview(data)
        while view:
            target = self.get_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            del target
            view = view[n:]
            self.buffer_updated(n)

    @property
    def frame_count(self) -> int:
        """Complete frames waiting to be taken with ``next_frame``."""
        return len(self._frames)

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame body (without its size prefix), or None if more bytes are needed."""
        if self._frames:
            frame = self._frames.pop(0)
            self.queued_bytes -= len(frame)
            return frame
        if self._error is not None:
            raise self._error
        return None

    def release(self) -> int:
        """Drop every buffer this connection holds, and the hint (it is closing); the bytes freed."""
        freed = self.allocated_bytes
        self._pending_hint = None
        self._head = bytearray()
        self._large = None
        self._frames = []
        self.queued_bytes = 0
        return freed
