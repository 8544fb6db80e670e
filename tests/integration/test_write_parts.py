"""``write_parts`` over a real loopback TCP connection: byte parts and file ranges arrive whole and in order,
whether a range leaves in one ``sendfile`` call, stops when the socket's buffer fills and is
finished by the event loop, or follows bytes still waiting in the transport's buffer."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from odradek.server.request_channel import FramePart
from odradek.server.socket_support import write_parts
from odradek.storage.file_records import FileRecords
from odradek.storage.results import FileSlice

FILE_BYTES = 3 * 1024 * 1024


@pytest.fixture
def records(tmp_path: Path) -> tuple[FileRecords, bytes]:
    data = os.urandom(FILE_BYTES)
    fr = FileRecords(tmp_path / "00000000000000000000.log", create=True)
    fr.write_at([data], 0)
    fr.commit_append(0, len(data))
    yield fr, data
    fr.close()


def file_slice(fr: FileRecords, position: int, size: int) -> FileSlice:
    return FileSlice(str(fr), fr.fd, position, size, fr)


async def send_and_receive(parts: list[FramePart], sndbuf: int, reader_delay_s: float, prefill: bytes = b"") -> bytes:
    """Send ``parts`` through a transport on one end of a socket pair; read the other end after
    ``reader_delay_s`` (so a small send buffer fills first). ``prefill`` is written just before
    and left in the transport's buffer when the socket cannot take it."""
    loop = asyncio.get_running_loop()
    with socket.create_server(("127.0.0.1", 0)) as server:
        ours = socket.create_connection(server.getsockname())
        theirs, _ = server.accept()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    theirs.setblocking(False)
    transport, _ = await loop.create_connection(asyncio.Protocol, sock=ours)
    expected = len(prefill) + sum(len(p) if isinstance(p, (bytes, bytearray, memoryview)) else p.size for p in parts)
    received = bytearray()

    async def read() -> None:
        await asyncio.sleep(reader_delay_s)
        while len(received) < expected:
            chunk = await loop.sock_recv(theirs, 1 << 20)
            assert chunk, "the sender closed early"
            received.extend(chunk)

    if prefill:
        transport.write(prefill)  # the socket takes part; the rest waits in the transport's buffer
        while True:  # make room in the socket without letting the loop run
            try:
                received.extend(theirs.recv(1 << 20))
            except BlockingIOError:
                break
        assert transport.get_write_buffer_size() > 0
    reading = asyncio.ensure_future(read())
    await write_parts(transport, parts, False, transport.is_closing)
    await asyncio.wait_for(reading, 20)
    transport.close()
    theirs.close()
    return bytes(received)


@pytest.mark.parametrize(
    ("sndbuf", "reader_delay_s"),
    [(4 * 1024 * 1024, 0.0), (16 * 1024, 0.05)],
    ids=["socket-takes-it-all", "socket-fills-then-the-loop-finishes"],
)
def test_ranges_and_bytes_arrive_in_order(
    records: tuple[FileRecords, bytes], sndbuf: int, reader_delay_s: float
) -> None:
    fr, data = records
    parts: list[FramePart] = [
        b"header-1",
        file_slice(fr, 10, 1_000_000),
        b"between",
        file_slice(fr, 2_000_000, 1_048_576),
        b"tail",
    ]
    got = asyncio.run(send_and_receive(parts, sndbuf, reader_delay_s))
    assert got == b"header-1" + data[10:1_000_010] + b"between" + data[2_000_000:3_048_576] + b"tail"


def test_a_range_waits_behind_bytes_still_buffered(records: tuple[FileRecords, bytes]) -> None:
    """With earlier bytes still in the transport's buffer, the range must not overtake them, even
    when the socket has room for it."""
    fr, data = records
    prefill = os.urandom(2 * 1024 * 1024)  # more than a 16 KiB socket buffer takes at once
    got = asyncio.run(send_and_receive([file_slice(fr, 0, 500_000)], 16 * 1024, 0.05, prefill=prefill))
    assert got == prefill + data[:500_000]


def test_bytes_the_socket_cannot_take_at_once_before_a_range(records: tuple[FileRecords, bytes]) -> None:
    """A part of bytes larger than the socket takes: the rest waits in the transport, and the range
    after it goes through the loop, in order."""
    fr, data = records
    big = os.urandom(1_500_000)
    parts: list[FramePart] = [big, file_slice(fr, 100, 700_000), b"end", file_slice(fr, 5, 10)]
    got = asyncio.run(send_and_receive(parts, 16 * 1024, 0.05))
    assert got == big + data[100:700_100] + b"end" + data[5:15]
