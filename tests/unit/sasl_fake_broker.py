"""A SASL listener in small for client tests: ApiVersions, SaslHandshake (v0-v1) and
SaslAuthenticate (v0-v2) answered with the real server mechanisms of ``odradek.security.sasl``.

:class:`FakeSaslBroker` handles decoded frames (:meth:`FakeSaslBroker.answer`);
:meth:`FakeSaslBroker.serve` speaks the same over real asyncio streams, on a loopback port with
:func:`listening` (or a TLS server in the integration tests). Any other API key, or
SaslAuthenticate before a handshake, closes the connection (as a listener does before
authentication), so tests notice a client that skips a step; after it, Metadata answers an empty
cluster. With a ``session_lifetime_ms``, a SaslHandshake on an authenticated connection starts KIP-368
re-authentication, and any request after the session ended closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_request, encode_response, parse_request_header, peek_api
from odradek.protocol.messages import build, nested
from odradek.security.sasl import PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, SaslAuthenticationError, SaslServer
from odradek.security.sasl.plain import PlainSaslServer
from odradek.security.sasl.scram import ScramCredential, ScramSaslServer, generate_credential

MAX_FRAME = 1 << 20
VERSIONS = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.METADATA: (1, 12),
}


def api_versions_response(response_type: type, versions: Mapping[int, tuple[int, int]]) -> Any:
    """An ApiVersions response (of ``response_type``'s version) listing ``versions``: API key ->
    (min, max)."""
    entry = nested(response_type, "ApiVersion")
    keys = tuple(entry(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in versions.items())
    return build(
        response_type,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )


class FakeSaslBroker:
    """One connection's SASL server side. ``users`` maps user -> password (for PLAIN and both
    SCRAM mechanisms); ``enabled`` the mechanisms offered."""

    def __init__(
        self,
        users: Mapping[str, str],
        *,
        enabled: tuple[str, ...] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512),
        session_lifetime_ms: int = 0,
        versions: Mapping[int, tuple[int, int]] = VERSIONS,
    ) -> None:
        self.users = dict(users)
        self.enabled = enabled
        self.session_lifetime_ms = session_lifetime_ms
        self.versions = dict(versions)
        self.credentials: dict[str, dict[str, ScramCredential]] = {
            mech: {user: generate_credential(mech, pw) for user, pw in users.items()}
            for mech in (SCRAM_SHA_256, SCRAM_SHA_512)
        }
        self.server: SaslServer | None = None
        self.authenticated: str | None = None
        self.seen: list[tuple[int, int]] = []
        """(api key, version) of every request, in order."""
        self.session_ends: float | None = None
        self.reauthentications = 0

    def _mechanism(self, name: str) -> SaslServer:
        if name == PLAIN:
            return PlainSaslServer(self.users)
        return ScramSaslServer(name, self.credentials[name])

    def answer(self, api_key: int, version: int, request: Any) -> Any | None:
        """The response to one request, or None to close the connection."""
        self.seen.append((api_key, version))
        response_type = api_schema(api_key, version).response_type
        ended = self.session_ends is not None and time.monotonic() > self.session_ends
        if ended and api_key != ApiKey.SASL_HANDSHAKE:
            return None  # the session ended and the client did not re-authenticate
        if api_key == ApiKey.SASL_HANDSHAKE and self.authenticated is not None and self.session_lifetime_ms:
            self.server, self.authenticated, self.session_ends = None, None, None
            self.reauthentications += 1
        if api_key == ApiKey.METADATA and self.authenticated is not None:  # an empty cluster
            return build(response_type, throttle_time=datetime.timedelta(0), brokers=(), controller_id=-1, topics=())
        if api_key == ApiKey.API_VERSIONS:
            return api_versions_response(response_type, self.versions)
        if api_key == ApiKey.SASL_HANDSHAKE:
            if request.mechanism not in self.enabled:
                code = ErrorCode.unsupported_sasl_mechanism
            elif self.server is not None:
                code = ErrorCode.illegal_sasl_state
            else:
                code = ErrorCode.none
                self.server = self._mechanism(request.mechanism)
            return build(response_type, error_code=code, mechanisms=self.enabled)
        if api_key == ApiKey.SASL_AUTHENTICATE and self.server is not None and self.authenticated is None:
            fields: dict[str, Any] = {"session_lifetime": datetime.timedelta(0), "auth_bytes": b""}
            try:
                fields["auth_bytes"] = self.server.evaluate_response(bytes(request.auth_bytes))
                fields["error_code"], fields["error_message"] = ErrorCode.none, None
                if self.server.complete:
                    self.authenticated = self.server.authorization_id
                    fields["session_lifetime"] = datetime.timedelta(milliseconds=self.session_lifetime_ms)
                    if self.session_lifetime_ms:
                        self.session_ends = time.monotonic() + self.session_lifetime_ms / 1000
            except SaslAuthenticationError as exc:
                fields["error_code"] = exc.error_code
                fields["error_message"] = exc.client_message()
            return build(response_type, **fields)
        return None

    def frame(self, frame: bytes) -> bytes | None:
        """The response frame to one request frame (without its size prefix), or None to close."""
        api_key, version, _ = peek_api(frame)
        schema = api_schema(api_key, version)
        header = parse_request_header(frame, schema.flexible)
        request = decode_request(schema, frame, header.size)
        response = self.answer(api_key, version, request)
        return None if response is None else encode_response(schema, header.correlation_id, response)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer frames on one connection until the client closes it (or a request is refused)."""
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                if size > MAX_FRAME:  # not a Kafka client (a TLS ClientHello, say)
                    break
                answer = self.frame(await reader.readexactly(size))
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def listening(broker: FakeSaslBroker) -> AsyncIterator[int]:
    """``broker`` served on a loopback port while the block runs; yields the port."""
    server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()
