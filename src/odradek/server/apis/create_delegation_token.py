"""CreateDelegationToken (key 38): a new delegation token for the requester or, since v3
(KIP-373), for another owner.

v0-v3 (v0 is v1 on the wire; v2+ flexible; v3 adds the nullable ``owner_principal_type``/
``owner_principal_name`` to the request and the requester to the response). In Kafka's order:

1. a PLAINTEXT listener, one-way TLS or a token-authenticated session: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
2. an owner other than the requester without CREATE_TOKENS on the ``User`` resource named
   ``<type>:<name>`` of the owner: DELEGATION_TOKEN_AUTHORIZATION_FAILED;
3. a renewer whose type is not ``User``: INVALID_PRINCIPAL_TYPE (also an owner with a null type);
4. no ``delegation.token.secret.key``: DELEGATION_TOKEN_AUTH_DISABLED.

A refusal carries the owner and requester, ``-1`` timestamps, an empty token id and HMAC. A
``max_lifetime_ms`` <= 0 takes the broker's maximum (:mod:`odradek.security.delegation_token`).
Runs on the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import AclOperation, ResourceType
from odradek.security.delegation_token import ERROR_TIMESTAMP, TokenInformation
from odradek.security.principal import USER_TYPE, KafkaPrincipal
from odradek.server.apis.delegation_token_support import NO_THROTTLE, allow_token_requests, milliseconds
from odradek.server.auth_helper import authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.delegation_token_support import CreateDelegationTokenRequest

API_KEY = ApiKey.CREATE_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 3


def _response(
    ctx: RequestContext,
    error: ErrorCode,
    owner: KafkaPrincipal,
    requester: KafkaPrincipal,
    info: TokenInformation | None = None,
    token_hmac: bytes = b"",
) -> Any:
    fields: dict[str, Any] = {
        "error_code": error,
        "principal_type": owner.principal_type,
        "principal_name": owner.name,
        "issue_timestamp": info.issue_timestamp if info else ERROR_TIMESTAMP,
        "expiry_timestamp": info.expiry_timestamp if info else ERROR_TIMESTAMP,
        "max_timestamp": info.max_timestamp if info else ERROR_TIMESTAMP,
        "token_id": info.token_id if info else "",
        "hmac": token_hmac,
        "throttle_time": NO_THROTTLE,
    }
    if ctx.api_version >= 3:
        fields["token_requester_principal_type"] = requester.principal_type
        fields["token_requester_principal_name"] = requester.name
    return ctx.response(**fields)


async def handle(ctx: RequestContext[CreateDelegationTokenRequest]) -> Any:
    request = ctx.request
    requester = ctx.session.principal
    owner_type = getattr(request, "owner_principal_type", None)
    owner_name = getattr(request, "owner_principal_name", None)
    owner = requester if not owner_name else KafkaPrincipal(owner_type or "", owner_name)
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in request.renewers]
    if not allow_token_requests(ctx):
        return _response(ctx, ErrorCode.delegation_token_request_not_allowed, owner, requester)
    if owner != requester and not authorize(ctx, AclOperation.CREATE_TOKENS, ResourceType.USER, str(owner)):
        return _response(ctx, ErrorCode.delegation_token_authorization_failed, owner, requester)
    if not owner.principal_type or any(r.principal_type != USER_TYPE for r in renewers):
        return _response(ctx, ErrorCode.invalid_principal_type, owner, requester)
    manager = ctx.services.token_manager
    error, info, token_hmac = await manager.create_token(owner, requester, renewers, milliseconds(request.max_lifetime))
    return _response(ctx, error, owner, requester, info, token_hmac)
