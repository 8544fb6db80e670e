"""DescribeDelegationToken (key 41): the tokens a principal may see, with their HMACs.

v0-v3 (v0 is v1 on the wire; v2+ flexible; v3 adds each token's requester, KIP-373). ``owners``
null asks for every token; an empty list answers no token; otherwise the tokens whose owner,
requester or a renewer is one of the owners asked. Of those, the response lists the requester's
own tokens (owner, requester or renewer), the tokens it may DESCRIBE (``DelegationToken`` resource
named by the token id) and the tokens of owners it may DESCRIBE_TOKENS (``User`` resource
``<type>:<name>``) (:func:`odradek.security.delegation_token.filter_token`).

Refusals, with no token: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (PLAINTEXT, one-way TLS, a
token-authenticated session), then DELEGATION_TOKEN_AUTH_DISABLED (no secret key). Runs on the
broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.security.delegation_token import TokenInformation, filter_token
from odradek.security.principal import KafkaPrincipal
from odradek.server.apis.delegation_token_support import NO_THROTTLE, allow_token_requests
from odradek.server.auth_helper import authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.delegation_token_support import DescribeDelegationTokenRequest

API_KEY = ApiKey.DESCRIBE_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 3


def _described(ctx: RequestContext, info: TokenInformation, token_hmac: bytes) -> Any:
    fields: dict[str, Any] = {
        "principal_type": info.owner.principal_type,
        "principal_name": info.owner.name,
        "issue_timestamp": info.issue_timestamp,
        "expiry_timestamp": info.expiry_timestamp,
        "max_timestamp": info.max_timestamp,
        "token_id": info.token_id,
        "hmac": token_hmac,
        "renewers": tuple(
            ctx.make("DescribedDelegationTokenRenewer", principal_type=r.principal_type, principal_name=r.name)
            for r in info.renewers
        ),
    }
    if ctx.api_version >= 3:
        fields["token_requester_principal_type"] = info.token_requester.principal_type
        fields["token_requester_principal_name"] = info.token_requester.name
    return ctx.make("DescribedDelegationToken", **fields)


async def handle(ctx: RequestContext[DescribeDelegationTokenRequest]) -> Any:
    manager = ctx.services.token_manager
    if not allow_token_requests(ctx):
        return ctx.response(
            error_code=ErrorCode.delegation_token_request_not_allowed, tokens=(), throttle_time=NO_THROTTLE
        )
    if not manager.enabled:
        return ctx.response(error_code=ErrorCode.delegation_token_auth_disabled, tokens=(), throttle_time=NO_THROTTLE)
    asked = ctx.request.owners
    if asked is not None and not asked:
        return ctx.response(error_code=ErrorCode.none, tokens=(), throttle_time=NO_THROTTLE)
    owners = None if asked is None else [KafkaPrincipal(o.principal_type, o.principal_name) for o in asked]
    requester = ctx.session.principal

    def eligible(info: TokenInformation) -> bool:
        return filter_token(
            requester,
            owners,
            info,
            lambda token_id: authorize(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id),
            lambda owner: authorize(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(owner)),
        )

    tokens = tuple(_described(ctx, info, token_hmac) for info, token_hmac in manager.tokens(eligible))
    return ctx.response(error_code=ErrorCode.none, tokens=tokens, throttle_time=NO_THROTTLE)
