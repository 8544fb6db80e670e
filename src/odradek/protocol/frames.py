"""Sans-IO framing of Kafka's wire protocol.

Every request and response is a frame: a 4-byte big-endian signed size N followed by N bytes.
:class:`FrameBuffer` accumulates bytes as they arrive (``receive_data``) and yields whole frames
(``next_frame``). It never touches a socket, so the connection code, tests and fuzzers drive it
the same way.

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

_SIZE = 4


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class InvalidFrameError(FrameError):
    pass


class FrameTooLargeError(FrameError):
    pass


class FrameBuffer:
    """Accumulates received bytes and splits them into size-prefixed frames."""

    __slots__ = ("_buf", "_error", "_start", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = 104857600) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._start = 0
        self._error: FrameError | None = None

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the peer."""
        if self._error is not None:
            raise self._error
        self._buf += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf) - self._start

    def next_frame(self) -> bytes | None:
        """The next complete frame body (without its size prefix), or None if more bytes are needed.

        Raises FrameTooLargeError / InvalidFrameError as described in the module docstring.
        """
        if self._error is not None:
            raise self._error
        buf = self._buf
        start = self._start
        available = len(buf) - start
        if available < _SIZE:
            self._compact()
            return None
        size = int.from_bytes(buf[start : start + _SIZE], "big", signed=True)
        if size <= 0:
            self._error = InvalidFrameError(f"invalid frame size {size}")
            raise self._error
        if size > self.max_frame_bytes:
            self._error = FrameTooLargeError(
                f"frame of {size} bytes is larger than socket.request.max.bytes={self.max_frame_bytes}"
            )
            raise self._error
        end = start + _SIZE + size
        if len(buf) < end:
            self._compact()
            return None
        frame = bytes(buf[start + _SIZE : end])
        self._start = end
        if self._start == len(buf):
            buf.clear()
            self._start = 0
        return frame

    def _compact(self) -> None:
        if self._start:
            del self._buf[: self._start]
            self._start = 0
