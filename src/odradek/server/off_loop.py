"""Decoding and encoding that grow with a request's entries, moved off the event loop.

A request of thousands of entries (partitions, topics, groups) costs tens of microseconds per
entry to decode, and its response as much to encode: 3,000 entries held the loop 150-500 ms on a
loaded 2-core machine. :func:`decode` and :func:`encode` run the codec in a worker thread
(``asyncio.to_thread``) when the work is large, the loop's own thread otherwise:

- a request frame over :data:`OFFLOAD_FRAME_BYTES` (32 KiB), except Produce, whose size is its
  records (decoded as one slice, not entry by entry);
- a response with more than :data:`OFFLOAD_ENTRIES` (500) array entries
  (:func:`~odradek.server.request_limits.count_entries`, which stops counting there).

The worker holds the GIL while it runs, but CPython hands it back to the loop every switch
interval (5 ms), so the loop keeps serving other connections and its timers meanwhile. The codec
is pure: the frame is not modified and stays alive until the awaited call returns. Call from the
event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import ApiSchema, decode_request, encode_response
from odradek.server.request_limits import count_entries

__all__ = ["OFFLOAD_ENTRIES", "OFFLOAD_FRAME_BYTES", "decode", "encode"]

OFFLOAD_FRAME_BYTES = 32 * 1024
OFFLOAD_ENTRIES = 500


async def decode(schema: ApiSchema, frame: bytes | bytearray | memoryview, offset: int) -> Any:
    """``decode_request(schema, frame, offset)``, in a worker thread for a large frame."""
    if len(frame) > OFFLOAD_FRAME_BYTES and schema.api_key != ApiKey.PRODUCE:
        return await asyncio.to_thread(decode_request, schema, frame, offset)
    return decode_request(schema, frame, offset)


async def encode(schema: ApiSchema, correlation_id: int, response: Any) -> bytes:
    """``encode_response(schema, correlation_id, response)``, in a worker thread for a response of
    many entries."""
    if count_entries(response, OFFLOAD_ENTRIES) > OFFLOAD_ENTRIES:
        return await asyncio.to_thread(encode_response, schema, correlation_id, response)
    return encode_response(schema, correlation_id, response)
