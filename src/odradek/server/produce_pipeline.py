"""Pipelined acks=all Produce on one connection (``odradek.produce.pipelined.requests``).

Kafka's socket server handles one request per connection at a time: it mutes the channel when a
request arrives and unmutes it when the response has been sent. A producer with several requests
in flight for one partition (librdkafka's default) therefore waits a whole replication round trip
(leader append, the followers' next fetches, the high watermark) per acks=all request before the
broker even reads the next one, and replication runs as a chain of hops rather than a stream.

With ``odradek.produce.pipelined.requests`` = N > 1 a connection may hold up to N acks=all Produce
requests that have been appended and are waiting for the ISR (Kafka's DelayedProduce): the next
Produce is read and appended while the earlier ones wait, so the followers' next fetch already
carries it. What a client can observe is unchanged:

- **Responses leave in request order**, each only after every earlier one.
- **Appends happen in request order**: a request is handed to the handler only once the one
  before it has appended everything (it reached its acks=all wait) or finished; so sequence
  numbers of idempotent producers, transactional batches and the log's order are what they are
  with one request at a time.
- **Anything else waits for the pipeline to drain**: a request that is not an acks=all Produce
  (Metadata, EndTxn, a SASL re-authentication, an acks=1 Produce ...) is handled only after every
  earlier response has been sent, exactly as with a muted channel.
- A throttled response (KIP-219) mutes the channel after it is sent, as before; requests read
  before it was known are not recalled (at most N - 1 of them).

The default is 5; N = 1 is Kafka's behaviour. This module holds the cheap frame peek that decides which requests
may be pipelined and the record of one request in flight; the connection
(:class:`odradek.server.server_connection.KafkaServerConnection`) runs the pipeline on its event loop.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from odradek.errors import InvalidRequestError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.bounded import read_uvarint

if TYPE_CHECKING:
    from odradek.server.request_channel import RequestTimes, Response

PIPELINED_REQUESTS = "odradek.produce.pipelined.requests"
FIRST_FLEXIBLE_PRODUCE = 9
"""Produce v9+ uses request header v2 (tagged fields) and compact strings."""


def produce_acks(frame: bytes | bytearray | memoryview) -> int | None:
    """The ``acks`` of a Produce request frame (size prefix stripped), or None when the frame is
    not a Produce request or is too short or malformed to say (the handler then reports it as it
    would anyway). Reads only the header and ``transactional_id``: api_key int16, api_version
    int16, correlation_id int32, client_id (int16 length, -1 for null), for v9+ the header's
    tagged fields; then ``transactional_id`` (int16-length nullable string, compact in v9+) and
    ``acks`` int16."""
    try:
        if len(frame) < 10 or frame[0] != 0 or frame[1] != ApiKey.PRODUCE:
            return None
        version = int.from_bytes(frame[2:4], "big", signed=True)
        client_id = int.from_bytes(frame[8:10], "big", signed=True)
        position = 10 + max(client_id, 0)
        end = len(frame)
        if version >= FIRST_FLEXIBLE_PRODUCE:
            tags, position = read_uvarint(frame, position, end)
            for _ in range(tags):
                _tag, position = read_uvarint(frame, position, end)
                size, position = read_uvarint(frame, position, end)
                position += size
            length, position = read_uvarint(frame, position, end)
            position += max(length - 1, 0)
        else:
            length = int.from_bytes(frame[position : position + 2], "big", signed=True)
            position += 2 + max(length, 0)
        if position + 2 > end:
            return None
        return int.from_bytes(frame[position : position + 2], "big", signed=True)
    except (IndexError, InvalidRequestError):
        return None


class InFlight:
    """One pipelined request: the handler's task (it has appended, and waits for the ISR), the
    request's own :class:`RequestTimes` and, for the request metrics, when its frame arrived and
    was picked up. Created and read on the connection's event loop only."""

    __slots__ = ("arrived", "dequeued", "task", "times")

    def __init__(self, task: asyncio.Task[Response], times: RequestTimes, arrived: float, dequeued: float) -> None:
        self.task = task
        self.times = times
        self.arrived = arrived
        self.dequeued = dequeued
