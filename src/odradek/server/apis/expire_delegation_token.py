"""ExpireDelegationToken (key 40): set a token's expiry to now + the period, or, for a negative
period, remove the token at once (its logins stop working on every broker).

v0-v2 (v0 is v1 on the wire; v2 flexible). The token is named by its HMAC. Refusals:
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (PLAINTEXT, one-way TLS, a token-authenticated session),
DELEGATION_TOKEN_AUTH_DISABLED (no secret key), DELEGATION_TOKEN_NOT_FOUND (no token with that
HMAC), DELEGATION_TOKEN_OWNER_MISMATCH (neither its owner nor a renewer),
DELEGATION_TOKEN_EXPIRED (a non-negative period on an expired token); each with
``expiry_timestamp = -1``. Success answers the new expiry (now, for an immediate expiry). Runs on
the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.delegation_token_support import answer_expiry_change
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.delegation_token_support import ExpireDelegationTokenRequest

API_KEY = ApiKey.EXPIRE_DELEGATION_TOKEN
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext[ExpireDelegationTokenRequest]) -> Any:
    return await answer_expiry_change(ctx, ctx.services.token_manager.expire_token, ctx.request.expiry_time_period)
