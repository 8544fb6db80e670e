"""RenewDelegationToken (key 39): push a token's expiry to now + the renew period (the broker's
``delegation.token.expiry.time.ms`` for a negative period), never past its max timestamp.

v0-v2 (v0 is v1 on the wire; v2 flexible). The token is named by its HMAC. Refusals:
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (PLAINTEXT, one-way TLS, a token-authenticated session),
DELEGATION_TOKEN_AUTH_DISABLED (no secret key), DELEGATION_TOKEN_NOT_FOUND (no token with that
HMAC), DELEGATION_TOKEN_OWNER_MISMATCH (neither its owner nor a renewer),
DELEGATION_TOKEN_EXPIRED; each with ``expiry_timestamp = -1``. Runs on the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.delegation_token_support import answer_expiry_change
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.delegation_token_support import RenewDelegationTokenRequest

API_KEY = ApiKey.RENEW_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext[RenewDelegationTokenRequest]) -> Any:
    return await answer_expiry_change(ctx, ctx.services.token_manager.renew_token, ctx.request.renew_period)
