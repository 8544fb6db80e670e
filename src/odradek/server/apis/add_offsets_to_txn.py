"""AddOffsetsToTxn (key 25): a consumer group's offsets will be committed with the transaction.

v0..v4. The group's ``__consumer_offsets`` partition joins the transaction on the coordinator
(:mod:`odradek.coordinator.transaction`); the offsets themselves follow in TxnOffsetCommit to the
group coordinator. Errors as AddPartitionsToTxn (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
before v2).
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
    from odradek.server.apis.request_types_txn import AddOffsetsToTxnRequest

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext[AddOffsetsToTxnRequest]) -> Any:
    req = ctx.request
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return ctx.response(
            throttle_time=datetime.timedelta(0), error_code=ErrorCode.transactional_id_authorization_failed
        )
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ctx.response(throttle_time=datetime.timedelta(0), error_code=ErrorCode.group_authorization_failed)
    txn = ctx.services.transaction_coordinator
    error = await txn.add_offsets(req.transactional_id, int(req.producer_id), int(req.producer_epoch), req.group_id)
    return ctx.response(throttle_time=datetime.timedelta(0), error_code=for_version(error, ctx.api_version, 2))
