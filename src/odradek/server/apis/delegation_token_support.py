"""What the four delegation token APIs share (Kafka's ``KafkaApis.allowTokenRequests``, the
request bodies' types, and the answer of Renew and Expire).

Token requests are refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT listener, on an
SSL listener whose client sent no certificate (one-way TLS: ``User:ANONYMOUS``) and from a session
that authenticated with a delegation token: a token can neither make nor manage tokens.
Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from odradek.errors import ErrorCode
from odradek.security.delegation_token import ERROR_TIMESTAMP
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.create_delegation_token import v1 as create_v1
    from kio.schema.create_delegation_token import v2 as create_v2
    from kio.schema.create_delegation_token import v3 as create_v3
    from kio.schema.describe_delegation_token import v1 as describe_v1
    from kio.schema.describe_delegation_token import v2 as describe_v2
    from kio.schema.describe_delegation_token import v3 as describe_v3
    from kio.schema.expire_delegation_token import v1 as expire_v1
    from kio.schema.expire_delegation_token import v2 as expire_v2
    from kio.schema.renew_delegation_token import v1 as renew_v1
    from kio.schema.renew_delegation_token import v2 as renew_v2

    CreateDelegationTokenRequest: TypeAlias = (
        create_v1.CreateDelegationTokenRequest
        | create_v2.CreateDelegationTokenRequest
        | create_v3.CreateDelegationTokenRequest
    )
    RenewDelegationTokenRequest: TypeAlias = renew_v1.RenewDelegationTokenRequest | renew_v2.RenewDelegationTokenRequest
    ExpireDelegationTokenRequest: TypeAlias = (
        expire_v1.ExpireDelegationTokenRequest | expire_v2.ExpireDelegationTokenRequest
    )
    DescribeDelegationTokenRequest: TypeAlias = (
        describe_v1.DescribeDelegationTokenRequest
        | describe_v2.DescribeDelegationTokenRequest
        | describe_v3.DescribeDelegationTokenRequest
    )

__all__ = ["NO_THROTTLE", "allow_token_requests", "answer_expiry_change", "milliseconds"]

NO_THROTTLE = datetime.timedelta(0)


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's ``allowTokenRequests``; see the module docstring."""
    session = ctx.session
    if session.token_authenticated or session.security_protocol == "PLAINTEXT":
        return False
    return not (session.security_protocol == "SSL" and session.principal == ANONYMOUS)


def milliseconds(value: datetime.timedelta) -> int:
    """A request's ``timedelta_i64`` field as the milliseconds on the wire (negative kept)."""
    return (value.days * 86_400_000) + (value.seconds * 1000) + value.microseconds // 1000


ExpiryChange: TypeAlias = Callable[[KafkaPrincipal, bytes, int], Awaitable[tuple[ErrorCode, int]]]
"""The token manager's ``renew_token`` or ``expire_token``: (principal, HMAC, period in ms) to
(error, new expiry timestamp or -1)."""
_ExpiryRequest = TypeVar("_ExpiryRequest", bound="RenewDelegationTokenRequest | ExpireDelegationTokenRequest")


async def answer_expiry_change(
    ctx: RequestContext[_ExpiryRequest],
    change: ExpiryChange,
    period: datetime.timedelta,
) -> Any:
    """RenewDelegationToken's and ExpireDelegationToken's answer: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    (see :func:`allow_token_requests`) with ``expiry_timestamp = -1``, else ``change`` applied to
    the session's principal, the request's HMAC and ``period``."""
    if not allow_token_requests(ctx):
        error, expiry = ErrorCode.delegation_token_request_not_allowed, ERROR_TIMESTAMP
    else:
        error, expiry = await change(ctx.session.principal, bytes(ctx.request.hmac), milliseconds(period))
    return ctx.response(error_code=error, expiry_timestamp=expiry, throttle_time=NO_THROTTLE)
