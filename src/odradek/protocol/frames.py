"""Sans-IO framing of Kafka's wire protocol, shaped for ``recv_into``.

Every request and response is a frame: a 4-byte big-endian signed size N followed by N bytes.
:class:`FrameBuffer` hands out the memory the next read should land in (``get_buffer``), is told
how many bytes arrived (``buffer_updated``), and yields whole frames (``next_frame``). This is the
shape of ``asyncio.BufferedProtocol``: the kernel copies bytes straight into our buffers, and
``receive_data`` remains for callers that already hold bytes (tests, fuzzers).

Memory: small frames are read into one reused 64 KiB staging buffer and copied out once each;
a frame that does not fit gets its own ``bytearray`` of exactly its size, filled in place by the
following reads and handed over as it is (no further copy), so a 1 MB produce costs one
allocation and no copies in Python.

Edge cases:
- A size <= 0 raises :class:`InvalidFrameError` (Kafka's ``InvalidReceiveException``).
- A size above ``max_frame_bytes`` (the broker's ``socket.request.max.bytes``) raises
  :class:`FrameTooLargeError` as soon as the 4 size bytes are in, before any of the body is
  buffered, so an oversized request costs no memory.
- After either error the buffer is poisoned: the stream has lost its framing and the caller
  must close the connection.

Not thread-safe: one FrameBuffer per connection, driven by that connection's loop.
"""

from __future__ import annotations

import collections

_SIZE = 4
STAGING_BYTES = 64 * 1024


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class InvalidFrameError(FrameError):
    pass


class FrameTooLargeError(FrameError):
    pass


class FrameBuffer:
    """Splits a byte stream into size-prefixed frames, reading into buffers it owns."""

    __slots__ = ("_end", "_error", "_frames", "_large", "_large_filled", "_stage", "_start", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = 104857600) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._stage = bytearray(STAGING_BYTES)
        self._start = 0
        self._end = 0
        self._large: bytearray | None = None
        self._large_filled = 0
        self._frames: collections.deque[bytes | bytearray] = collections.deque()
        self._error: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as whole frames."""
        pending = sum(len(f) + _SIZE for f in self._frames)
        large = self._large_filled + _SIZE if self._large is not None else 0
        return self._end - self._start + large + pending

    def get_buffer(self) -> memoryview:
        """Where the next read should write (never empty)."""
        if self._error is not None:
            raise self._error
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        if self._start and (self._start == self._end or len(self._stage) - self._end < STAGING_BYTES // 4):
            # move the unparsed tail to the front; a partial small frame then always fits
            tail = self._end - self._start
            self._stage[:tail] = self._stage[self._start : self._end]
            self._start, self._end = 0, tail
        return memoryview(self._stage)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last ``get_buffer()``. May raise FrameError."""
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled == len(self._large):
                self._frames.append(self._large)
                self._large = None
            return
        self._end += nbytes
        self._parse()

    def _parse(self) -> None:
        stage = self._stage
        while self._end - self._start >= _SIZE:
            start = self._start
            size = int.from_bytes(stage[start : start + _SIZE], "big", signed=True)
            if size <= 0:
                self._error = InvalidFrameError(f"invalid frame size {size}")
                raise self._error
            if size > self.max_frame_bytes:
                self._error = FrameTooLargeError(
                    f"frame of {size} bytes is larger than socket.request.max.bytes={self.max_frame_bytes}"
                )
                raise self._error
            available = self._end - start - _SIZE
            if available >= size:
                self._frames.append(bytes(stage[start + _SIZE : start + _SIZE + size]))
                self._start = start + _SIZE + size
                continue
            if size + _SIZE > len(stage):
                large = bytearray(size)
                large[:available] = stage[start + _SIZE : self._end]
                self._large, self._large_filled = large, available
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes already read (copies them into the buffers ``get_buffer`` hands out)."""
        view = memoryview(data)
        while view:
            target = self.get_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame body (without its size prefix), or None if more bytes are needed."""
        if self._frames:
            return self._frames.popleft()
        if self._error is not None:
            raise self._error
        return None
