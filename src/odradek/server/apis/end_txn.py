"""EndTxn (key 26): commit or abort the producer's transaction.

v0..v4. The coordinator writes PrepareCommit/PrepareAbort and answers; markers and the Complete
state follow (:mod:`odradek.coordinator.transaction`). A retry after completion is NONE, the other
outcome INVALID_TXN_STATE; CONCURRENT_TRANSACTIONS while a previous EndTxn is still completing.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.txn_support import for_version
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_txn import EndTxnRequest

API_KEY = ApiKey.END_TXN
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext[EndTxnRequest]) -> Any:
    req = ctx.request
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return ctx.response(
            throttle_time=datetime.timedelta(0), error_code=ErrorCode.transactional_id_authorization_failed
        )
    error = await ctx.services.transaction_coordinator.end_txn(
        req.transactional_id, int(req.producer_id), int(req.producer_epoch), bool(req.committed)
    )
    return ctx.response(throttle_time=datetime.timedelta(0), error_code=for_version(error, ctx.api_version, 2))
