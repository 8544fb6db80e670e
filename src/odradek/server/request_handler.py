"""Routes each request frame to its API module (Kafka's ``KafkaApis``), in request order.

``handle(frame, connection)`` parses the header, checks the API key and version against the
registry in :mod:`odradek.server.apis` (its static version table: a handler module is imported on
its API's first request, once the version is known to be served), decodes the body with kio,
calls the handler and encodes its response. Version negotiation follows Kafka:

- ApiVersions at a version we do not support is answered with a v0 ApiVersions response
  carrying UNSUPPORTED_VERSION and our full version table (KIP-511), so the client can retry
  with a version we know;
- any other unsupported version, an unknown API key, a body that does not decode, or one over
  the limits of :func:`~odradek.server.request_limits.bound_request` closes the connection
  (:class:`~odradek.server.request_channel.CloseConnection`), as Kafka does.

The answer is a :data:`~odradek.server.request_channel.Response`: the encoded frame, the parts of a
Fetch frame that carry file ranges, or nothing (Produce with acks=0).

A request body over :data:`DECODE_OFF_LOOP_BYTES` (Produce's aside: its records are bytes and
decode fast) is decoded on a worker thread: a large frame of small entries (say 300,000
acknowledgement batches) takes Python half a second to decode, which would stall every other
connection; the thread gives the loop the interpreter every switch interval meanwhile.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import time
from typing import TYPE_CHECKING, Any

from odradek.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.bounded import TooManyEntries
from odradek.protocol.codec import (
    api_schema,
    decode_request,
    encode_response,
    parse_request_header,
    peek_api,
)
from odradek.server.apis import ADVERTISED_VERSIONS, LOADED_HANDLERS, api_versions, handler
from odradek.server.client_quotas import client_throttles, quota_identity
from odradek.server.request import RequestContext
from odradek.server.request_channel import (
    NO_RESPONSE,
    CloseConnection,
    ConnectionInfo,
    Response,
    SendfileResponse,
    SendResponse,
)
from odradek.server.request_limits import MAX_ENTRIES, RequestTooLarge, bound_request, entries_limit

if TYPE_CHECKING:
    from odradek.server.services import HandlerServices

log = logging.getLogger(__name__)

DECODE_OFF_LOOP_BYTES = 256 * 1024
"""Request frames larger than this (but Produce's) are decoded off the event loop."""

SERVED_DURING_STARTUP = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.LEADER_AND_ISR,
        ApiKey.UPDATE_METADATA,
        ApiKey.STOP_REPLICA,
    }
)
"""What a broker answers before its start-up is complete: connection set-up and the controller's
requests (start-up waits for the first UpdateMetadata). Every other request waits until the broker
serves (Kafka enables request processing at the end of start-up), so no client is told "no
controller, no topics" by a broker that is about to know them."""


REQUEST_QUOTA_EXEMPT = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ALTER_PARTITION,
        ApiKey.ENVELOPE,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.API_VERSIONS,
    }
)
"""Requests ``request_percentage`` does not count: the cluster's own (Kafka's KafkaApis answers them
with ``sendResponseExemptThrottle``; a follower's Fetch is exempt too, see ``_throttle``), and
ApiVersions, which is answered without the broker (Kafka counts it; a client sends one per
connection). Every other request is counted and may be throttled; a SASL exchange is handled by
the authenticator and never reaches the handler, as in Kafka."""


class RequestHandler:
    """Kafka's ``KafkaApis`` dispatch (a :class:`~odradek.server.request_channel.RequestHandlerProtocol`)."""

    def __init__(self, broker: HandlerServices) -> None:
        self.broker = broker

    async def handle(self, frame: bytes | bytearray, connection: ConnectionInfo) -> Response:
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except InvalidRequestError as exc:
            raise CloseConnection(str(exc)) from None
        times = connection.times
        times.api_key = api_key
        times.api_version = api_version
        times.correlation_id = correlation_id
        versions = ADVERTISED_VERSIONS.get(api_key)
        if versions is None:
            raise CloseConnection(f"unknown API key {api_key} (correlation id {correlation_id})")
        if not versions[0] <= api_version <= versions[1]:
            if api_key == ApiKey.API_VERSIONS:
                return SendResponse(api_versions.unsupported_version_response(correlation_id))
            raise CloseConnection(
                f"unsupported version {api_version} of API key {api_key} (supported {versions[0]}..{versions[1]})"
            )
        module = LOADED_HANDLERS.get(api_key) or handler(api_key)  # imported on the API's first request
        try:
            schema = api_schema(api_key, api_version)
            header = parse_request_header(frame, schema.flexible)
            config = getattr(self.broker, "config", {})
            limit = entries_limit(api_key, config)
            if len(frame) > DECODE_OFF_LOOP_BYTES and api_key != ApiKey.PRODUCE:
                decoded = await asyncio.to_thread(decode_request, schema, frame, header.size, limit)
            else:
                decoded = decode_request(schema, frame, header.size, limit)
            request = bound_request(api_key, decoded, config)
        except TooManyEntries as exc:
            raise CloseConnection(
                f"request of API key {api_key} carries more than {MAX_ENTRIES}={limit} array entries ({exc})"
            ) from None
        except (InvalidRequestError, UnsupportedVersionError, RequestTooLarge) as exc:
            raise CloseConnection(str(exc)) from None
        if api_key not in SERVED_DURING_STARTUP and not self.broker.serving.is_set():
            await self.broker.serving.wait()
        session = connection.session
        ctx = RequestContext(
            self.broker, header, schema, request, connection.peer, connection.connection_id, times=times
        )
        if session is not None:
            ctx.session = session
        if api_key in REQUEST_QUOTA_EXEMPT or not self.broker.client_quotas.enabled:
            response = await module.handle(ctx)
        else:
            ctx.size = len(frame)
            started = time.perf_counter()
            response = await module.handle(ctx)
            response = await self._throttle(ctx, connection, response, started)
        if response is None:
            return NO_RESPONSE
        if isinstance(response, list):
            return SendfileResponse(response)  # handlers that frame their own parts (Fetch)
        if isinstance(response, (bytes, bytearray)):
            return SendResponse(response)
        return SendResponse(encode_response(schema, correlation_id, response))

    async def _throttle(self, ctx: RequestContext, connection: ConnectionInfo, response: Any, started: float) -> Any:
        """Kafka's quota step after a request: record ``request_percentage`` (handler time per
        second x 100, up to entering a purgatory), take the larger of that throttle and the handler's byte-rate one
        (``ctx.throttle_ms``), put it in the response's ``throttle_time`` and mute the connection
        for it; a client older than KIP-219 gets its answer that much later instead."""
        throttle = ctx.throttle_ms
        request_quota = self.broker.client_quotas.request
        from_follower = ctx.times is not None and ctx.times.from_follower
        if request_quota.quotas and not from_follower:
            user, client = quota_identity(ctx.session.principal.name, ctx.header.client_id)
            # the time until the request waited in a purgatory (acks=all, a Fetch long poll), as
            # Kafka counts only the handler threads' time
            delayed = ctx.times.delayed_at if ctx.times is not None else 0.0
            ended = delayed if delayed > started else time.perf_counter()
            throttle = max(throttle, request_quota.record(user, client, (ended - started) * 100))
        if throttle <= 0:
            return response
        wait = datetime.timedelta(milliseconds=throttle)
        settable = dataclasses.is_dataclass(response) and not isinstance(response, type)
        if settable and getattr(response, "throttle_time", wait) < wait:
            response = dataclasses.replace(response, throttle_time=wait)
        if client_throttles(ctx.header.api_key, ctx.header.api_version):
            connection.mute_for(throttle)
        else:
            await asyncio.sleep(throttle / 1000)
        return response
