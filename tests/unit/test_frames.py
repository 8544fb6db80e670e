"""The sans-IO frame buffer: split arbitrary chunkings, refuse bad sizes before buffering."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.frames import (
    GROWTH_SLACK_BYTES,
    STAGING_BYTES,
    FrameBuffer,
    FrameTooLargeError,
    InvalidFrameError,
    new_scratch,
)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@settings(max_examples=300)
@given(st.lists(st.binary(min_size=1, max_size=300), max_size=20), st.data())
def test_any_chunking_yields_the_same_frames(bodies: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(frame(b) for b in bodies)
    buf = FrameBuffer(1000)
    out = []
    pos = 0
    while pos < len(stream):
        step = data.draw(st.integers(1, 64))
        buf.receive_data(stream[pos : pos + step])
        pos += step
        while (f := buf.next_frame()) is not None:
            out.append(f)
    assert out == bodies
    assert buf.buffered_bytes == 0


@settings(max_examples=200)
@given(st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=12), st.data())
def test_large_frames_hand_out_only_received_bytes(bodies: list[bytes], data: st.DataObject) -> None:
    """Frames larger than a (small) scratch get unzeroed buffers sized by a hint that may be too
    small (they grow) or stale: each frame is exactly the bytes sent, never a byte of the
    buffer the socket did not write."""
    stream = b"".join(frame(b) for b in bodies)
    fed = [0]
    slack = data.draw(st.integers(-50, 500))
    buf = FrameBuffer(10**6, scratch=bytearray(32), pending_hint=lambda: max(len(stream) - fed[0] + slack, 0))
    out = []
    while fed[0] < len(stream):
        step = data.draw(st.integers(1, 700))
        chunk = stream[fed[0] : fed[0] + step]
        fed[0] += len(chunk)
        buf.receive_data(chunk)
        while (f := buf.next_frame()) is not None:
            out.append(bytes(f))
    assert out == bodies
    assert buf.buffered_bytes == 0 and buf.queued_bytes == 0


def test_oversized_frame_refused_before_body() -> None:
    buf = FrameBuffer(100)
    with pytest.raises(FrameTooLargeError, match=r"socket\.request\.max\.bytes=100"):
        buf.receive_data(struct.pack(">i", 101))
    assert buf.buffered_bytes == 0 and buf.allocated_bytes == 0
    with pytest.raises(FrameTooLargeError):
        buf.next_frame()
    with pytest.raises(FrameTooLargeError):
        buf.receive_data(b"more")


@pytest.mark.parametrize("size", [0, -1, -(2**31)])
def test_non_positive_size_is_invalid(size: int) -> None:
    buf = FrameBuffer()
    with pytest.raises(InvalidFrameError):
        buf.receive_data(struct.pack(">i", size))
    with pytest.raises(InvalidFrameError):
        buf.get_buffer()


def test_partial_frame_waits() -> None:
    buf = FrameBuffer()
    buf.receive_data(frame(b"hello")[:6])
    assert buf.next_frame() is None
    buf.receive_data(b"llo")
    assert buf.next_frame() == b"hello"


def test_large_frame_is_filled_in_place() -> None:
    body = bytes(range(256)) * 1024  # 256 KiB: larger than the staging buffer
    stream = frame(b"small") + frame(body) + frame(b"after")
    buf = FrameBuffer(10**7)
    out = []
    pos = 0
    while pos < len(stream):
        target = buf.get_buffer()
        n = min(len(target), 7000, len(stream) - pos)
        target[:n] = stream[pos : pos + n]
        pos += n
        buf.buffer_updated(n)
        while (f := buf.next_frame()) is not None:
            out.append(bytes(f))
    assert out == [b"small", body, b"after"]


def test_a_declared_size_costs_nothing_until_bytes_arrive() -> None:
    buf = FrameBuffer(200 * 1024 * 1024)
    buf.receive_data(struct.pack(">i", 100 * 1024 * 1024) + b"x" * 65532)
    assert buf.next_frame() is None
    assert buf.buffered_bytes == 65536
    assert buf.allocated_bytes <= 65532 + GROWTH_SLACK_BYTES
    buf.receive_data(b"y" * 1_000_000)  # grows with what arrives, at most twice it
    assert buf.allocated_bytes <= 2 * (65532 + 1_000_000) + GROWTH_SLACK_BYTES
    buf.release()
    assert buf.allocated_bytes == 0


def test_frame_already_in_the_kernel_gets_one_exact_buffer() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    stream = frame(body)
    fed = [STAGING_BYTES]
    buf = FrameBuffer(10**7, pending_hint=lambda: len(stream) - fed[0])
    target = buf.get_buffer()
    target[:] = stream[: len(target)]
    del target
    buf.buffer_updated(STAGING_BYTES)
    assert buf.allocated_bytes >= len(body)  # sized from FIONREAD's answer, not grown
    first = buf.get_buffer()
    assert len(first) == len(body) - (STAGING_BYTES - 4)
    first[:] = stream[STAGING_BYTES:]
    del first
    buf.buffer_updated(len(stream) - STAGING_BYTES)
    out = buf.next_frame()
    assert isinstance(out, bytearray) and out == body


def test_scratch_is_shared_by_connections_without_mixing_them() -> None:
    scratch = new_scratch()
    a, b = FrameBuffer(10**6, scratch), FrameBuffer(10**6, scratch)
    stream_a = frame(b"a" * 100) + frame(b"A" * 70000)
    stream_b = frame(b"b" * 5)
    a.receive_data(stream_a[:50])
    b.receive_data(stream_b)
    a.receive_data(stream_a[50:])
    assert [a.next_frame(), a.next_frame(), a.next_frame()] == [b"a" * 100, b"A" * 70000, None]
    assert b.next_frame() == b"b" * 5
