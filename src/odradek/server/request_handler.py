"""Routes each request frame to its API module (Kafka's ``KafkaApis``), in request order.

``handle(frame, connection)`` parses the header, checks the API key and version against the
registry in :mod:`odradek.server.apis`, decodes the body with kio, calls the handler and
encodes its response. Version negotiation follows Kafka:

- ApiVersions at a version we do not support is answered with a v0 ApiVersions response
  carrying UNSUPPORTED_VERSION and our full version table (KIP-511), so the client can retry
  with a version we know;
- any other unsupported version, an unknown API key, or a body that does not decode closes the
  connection (:class:`CloseConnection`), as Kafka does.

Runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

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
from odradek.server.socket_server import CloseConnection, KafkaConnection

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger(__name__)


class RequestHandler:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.connections: set[KafkaConnection] = set()

    async def handle(self, frame: bytes | bytearray, connection: KafkaConnection) -> Any:
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except InvalidRequestError as exc:
            raise CloseConnection(str(exc)) from None
        module = API_HANDLERS.get(api_key)
        if module is None:
            raise CloseConnection(f"unknown API key {api_key} (correlation id {correlation_id})")
        if not module.MIN_VERSION <= api_version <= module.MAX_VERSION:
            if api_key == ApiKey.API_VERSIONS:
                return api_versions.unsupported_version_response(correlation_id)
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
        ctx = RequestContext(self.broker, header, schema, request, connection.peer, connection.connection_id)
        response = await module.handle(ctx)
        if response is None:
            return None
        if isinstance(response, (bytes, list)):
            return response  # handlers that frame their own bytes (Fetch)
        return encode_response(schema, correlation_id, response)
