"""ListTransactions (key 66): the transactional ids this broker coordinates.

v0..v1. Filters (each ignored when empty): ``state_filters`` (Kafka's state names; unknown names
are returned in ``unknown_state_filters``), ``producer_id_filters`` and (v1, KIP-994)
``duration_filter``: only transactions open for at least that many milliseconds. Answered
COORDINATOR_LOAD_IN_PROGRESS while a ``__transaction_state`` partition loads. A client lists a
cluster's transactions by asking every broker.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.coordinator.transaction.coordinator import STATE_NAMES
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.apis.txn_support import coordinator
from odradek.server.request import RequestContext

API_KEY = ApiKey.LIST_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext) -> Any:
    req = ctx.request
    txn = coordinator(ctx)
    wanted = set(req.state_filters or ())
    unknown = tuple(sorted(wanted - set(STATE_NAMES.values())))
    if txn is None:
        error, found = ErrorCode.coordinator_not_available, []
    else:
        duration = int(getattr(req, "duration_filter", -1))
        error, found = txn.list(wanted, {int(p) for p in req.producer_id_filters or ()}, duration)
    states = tuple(
        ctx.make(
            "TransactionState",
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            transaction_state=STATE_NAMES[m.state],
        )
        for m in found
    )
    return ctx.response(
        throttle_time=datetime.timedelta(0), error_code=error, unknown_state_filters=unknown, transaction_states=states
    )
