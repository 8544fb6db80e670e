"""One client connection to a Kafka broker (aiokafka's ``AIOKafkaConnection`` in small).

Wire format (Kafka's): each request is a 4-byte big-endian size, a request header (v1, or v2 for
flexible versions) and the body; each response a size, the correlation id (plus an empty
tagged-field section for flexible versions other than ApiVersions) and the body. Encoding and
decoding use :mod:`odradek.protocol.codec` (kio's generated classes).

Several requests may be in flight: each gets the next correlation id and a future in
``_pending``; the socket's protocol (:class:`~odradek.client.response_stream.ResponseStream`) frames
responses as they land, matches them by correlation id and
resolves the futures (the broker answers in request order, but matching by id also discards the
late answer to a request that timed out). Produce with ``acks=0`` gets no response and resolves
to ``None`` as soon as it is written.

:meth:`KafkaConnection.connect` opens the socket and negotiates versions with ApiVersions (v3,
falling back to v0 when the broker answers UNSUPPORTED_VERSION); :meth:`version_for` then picks
the highest version both sides support. :meth:`send` takes a kio request object and sends it at
its own version, or converts it to ``api_version`` first (:func:`convert`: fields the target
version lacks are dropped while they hold their defaults; anything that would be lost, or a field
the target requires and the object lacks, raises ``UnsupportedVersionError``).

Security (:class:`~odradek.client.security.ClientSecurity`, PLAINTEXT by default): over SSL and
SASL_SSL the socket is wrapped in TLS by asyncio (``create_connection(ssl=...)``, the handshake
within ``connect_timeout_ms``, ``server_hostname`` the host connected to, so the broker's
certificate is checked against it when ``ssl.endpoint.identification.algorithm=https``). Over
SASL_PLAINTEXT and SASL_SSL, after ApiVersions the client authenticates as Kafka's clients do
(KIP-152): SaslHandshake v1 naming the mechanism, then SaslAuthenticate (v0-v2) frames carrying the
mechanism's tokens (:mod:`odradek.security.sasl`: PLAIN's one message, SCRAM's client-first and
client-final, GSSAPI's tokens for ``<service>/<host connected to>``, whose steps may wait for the
KDC and so run in a worker thread) until the mechanism completes. A refusal (UNSUPPORTED_SASL_MECHANISM,
SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE, a server signature that does not verify) raises
:class:`~odradek.client.errors.KafkaAuthenticationError` with the broker's message and closes the
connection. ``session_lifetime_ms`` keeps the broker's KIP-368 session lifetime (0: none, from a
broker with ``connections.max.reauth.ms``): as Kafka's clients, the connection re-authenticates
(SaslHandshake and SaslAuthenticate again, no ApiVersions) at a random point between 85 % and 95 %
of it, on the first :meth:`send` after that point, once the requests in flight are answered;
requests sent meanwhile wait for it.

Failures raise :mod:`odradek.client.errors`: :class:`KafkaConnectionError` (cannot connect,
closed by the broker: every pending request fails with it), :class:`KafkaTimeoutError` (no
response within ``request_timeout_ms``; the connection stays usable), ``UnsupportedVersionError``
(a version the broker does not serve). Error codes inside responses are left to the caller.

A connection belongs to the event loop that connected it; call it only from that loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import random
import ssl
import struct
import time
import uuid
from typing import Any

from odradek.client.errors import (
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
    error_name,
)
from odradek.client.response_stream import ResponseStream
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.errors import ErrorCode, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build, nested
from odradek.security.sasl import SaslAuthenticationError

__all__ = ["KafkaConnection", "RequestBuilder", "convert", "request_type"]

log = logging.getLogger(__name__)

API_VERSIONS_VERSION = 3
MAX_RESPONSE_BYTES = 1 << 30
CLOSE_TIMEOUT_S = 1.0
REAUTH_WINDOW = (0.85, 0.95)
"""Kafka's client re-authenticates at a random point of this part of the session lifetime (KIP-368)."""
_I32 = struct.Struct(">i")
_ZERO_UUID = uuid.UUID(int=0)


def request_type(api_key: int, version: int) -> type:
    """kio's request class of one API version; UnsupportedVersionError if kio has none."""
    return api_schema(api_key, version).request_type


class RequestBuilder:
    """Builds a request of one (api_key, version) from a superset of fields, like the server's
    ``RequestContext.response``: ``rb(**fields)`` the request, ``rb.make(name, **fields)`` a nested entity."""

    def __init__(self, api_key: int, version: int) -> None:
        self.api_key = api_key
        self.version = version
        self.type = request_type(api_key, version)

    def __call__(self, **fields: Any) -> Any:
        return build(self.type, **fields)

    def make(self, entity: str, /, **fields: Any) -> Any:
        return build(nested(self.type, entity), **fields)

    def has(self, name: str) -> bool:
        """Whether this version's request class has a field ``name``."""
        return name in {f.name for f in dataclasses.fields(self.type)}


def _convert_value(value: Any, target_root: type) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return convert(value, nested(target_root, type(value).__name__), target_root)
    if isinstance(value, tuple):
        return tuple(_convert_value(v, target_root) for v in value)
    return value


def convert(obj: Any, target: type, target_root: type | None = None) -> Any:
    """``obj`` (a kio message or nested entity) as an instance of ``target`` (the same message at
    another version).

    A field ``target`` lacks is dropped only while it holds its default (as Kafka's generated
    writers refuse "a non-default field" at a version without it); UnsupportedVersionError
    when it holds anything else (DeleteTopics v6's ``topics`` cannot become v1's
    ``topic_names``) or when ``target`` requires a field ``obj`` does not have.
    """
    root = target_root or target
    names = {f.name for f in dataclasses.fields(target)}
    for f in dataclasses.fields(obj):
        if f.name in names:
            continue
        value = getattr(obj, f.name)
        if f.default is not dataclasses.MISSING:
            lost = value != f.default
        elif f.default_factory is not dataclasses.MISSING:
            lost = value != f.default_factory()
        else:  # Kafka's implicit defaults: false, 0, "", null, empty, the zero UUID
            lost = not (value in (None, False, 0, "", ()) or value == _ZERO_UUID)
        if lost:
            raise UnsupportedVersionError(
                f"{type(obj).__name__}.{f.name} has no equivalent in v{getattr(target, '__version__', '?')}"
            )
    fields = {
        f.name: _convert_value(getattr(obj, f.name), root) for f in dataclasses.fields(target) if hasattr(obj, f.name)
    }
    try:
        return target(**fields)
    except TypeError as exc:
        raise UnsupportedVersionError(
            f"cannot express {type(obj).__name__} v{getattr(type(obj), '__version__', '?')} as "
            f"v{getattr(target, '__version__', '?')}: {exc}"
        ) from None


class KafkaConnection:
    """A connection to one broker. ``await KafkaConnection(host, port).connect()``; ``close()`` when done."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "odradek",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        security: ClientSecurity = PLAINTEXT_SECURITY,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.security = security
        self.session_lifetime_ms = 0
        """The broker's SASL session lifetime (KIP-368) from SaslAuthenticate v1+; 0 for none."""
        self._reauthenticate_at: float | None = None
        self._reauthentication: asyncio.Task[None] | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        """API key -> (min, max) the broker supports, filled by :meth:`connect`."""
        self._stream: ResponseStream | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._correlation_ids = itertools.count(1)
        self._closed_reason: str | None = None

    def __repr__(self) -> str:
        return f"<KafkaConnection {self.host}:{self.port}{' closed' if self.closed else ''}>"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def closed(self) -> bool:
        return self._stream is None or self._closed_reason is not None

    # --- lifecycle ---------------------------------------------------------------------------

    async def connect(self) -> KafkaConnection:
        """Open the socket (TLS handshake included), negotiate API versions and authenticate.

        Raises KafkaConnectionError (KafkaAuthenticationError when the SASL exchange is refused);
        an invalid ``ssl.*`` setting raises :class:`~odradek.security.tls.SslConfigError`."""
        context = await self.security.ssl_context_async()
        source = self.security.source_address
        local_addr = (source, 0) if source else None

        def stream() -> ResponseStream:
            return ResponseStream(self.address, MAX_RESPONSE_BYTES, self._dispatch, self._fail_pending)

        opening = asyncio.get_running_loop().create_connection(
            stream,
            self.host,
            self.port,
            ssl=context,
            server_hostname=self.host if context is not None else None,
            local_addr=local_addr,
        )
        try:
            _transport, self._stream = await asyncio.wait_for(opening, self.connect_timeout_ms / 1000)
        except TimeoutError:
            raise KafkaConnectionError(
                f"cannot connect to {self.address}: no answer within {self.connect_timeout_ms} ms"
                + (" (TLS handshake included)" if context is not None else "")
            ) from None
        except ConnectionRefusedError:
            raise KafkaConnectionError(f"cannot connect to {self.address}: connection refused") from None
        except ssl.SSLCertVerificationError as exc:
            raise KafkaConnectionError(
                f"TLS handshake with {self.address} failed: the broker's certificate was refused "
                f"({exc.verify_message or exc.reason})"
            ) from None
        except (ssl.SSLError, ConnectionResetError, asyncio.IncompleteReadError) as exc:
            if context is None:
                raise KafkaConnectionError(f"cannot connect to {self.address}: {exc}") from None
            reason = getattr(exc, "reason", None) or "the connection was closed during the handshake"
            raise KafkaConnectionError(
                f"TLS handshake with {self.address} failed: {reason} (is it a TLS listener? security.protocol "
                f"is {self.security.security_protocol})"
            ) from None
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        self._closed_reason = None
        try:
            await self._negotiate()
            if self.security.uses_sasl:
                await self._authenticate()
        except BaseException:
            await self.close()
            raise
        return self

    async def _negotiate(self) -> None:
        version = API_VERSIONS_VERSION
        for _attempt in range(2):
            rb = RequestBuilder(ApiKey.API_VERSIONS, version)
            request = rb(client_software_name="odradek", client_software_version="0.1.0")
            try:
                response = await self._send(request)
            except KafkaProtocolError:
                response = None  # an UNSUPPORTED_VERSION answer comes in v0 format
            except KafkaConnectionError as exc:
                if self.security.uses_ssl:
                    raise
                raise KafkaConnectionError(
                    f"{exc} before answering ApiVersions (is it a TLS listener? security.protocol is "
                    f"{self.security.security_protocol})"
                ) from None
            if response is not None and response.error_code == ErrorCode.none:
                self.api_versions = {
                    int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
                }
                return
            if version == 0:
                break
            version = 0
        raise KafkaConnectionError(f"{self.address} did not answer ApiVersions; is it a Kafka broker?")

    async def _authenticate(self) -> None:
        """SaslHandshake v1 and SaslAuthenticate frames (module docstring); KafkaAuthenticationError."""
        security = self.security
        mechanism = security.sasl_mechanism
        try:
            handshake = self.builder(ApiKey.SASL_HANDSHAKE, 1, 1)
            authenticate = self.builder(ApiKey.SASL_AUTHENTICATE, 0, 2)
        except UnsupportedVersionError:
            raise KafkaAuthenticationError(
                f"{self.address} does not serve SaslHandshake v1 and SaslAuthenticate; cannot authenticate "
                f"with {mechanism}"
            ) from None
        response = await self._send(handshake(mechanism=mechanism))
        if response.error_code != ErrorCode.none:
            offered = ", ".join(response.mechanisms)
            raise KafkaAuthenticationError(
                f"{self.address} refused SASL mechanism {mechanism} ({error_name(response.error_code)}); "
                f"enabled mechanisms are [{offered}]"
            )
        client = security.sasl_client(self.host)
        blocking = getattr(client, "blocking", False)  # GSSAPI may wait for the KDC

        async def evaluate(challenge: bytes) -> bytes | None:
            if blocking:
                return await asyncio.to_thread(client.evaluate_challenge, challenge)
            return client.evaluate_challenge(challenge)

        try:
            token = await evaluate(b"")
            while token is not None:
                response = await self._send(authenticate(auth_bytes=token))
                if response.error_code != ErrorCode.none:
                    message = response.error_message or "no message"
                    raise KafkaAuthenticationError(f"{error_name(response.error_code)} from {self.address}: {message}")
                lifetime = getattr(response, "session_lifetime", None)  # v1+: a timedelta
                self.session_lifetime_ms = int(lifetime.total_seconds() * 1000) if lifetime else 0
                self._reauthenticate_at = (
                    time.monotonic() + self.session_lifetime_ms / 1000 * random.uniform(*REAUTH_WINDOW)
                    if self.session_lifetime_ms > 0
                    else None
                )
                if client.complete:
                    break
                token = await evaluate(bytes(response.auth_bytes))
        except SaslAuthenticationError as exc:
            raise KafkaAuthenticationError(f"SASL/{mechanism} with {self.address} failed: {exc}") from None
        if not client.complete:
            raise KafkaAuthenticationError(f"SASL/{mechanism} with {self.address} ended before completing")

    async def close(self) -> None:
        """Close the socket; pending requests fail with KafkaConnectionError. Idempotent."""
        self._fail_pending(f"connection to {self.address} was closed by the client")
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
            # unsent bytes to a peer that stopped reading would keep the close waiting forever
            await stream.wait_closed(CLOSE_TIMEOUT_S)

    async def __aenter__(self) -> KafkaConnection:
        return await self.connect() if self._stream is None else self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- versions ----------------------------------------------------------------------------

    def version_for(self, api_key: int, min_version: int = 0, max_version: int | None = None) -> int:
        """The highest version of ``api_key`` in both the broker's range and [min, max].

        ``max_version`` None means the highest version kio has a class for. Raises
        UnsupportedVersionError when the ranges do not overlap (or the broker lacks the API).
        """
        if api_key not in self.api_versions:
            raise UnsupportedVersionError(f"broker {self.address} does not support API key {api_key}")
        lo, hi = self.api_versions[api_key]
        top = hi if max_version is None else min(hi, max_version)
        for version in range(top, max(lo, min_version) - 1, -1):
            try:
                request_type(api_key, version)
            except UnsupportedVersionError:
                continue
            return version
        raise UnsupportedVersionError(
            f"broker {self.address} supports API key {api_key} v{lo}..v{hi}; this client needs "
            f"v{min_version}..v{max_version if max_version is not None else 'any'}"
        )

    def builder(self, api_key: int, min_version: int = 0, max_version: int | None = None) -> RequestBuilder:
        """A :class:`RequestBuilder` at :meth:`version_for` of ``api_key``."""
        return RequestBuilder(api_key, self.version_for(api_key, min_version, max_version))

    # --- requests ----------------------------------------------------------------------------

    async def send(self, request: Any, api_version: int | None = None, *, timeout_ms: int | None = None) -> Any:
        """Send a kio request object and return the decoded response (None for acks=0 Produce).

        Raises KafkaConnectionError, KafkaTimeoutError, KafkaProtocolError, UnsupportedVersionError;
        KafkaAuthenticationError when a due re-authentication is refused.
        """
        due = self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at
        if due or self._reauthentication is not None:
            await self._reauthenticate()
        return await self._send(request, api_version, timeout_ms=timeout_ms)

    async def _reauthenticate(self) -> None:
        """KIP-368: once the requests in flight are answered, SaslHandshake and SaslAuthenticate
        again on this connection; requests sent meanwhile wait. A refusal closes the connection."""
        task = self._reauthentication
        if task is None:

            async def run() -> None:
                try:
                    in_flight = [future for _key, _version, future in self._pending.values()]
                    if in_flight:
                        await asyncio.wait(in_flight, timeout=self.request_timeout_ms / 1000)
                    await self._authenticate()
                except BaseException:
                    await self.close()
                    raise
                finally:
                    self._reauthentication = None

            task = self._reauthentication = asyncio.get_running_loop().create_task(run())
        await asyncio.shield(task)

    async def _send(self, request: Any, api_version: int | None = None, *, timeout_ms: int | None = None) -> Any:
        cls = type(request)
        api_key = int(cls.__api_key__)
        if api_version is not None and api_version != cls.__version__:
            request = convert(request, request_type(api_key, api_version))
            cls = type(request)
        version = int(cls.__version__)
        supported = self.api_versions.get(api_key)
        if self.api_versions and (supported is None or not supported[0] <= version <= supported[1]):
            raise UnsupportedVersionError(
                f"broker {self.address} does not support API key {api_key} v{version}"
                + (f" (supports v{supported[0]}..v{supported[1]})" if supported else "")
            )
        writer = self._stream
        if writer is None or self._closed_reason is not None:
            raise KafkaConnectionError(self._closed_reason or f"not connected to {self.address}")
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        frame = encode_request(api_schema(api_key, version), correlation_id, self.client_id, request)
        expect_response = not (api_key == ApiKey.PRODUCE and getattr(request, "acks", -1) == 0)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expect_response:
            self._pending[correlation_id] = (api_key, version, future)
        try:
            writer.write(frame)
            await writer.drain()
        except (OSError, RuntimeError) as exc:
            self._pending.pop(correlation_id, None)
            self._fail_pending(f"connection to {self.address} failed: {exc}")
            if future.done():  # the read loop saw the reset first and failed it; nobody awaits it now
                future.exception()
            raise KafkaConnectionError(f"cannot send to {self.address}: {exc}") from None
        if not expect_response:
            return None
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self._pending.pop(correlation_id, None)
            raise KafkaTimeoutError(
                f"no response from {self.address} to API key {api_key} v{version} within {timeout * 1000:.0f} ms"
            ) from None

    def _dispatch(self, frame: bytes | bytearray) -> None:
        """One response frame (correlation id first, at least 4 bytes): resolves its request's future."""
        (correlation_id,) = _I32.unpack_from(frame, 0)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            log.debug("%s: dropping response to unknown correlation id %d", self.address, correlation_id)
            return
        api_key, version, future = entry
        if future.done():
            return
        try:
            _, response = decode_response(api_key, version, frame)
        except Exception as exc:
            future.set_exception(
                KafkaProtocolError(
                    f"cannot decode the response of API key {api_key} v{version} from {self.address}: {exc}"
                )
            )
            return
        future.set_result(response)

    def _fail_pending(self, reason: str) -> None:
        if self._closed_reason is None:
            self._closed_reason = reason
        pending, self._pending = self._pending, {}
        for _api_key, _version, future in pending.values():
            if not future.done():
                future.set_exception(KafkaConnectionError(reason))
