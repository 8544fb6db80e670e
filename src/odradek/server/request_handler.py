"""Routes each request frame to its API module (Kafka's ``KafkaApis``), in request order.

``handle(frame, connection)`` parses the header, checks the API key and version against the
registry in :mod:`odradek.server.apis`, decodes the body with kio, calls the handler and
encodes its response. Version negotiation follows Kafka:

- ApiVersions at a version we do not support is answered with a v0 ApiVersions response
  carrying UNSUPPORTED_VERSION and our full version table (KIP-511), so the client can retry
  with a version we know;
- any other unsupported version, an unknown API key, or a body that does not decode closes the
  connection (:class:`~odradek.server.request_channel.CloseConnection`), as Kafka does.

The answer is a :data:`~odradek.server.request_channel.Response`: the encoded frame, the parts of a
Fetch frame that carry file ranges, or nothing (Produce with acks=0).

Runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.errors import InvalidRequestError, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import (
    api_schema,
    decode_request,
    encode_response,
    parse_request_header,
    peek_api,
)
from odradek.server.apis import API_HANDLERS, api_versions
from odradek.server.request import RequestContext
from odradek.server.request_channel import (
    NO_RESPONSE,
    CloseConnection,
    ConnectionInfo,
    Response,
    SendfileResponse,
    SendResponse,
)

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger(__name__)


class RequestHandler:
    """Kafka's ``KafkaApis`` dispatch (a :class:`~odradek.server.request_channel.RequestHandlerProtocol`)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def handle(self, frame: bytes | bytearray, connection: ConnectionInfo) -> Response:
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except InvalidRequestError as exc:
            raise CloseConnection(str(exc)) from None
        module = API_HANDLERS.get(api_key)
        if module is None:
            raise CloseConnection(f"unknown API key {api_key} (correlation id {correlation_id})")
        if not module.MIN_VERSION <= api_version <= module.MAX_VERSION:
            if api_key == ApiKey.API_VERSIONS:
                return SendResponse(api_versions.unsupported_version_response(correlation_id))
            raise CloseConnection(
                f"unsupported version {api_version} of API key {api_key} "
                f"(supported {module.MIN_VERSION}..{module.MAX_VERSION})"
            )
        try:
            schema = api_schema(api_key, api_version)
            header = parse_request_header(frame, schema.flexible)
            request = decode_request(schema, frame, header.size)
        except (InvalidRequestError, UnsupportedVersionError) as exc:
            raise CloseConnection(str(exc)) from None
        ctx = RequestContext(
            self.broker, header, schema, request, connection.peer, connection.connection_id, connection.session
        )
        response = await module.handle(ctx)
        if response is None:
            return NO_RESPONSE
        if isinstance(response, list):
            return SendfileResponse(response)  # handlers that frame their own parts (Fetch)
        if isinstance(response, (bytes, bytearray)):
            return SendResponse(response)
        return SendResponse(encode_response(schema, correlation_id, response))
