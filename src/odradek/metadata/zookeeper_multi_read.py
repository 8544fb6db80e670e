"""ZooKeeper's ``multiRead`` (op code 22, ZooKeeper 3.6+): many getData reads in one request.

kazoo sends one request per read and its connection thread turns its loop once per request and
once per answer (a new selector each turn), about 0.1 ms of CPU per read on the client: 3,000
partition states took 0.43 s to read pipelined one by one. ``multiRead`` carries them in one
request and one answer, which the server serves from its in-memory tree, each read on its own
(there is no atomicity to a multiRead: one missing znode fails only its own entry). kazoo does
not offer the op, so :class:`MultiRead` is a request object of kazoo's own shape (``type``,
``serialize``, ``deserialize``) handed to ``KazooClient._call``, as kazoo's ``Transaction`` is.

Wire format (jute, big-endian), as the server's ``MultiOperationRecord`` and ``MultiResponse``:

- request: for each read, a ``MultiHeader`` (int32 type = 4 getData, bool done = false, int32
  err = -1) then a ``GetDataRequest`` (string path: int32 length + UTF-8, bool watch = false);
  then the closing header (-1, true, -1).
- answer: for each read, a ``MultiHeader``; type 4 is followed by a ``GetDataResponse`` (buffer
  data: int32 length, -1 for null, then the bytes; then a ``Stat`` of 68 bytes), type -1 (an
  error) by an ``ErrorResponse`` (int32 code); then the closing header (-1, true, -1).

:meth:`MultiRead.deserialize` trusts no count or length in the answer: a header type other than
4 or -1, a length past the end of the buffer, or a number of entries other than the number of
reads sent raises :class:`MalformedMultiReadError` (kazoo then fails the request's async result
with it, and the caller falls back to single reads). A server older than 3.6 answers the whole
request with ``UnimplementedError`` (a switch not tested against such a server: the tests'
ZooKeeper is 3.8).

Called from whichever thread issues the request (kazoo queues it); the answer is parsed in
kazoo's connection thread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.states import ZnodeStat

__all__ = ["MULTI_READ_CHUNK", "MalformedMultiReadError", "MultiRead", "start_multi_read"]

MULTI_READ_CHUNK = 500
"""Reads per request: an answer of 500 partition states is about 100 KB, well inside ZooKeeper's
``jute.maxbuffer`` (1 MB) even for larger znodes, and several chunks still pipeline."""

_GET_DATA = 4
_ERROR = -1
_HEADER = struct.Struct("!i?i")
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")
_CLOSING = _HEADER.pack(-1, True, -1)


class MalformedMultiReadError(Exception):
    """A multiRead answer that does not parse as the reads that were sent."""


class MultiRead:
    """A kazoo request reading every path of ``paths`` (already chroot-prefixed)."""

    type = 22
    __slots__ = ("paths",)

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths

    def __repr__(self) -> str:  # kazoo's debug log names the request
        return f"MultiRead({len(self.paths)} paths from {self.paths[0] if self.paths else '-'})"

    def serialize(self) -> bytes:
        parts: list[bytes] = []
        for path in self.paths:
            encoded = path.encode("utf-8")
            parts.append(_HEADER.pack(_GET_DATA, False, -1) + _INT.pack(len(encoded)) + encoded + b"\0")
        parts.append(_CLOSING)
        return b"".join(parts)

    def deserialize(self, buffer: bytes, offset: int) -> list[tuple[bytes, ZnodeStat] | Exception]:
        """One entry per path: ``(data, stat)`` or the kazoo exception of that read (e.g.
        ``NoNodeError``). kazoo calls this as ``request.deserialize(buffer, offset)``."""
        results: list[tuple[bytes, ZnodeStat] | Exception] = []
        end = len(buffer)
        while True:
            if offset + _HEADER.size > end:
                raise MalformedMultiReadError(f"answer ends inside an entry header at byte {offset}")
            kind, done, _err = _HEADER.unpack_from(buffer, offset)
            offset += _HEADER.size
            if done:
                break
            if len(results) == len(self.paths):
                raise MalformedMultiReadError(f"more than the {len(self.paths)} entries requested")
            if kind == _GET_DATA:
                if offset + _INT.size > end:
                    raise MalformedMultiReadError(f"answer ends inside entry {len(results)}")
                (length,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                if length < -1 or offset + max(length, 0) + _STAT.size > end:
                    raise MalformedMultiReadError(f"entry {len(results)}: data length {length} past the answer's end")
                data = bytes(buffer[offset : offset + length]) if length > 0 else b""
                offset += max(length, 0)
                results.append((data, ZnodeStat._make(_STAT.unpack_from(buffer, offset))))
                offset += _STAT.size
            elif kind == _ERROR:
                if offset + _INT.size > end:
                    raise MalformedMultiReadError(f"answer ends inside entry {len(results)}")
                (code,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                error: Any = EXCEPTIONS[code]  # kazoo maps unknown codes to a generic exception
                results.append(error())
            else:
                raise MalformedMultiReadError(f"entry {len(results)}: unexpected type {kind}")
        if len(results) != len(self.paths):
            raise MalformedMultiReadError(f"{len(results)} entries for {len(self.paths)} reads")
        return results


def start_multi_read(client: KazooClient, paths: Sequence[str]) -> Any:
    """Queue one multiRead of ``paths`` (chroot-relative) on ``client``; kazoo's async result,
    whose value is :meth:`MultiRead.deserialize`'s list. Any thread."""
    async_result = client.handler.async_result()
    client._call(MultiRead([_prefix_root(client.chroot, p) for p in paths]), async_result)
    return async_result
