"""FrameBuffer and frames of size 0: an error, except where the legacy SASL flow allows them."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol.frames import FrameBuffer, InvalidFrameError


def test_an_empty_frame_is_refused_by_default() -> None:
    frames = FrameBuffer()
    with pytest.raises(InvalidFrameError, match="invalid frame size 0"):
        frames.receive_data(struct.pack(">i", 0))


@pytest.mark.parametrize("split", [0, 2, 4, 6, 9])
def test_empty_frames_between_others_when_allowed(split: int) -> None:
    frames = FrameBuffer()
    frames.allow_empty = True
    data = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 0) + struct.pack(">i", 1) + b"z"
    frames.receive_data(data[:split])
    frames.receive_data(data[split:])
    got = []
    while (frame := frames.next_frame()) is not None:
        got.append(bytes(frame))
    assert got == [b"abc", b"", b"z"]


def test_a_negative_size_stays_an_error_when_empty_frames_are_allowed() -> None:
    frames = FrameBuffer()
    frames.allow_empty = True
    with pytest.raises(InvalidFrameError, match="invalid frame size -1"):
        frames.receive_data(struct.pack(">i", -1))
