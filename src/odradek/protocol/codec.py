"""Request/response codec over kio's generated message classes.

Wire format (Kafka's): a request frame is ``RequestHeader`` then the request body; a response
frame is ``ResponseHeader`` then the body.

- Request header v1: api_key i16, api_version i16, correlation_id i32, client_id nullable
  string (i16 length, -1 = null). v2 (flexible versions) adds tagged fields (uvarint count, then
  per field uvarint tag, uvarint size, bytes) after client_id. client_id stays a classic string
  in v2 too.
- Request header v0: api_key, api_version, correlation_id only; Kafka uses it for
  ControlledShutdown v0 alone (:func:`request_header_version`).
- Response header v0: correlation_id i32. v1 (flexible versions) adds an empty tagged-field
  section (one 0 byte). ApiVersions responses always use v0, so a client that does not yet
  know our versions can read them (KIP-511).

``api_schema(api_key, version)`` caches the classes, native reader and writer for one message
version. The header is parsed here by hand (a few ``struct`` calls); bodies go through kio's
native reader, but only after :mod:`odradek.protocol.bounded` has walked them and found every
array count, string, bytes and tagged-field length within the bytes that arrived (the native
reader sizes arrays from the count on the wire). Responses are returned with their 4-byte size
prefix, ready for the socket.

Pure functions and immutable caches: safe from any thread.
"""

from __future__ import annotations

import functools
import io
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.bounded import Check, TooManyEntries, body_checker, tag_section
from odradek.protocol.unknown_tags import strip_unknown_tags

log = logging.getLogger(__name__)


_HEAD = struct.Struct(">hhih").unpack_from
_PEEK = struct.Struct(">hhi").unpack_from
_I32 = struct.Struct(">i")


class RequestHeader(NamedTuple):
    """A parsed request header (a tuple: built once per request, on the hot path)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int
    """Bytes the header takes in the frame; the body starts there."""


@dataclass(frozen=True, slots=True)
class ApiSchema:
    """Everything needed to decode one request version and encode its response."""

    api_key: int
    version: int
    request_type: type
    response_type: type
    flexible: bool
    read_request: Callable[[memoryview, int], tuple[Any, int]]
    write_response: Callable[[io.BytesIO, Any], None]
    check_request: Check
    """The bounded walk of the request body (see :mod:`odradek.protocol.bounded`)."""

    @property
    def response_header_version(self) -> int:
        return 1 if self.flexible and self.api_key != ApiKey.API_VERSIONS else 0


@functools.cache
def api_schema(api_key: int, version: int) -> ApiSchema:
    """The codec for one (api_key, version). Raises UnsupportedVersionError if kio has none."""
    from odradek.protocol import token_messages  # delegation tokens: v0 and int64 timestamps

    token = token_messages.load(api_key, version) if api_key in token_messages.TOKEN_API_KEYS else None
    request_type: Any
    response_type: Any
    try:
        if token is not None:
            request_type, response_type = token
        else:
            request_type = load_request_schema(api_key, version)
            response_type = load_response_schema(api_key, version)
    except (UnknownAPIKey, UnknownEntity, ImportError, ValueError):
        from odradek.protocol import inter_broker_messages, legacy_messages  # what kio lacks

        legacy = legacy_messages.load(api_key, version) or inter_broker_messages.load(api_key, version)
        if legacy is None:
            raise UnsupportedVersionError(f"no codec for api key {api_key} version {version}") from None
        request_type, response_type = legacy
    return ApiSchema(
        api_key=api_key,
        version=version,
        request_type=request_type,
        response_type=response_type,
        flexible=bool(request_type.__flexible__),
        read_request=entity_reader(request_type),
        write_response=entity_writer(response_type),
        check_request=body_checker(request_type),
    )


def peek_api(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the first 8 bytes; InvalidRequestError if short."""
    if len(frame) < 8:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a request header")
    return _PEEK(frame, 0)  # type: ignore[return-value]


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """0 for ControlledShutdown v0 (no client id, as Kafka's ``ApiKeys.requestHeaderVersion``),
    2 for flexible versions, else 1."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if flexible else 1


def parse_request_header(frame: bytes | bytearray | memoryview, flexible: bool) -> RequestHeader:
    """Parse header v1 (or v2 when ``flexible``; v0 for ControlledShutdown v0). Raises
    InvalidRequestError on a malformed header.

    Hot path (every request): one ``struct`` call for the fixed part, the client id decoded
    straight from the frame, the usual empty tag section (one 0 byte) read inline.
    """
    end = len(frame)
    if end < 10:
        if end >= 8 and _PEEK(frame, 0)[:2] == (ApiKey.CONTROLLED_SHUTDOWN, 0):
            return RequestHeader(ApiKey.CONTROLLED_SHUTDOWN, 0, _PEEK(frame, 0)[2], None, 8)
        raise InvalidRequestError(f"request of {end} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEAD(frame, 0)
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return RequestHeader(api_key, api_version, correlation_id, None, 8)
    pos = 10 + client_len
    client_id: str | None = None
    if client_len >= 0:
        if pos > end:
            raise InvalidRequestError("client_id runs past the end of the request")
        try:
            client_id = str(frame[10:pos], "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("client_id is not valid UTF-8") from None
    elif client_len == -1:
        pos = 10
    else:
        raise InvalidRequestError(f"invalid client_id length {client_len}")
    if flexible:
        if pos < end and frame[pos] == 0:  # the usual empty tag section
            pos += 1
        else:
            pos = tag_section({}, frame, pos, end)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_request(
    schema: ApiSchema, frame: bytes | bytearray | memoryview, offset: int, max_entries: int | None = None
) -> Any:
    """Decode the body at ``offset``. Raises InvalidRequestError on any malformed body, and
    :class:`~odradek.protocol.bounded.TooManyEntries` (one) when the walk counts more than
    ``max_entries`` array entries, before anything is decoded.

    Bytes after the body are ignored, as Kafka's ``RequestContext.parseRequest`` ignores them:
    librdkafka 2.x sends 3 extra bytes after some Metadata v12 requests (``list_topics()``).
    (kio's reader returns the number of bytes it consumed from ``offset``.) The body is walked
    by the bounded checker first; its error text is Kafka's (``Tried to allocate a collection of
    size N, but there are only M bytes remaining.``). ``bytes`` are read as they are (indexing
    them is the walk's cheapest case); other buffers through a read-only view, as kio requires.
    """
    buf: bytes | memoryview = frame if type(frame) is bytes else memoryview(frame).toreadonly()
    try:
        if max_entries is None:
            schema.check_request(buf, offset, len(buf))
        else:
            schema.check_request(buf, offset, len(buf), max_entries)
        try:
            request, _consumed = schema.read_request(buf, offset)  # type: ignore[arg-type]
        except Exception as exc:
            if _UNKNOWN_TAG not in str(exc):
                raise
            request = _read_without_unknown_tags(schema.request_type, schema.read_request, buf, offset)
    except TooManyEntries:
        raise
    except Exception as exc:  # the walk's InvalidRequestError, or any of the types kio raises
        raise InvalidRequestError(f"malformed {schema.request_type.__name__} v{schema.version}: {exc}") from None
    return request


_UNKNOWN_TAG = "Unknown tagged field"


def _read_without_unknown_tags(cls: type, read: Callable[[Any, int], tuple[Any, int]], buf: Any, pos: int) -> Any:
    """kio refused a tagged field ``cls`` does not declare; Kafka skips those (KIP-482): read a copy
    without them (:mod:`odradek.protocol.unknown_tags`)."""
    body, dropped = strip_unknown_tags(cls, buf, pos, len(buf))
    log.debug("%s: %d unknown tagged field(s) skipped", cls.__name__, dropped)
    message, _consumed = read(body, 0)
    return message


def encode_response(schema: ApiSchema, correlation_id: int, response: Any) -> bytes:
    """Size prefix + response header + body, ready to write to the socket."""
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(_I32.pack(correlation_id))
    if schema.response_header_version == 1:
        out.write(b"\x00")
    schema.write_response(out, response)
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


def encode_request(schema: ApiSchema, correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """Size prefix + request header (v0, v1 or v2) + body; used by odradek's own client."""
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(struct.pack(">hhi", schema.api_key, schema.version, correlation_id))
    header_version = request_header_version(schema.api_key, schema.version, schema.flexible)
    if header_version >= 1:
        raw = b"" if client_id is None else client_id.encode()
        out.write(struct.pack(">h", -1 if client_id is None else len(raw)))
        out.write(raw)
    if header_version == 2:
        out.write(b"\x00")
    entity_writer(schema.request_type)(out, request)
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


@functools.cache
def response_reader(api_key: int, version: int) -> tuple[Check, Callable[[memoryview, int], tuple[Any, int]]]:
    response_type = api_schema(api_key, version).response_type
    return body_checker(response_type), entity_reader(response_type)


def decode_response(api_key: int, version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(correlation_id, response) from a response frame body (without size prefix).

    A response is as untrusted as a request (another broker, or anything listening on its
    port): it is walked by the bounded checker before the native reader sees it, and any
    malformed response raises InvalidRequestError.
    """
    schema = api_schema(api_key, version)
    view = memoryview(frame).toreadonly()
    if len(view) < 4:
        raise InvalidRequestError(f"response of {len(view)} bytes is shorter than a response header")
    (correlation_id,) = _I32.unpack_from(view, 0)
    pos = 4
    if schema.response_header_version == 1:
        pos = tag_section({}, view, pos, len(view))
    check, read = response_reader(api_key, version)
    check(view, pos, len(view))
    try:
        try:
            response, _end = read(view, pos)
        except Exception as exc:
            if _UNKNOWN_TAG not in str(exc):
                raise
            response = _read_without_unknown_tags(schema.response_type, read, view, pos)
    except Exception as exc:  # kio raises several types for malformed input
        raise InvalidRequestError(f"malformed {schema.response_type.__name__} v{version}: {exc}") from None
    return correlation_id, response
