"""The client's response framing over a real loopback socket: frames split anywhere arrive whole
and in order, large ones in a buffer of their own; hostile sizes end the stream with a reason
(and fail what is in flight), before a declared giant's body is waited for."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Awaitable, Callable

import pytest

from odradek.client.response_stream import ResponseStream


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def exchange(
    serve: Callable[[asyncio.StreamWriter], Awaitable[None]], max_frame_bytes: int = 1 << 30
) -> tuple[list[bytes], list[str], ResponseStream]:
    """Connect a ResponseStream to a server running ``serve``; the frames and loss reasons seen."""
    frames: list[bytes] = []
    lost: list[str] = []
    done = asyncio.Event()

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve(writer)

    def on_lost(reason: str) -> None:
        lost.append(reason)
        done.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    _, stream = await loop.create_connection(
        lambda: ResponseStream(f"127.0.0.1:{port}", max_frame_bytes, lambda f: frames.append(bytes(f)), on_lost),
        "127.0.0.1",
        port,
    )
    await asyncio.wait_for(done.wait(), 10)
    server.close()
    return frames, lost, stream


def test_frames_split_at_every_byte_arrive_whole_and_in_order() -> None:
    bodies = [b"\0\0\0\1abc", os.urandom(300_000), b"\0\0\0\3", os.urandom(70_000)]
    wire = b"".join(frame(b) for b in bodies)

    async def serve(writer: asyncio.StreamWriter) -> None:
        for start in range(0, 4096, 1):  # the first bytes one at a time, across the first frames' prefixes
            writer.write(wire[start : start + 1])
            await writer.drain()
        for start in range(4096, len(wire), 7919):
            writer.write(wire[start : start + 7919])
            await writer.drain()
        writer.close()

    frames, lost, _ = asyncio.run(exchange(serve))
    assert frames == bodies
    assert lost == [f"connection to {lost[0].split()[2]} was closed by the broker"]


@pytest.mark.parametrize("size", [0, 2, -1])
def test_a_response_without_room_for_its_correlation_id_ends_the_stream(size: int) -> None:
    async def serve(writer: asyncio.StreamWriter) -> None:
        writer.write(frame(b"\0\0\0\7ok") + struct.pack(">i", size) + b"\0" * max(size, 0) + frame(b"\0\0\0\10"))
        await writer.drain()
        await asyncio.sleep(5)  # the client closes first

    async def run() -> tuple[list[bytes], list[str], ResponseStream]:
        frames, lost, stream = await exchange(serve)
        with pytest.raises(ConnectionResetError, match="invalid"):
            await stream.drain()
        return frames, lost, stream

    frames, lost, _ = asyncio.run(run())
    assert frames == [b"\0\0\0\7ok"]  # the bad frame and everything after it are dropped
    assert len(lost) == 1 and "invalid" in lost[0] and "127.0.0.1" in lost[0]


def test_a_declared_giant_is_refused_from_its_size_alone() -> None:
    async def serve(writer: asyncio.StreamWriter) -> None:
        writer.write(struct.pack(">i", 64 * 1024 * 1024) + b"x" * 100)  # never sends the rest
        await writer.drain()
        await asyncio.sleep(5)

    frames, lost, _ = asyncio.run(exchange(serve, max_frame_bytes=1 << 20))
    assert frames == []
    assert len(lost) == 1
    assert "67108864 bytes is larger than the client's response size bound=1048576" in lost[0]
