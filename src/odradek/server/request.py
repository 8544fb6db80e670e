"""What a request handler receives: the decoded header and body and the services it may use.

Handlers live in :mod:`odradek.server.apis`, one module per API, each with ``API_KEY``,
``MIN_VERSION``, ``MAX_VERSION`` and ``async def handle(ctx) -> response | None`` (None: send
nothing, e.g. Produce with acks=0). They build responses with
:func:`odradek.protocol.messages.build` from ``ctx.response_type`` and its nested classes, so one
handler serves every version. What a handler may use of the broker is ``ctx.services``
(:class:`odradek.server.services.ApiServices`); a handler that declares
``ctx: RequestContext[SomeRequest]`` (a union from :mod:`odradek.server.apis.request_types` or,
by API family, ``request_types_groups``, ``request_types_txn`` and ``request_types_admin``) has
its reads of the request body checked by mypy. The dispatch
(:mod:`odradek.server.request_handler`) builds one context per request on the broker's event loop;
handlers run there too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from odradek.protocol.codec import ApiSchema, RequestHeader
from odradek.protocol.messages import build, has_nested, nested
from odradek.server.request_channel import RequestTimes
from odradek.server.session import PLAINTEXT_SESSION, Session

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from odradek.server.services import ApiServices

    Req = TypeVar("Req", default=Any)
else:
    from typing import TypeVar

    Req = TypeVar("Req")


@dataclass(slots=True)
class RequestContext(Generic[Req]):
    """One request's context. ``Req`` is the request body's type as the handler declares it: a
    union over the kio request classes of the versions it serves (e.g.
    :data:`odradek.server.apis.produce.ProduceRequest`), so field accesses are checked; a bare
    ``RequestContext`` is ``RequestContext[Any]``. The dispatch decodes the body for the version in
    the header, so the object is always one of the union's classes."""

    services: ApiServices
    """The broker's services (:mod:`odradek.server.services`); handlers never see the broker itself."""
    header: RequestHeader
    schema: ApiSchema
    request: Req
    client_host: str
    connection_id: str
    session: Session = PLAINTEXT_SESSION
    """Who sent the request (principal, listener); filled in by the socket layer."""
    times: RequestTimes | None = None
    """The connection's record of this request for the request metrics (None in tests)."""
    size: int = 0
    """The request's size in bytes (header included), what ``producer_byte_rate`` counts."""
    throttle_ms: int = 0
    """Set by a handler whose byte-rate quota was exceeded (Produce, Fetch): the response carries
    it and the connection is muted (or, before KIP-219, the response delayed) for that long."""

    def mark_delayed(self) -> None:
        """The request enters a delayed operation (acks=all wait, Fetch long poll): the rest of
        its handling counts as Kafka's remote time."""
        times = self.times
        if times is not None:
            times.delayed_at = time.perf_counter()
            if times.on_delayed is not None:
                times.on_delayed()

    def mark_from_follower(self) -> None:
        """A Fetch from a replica (counted as ``FetchFollower``)."""
        if self.times is not None:
            self.times.from_follower = True

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def response_type(self) -> type:
        return self.schema.response_type

    def response(self, **fields: Any) -> Any:
        """The top-level response of this request's version from the given fields."""
        return build(self.schema.response_type, **fields)

    def make(self, entity: str, /, **fields: Any) -> Any:
        """A nested response entity (e.g. ``"PartitionProduceResponse"``) of this version."""
        return build(nested(self.schema.response_type, entity), **fields)

    def has(self, name: str) -> bool:
        """Whether this version's response has a nested entity ``name``."""
        return has_nested(self.schema.response_type, name)
