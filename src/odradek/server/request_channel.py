"""What the socket layer and the request handler exchange (Kafka's ``RequestChannel`` types).

:mod:`odradek.server.socket_server` reads frames and writes responses;
:mod:`odradek.server.request_handler` turns a frame into a response. Neither imports the other:
both import this module. A connection calls its handler (:class:`RequestHandlerProtocol`) with
each whole request frame and itself as a :class:`ConnectionInfo`, and gets back a
:data:`Response`, one of Kafka's ``RequestChannel`` responses:

- :class:`SendResponse`: one encoded frame (size prefix included), written as it is;
- :class:`SendfileResponse`: a frame as parts, byte strings and segment :class:`FileSlice` ranges
  the connection sends with ``sendfile`` (Fetch, :mod:`odradek.protocol.fetch_response`);
- :data:`NO_RESPONSE` (:class:`NoOpResponse`): nothing is sent (Produce with acks=0).

The connection also carries a :class:`RequestTimes` the handler fills in (API key, version,
when the request entered a delayed operation) and reports each completed request to the socket
server's :class:`RequestObserver`, if any (the request metrics and ``kafka.request.logger``).

A handler that wants the connection closed (a frame that does not parse, an unknown API key, an
unsupported version) raises :class:`CloseConnection` (Kafka's ``CloseConnectionResponse``).

Plain types: safe from any thread; used on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from odradek.server.session import Session
from odradek.storage.results import FileSlice

__all__ = [
    "NO_RESPONSE",
    "CloseConnection",
    "ConnectionInfo",
    "FramePart",
    "NoOpResponse",
    "RequestHandlerProtocol",
    "RequestObserver",
    "RequestTimes",
    "Response",
    "SendResponse",
    "SendfileResponse",
]


class CloseConnection(Exception):
    """Raised by the request handler when the connection must be closed (reason in the message)."""


FramePart = bytes | bytearray | memoryview | FileSlice
"""One part of a :class:`SendfileResponse`: bytes written as they are, or a file range sent with
``sendfile``."""


@dataclass(frozen=True, slots=True)
class SendResponse:
    """One whole response frame, size prefix included."""

    frame: bytes | bytearray


@dataclass(frozen=True, slots=True)
class SendfileResponse:
    """One whole response frame as parts, in order (their sizes add up to the frame's)."""

    parts: Sequence[FramePart]


@dataclass(frozen=True, slots=True)
class NoOpResponse:
    """No response is sent for this request."""


NO_RESPONSE: Final = NoOpResponse()

Response = SendResponse | SendfileResponse | NoOpResponse


class RequestTimes:
    """What the handler tells the connection about the request in flight, for the request
    metrics and the request log: one per connection, reused for each of its requests (they are
    handled one at a time). ``delayed_at`` is the ``time.perf_counter()`` at which the request
    entered a delayed operation (acks=all, a long-polling Fetch), 0.0 if it did not.
    ``on_delayed``, when set, is called (on the loop) as the request enters it: a pipelined
    Produce's connection then reads its next request (:mod:`odradek.server.produce_pipeline`)."""

    __slots__ = ("api_key", "api_version", "correlation_id", "delayed_at", "from_follower", "on_delayed")

    def __init__(self) -> None:
        self.on_delayed: Callable[[], None] | None = None
        self.reset()

    def reset(self) -> None:
        self.api_key = -1
        self.api_version = -1
        self.correlation_id = -1
        self.delayed_at = 0.0
        self.from_follower = False


class RequestObserver(Protocol):
    """Told about each completed request (the broker's request metrics and request log). Times
    are ``time.perf_counter()`` seconds: the whole frame arrived, the worker picked it up, the
    handler returned, writing started, the response was sent."""

    def completed(
        self,
        times: RequestTimes,
        connection: ConnectionInfo,
        arrived: float,
        dequeued: float,
        handled: float,
        send_started: float,
        sent: float,
    ) -> None: ...


class ConnectionInfo(Protocol):
    """The connection a request came on, as the handler sees it."""

    @property
    def peer(self) -> str:
        """The client's ``host:port``."""
        ...

    @property
    def connection_id(self) -> str:
        """Unique within this broker process (``conn-<n>``)."""
        ...

    @property
    def session(self) -> Session | None:
        """Who is on the other end (set before any request but ApiVersions reaches the handler)."""
        ...

    @property
    def times(self) -> RequestTimes:
        """The request in flight's :class:`RequestTimes` (the handler fills it in)."""
        ...

    def mute_for(self, ms: int) -> None:
        """Read nothing more from this connection for ``ms`` after the current response (KIP-219)."""
        ...


class RequestHandlerProtocol(Protocol):
    """Turns one request frame into its response; called by a connection's worker, one frame at
    a time per connection. Raises :class:`CloseConnection` to have the connection closed."""

    async def handle(self, frame: bytes | bytearray, connection: ConnectionInfo) -> Response: ...
