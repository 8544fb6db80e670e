"""The request decode path as it was before bounded reading (commit 9fcdf6e), kept as the
decode benchmark's baseline: ``peek_api``, ``parse_request_header`` (header in a frozen
dataclass) and ``decode_request`` (kio's native reader alone, on a read-only view).

Not used by the broker: a native read of an unchecked body can ask for 16 GB (see
:mod:`odradek.protocol.bounded`). Only ``bench/decode_bench.py`` imports it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from odradek.errors import InvalidRequestError
from odradek.protocol.codec import ApiSchema

_HEAD = struct.Struct(">hhih")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int


def peek_api(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    if len(frame) < 8:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return api_key, api_version, correlation_id


def _read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(buf):
            raise InvalidRequestError("truncated varint in request header")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise InvalidRequestError("varint too long in request header")


def parse_request_header(frame: bytes | bytearray | memoryview, flexible: bool) -> RequestHeader:
    if len(frame) < 10:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEAD.unpack_from(frame, 0)
    pos = 10
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise InvalidRequestError("client_id runs past the end of the request")
        try:
            client_id = bytes(frame[pos : pos + client_len]).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("client_id is not valid UTF-8") from None
        pos += client_len
    elif client_len != -1:
        raise InvalidRequestError(f"invalid client_id length {client_len}")
    if flexible:
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
            if pos > len(frame):
                raise InvalidRequestError("tagged field runs past the end of the request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_request(schema: ApiSchema, frame: bytes | bytearray | memoryview, offset: int) -> Any:
    try:
        request, _consumed = schema.read_request(memoryview(frame).toreadonly(), offset)
    except Exception as exc:
        raise InvalidRequestError(f"malformed {schema.request_type.__name__} v{schema.version}: {exc}") from None
    return request
