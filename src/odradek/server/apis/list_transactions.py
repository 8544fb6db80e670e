"""ListTransactions (key 66): the transactional ids this broker coordinates.

v0..v1. Filters (each ignored when empty): ``state_filters`` (Kafka's state names; unknown names
are returned in ``unknown_state_filters``), ``producer_id_filters`` and (v1, KIP-994)
``duration_filter``: only transactions open for at least that many milliseconds. Answered
COORDINATOR_LOAD_IN_PROGRESS while a ``__transaction_state`` partition loads. A client lists a
cluster's transactions by asking every broker.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from odradek.coordinator.transaction.coordinator import STATE_NAMES
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, filter_authorized
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.list_transactions.v1 import request as list_transactions_v1

    from odradek.server.apis.request_types_txn import ListTransactionsRequest

API_KEY = ApiKey.LIST_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext[ListTransactionsRequest]) -> Any:
    req = ctx.request
    wanted = set(req.state_filters or ())
    unknown = tuple(sorted(wanted - set(STATE_NAMES.values())))
    # v1+ carry duration_filter (read by version number: only the version a client uses is imported)
    duration = (
        int(cast("list_transactions_v1.ListTransactionsRequest", req).duration_filter) if ctx.api_version >= 1 else -1
    )
    producer_ids = {int(p) for p in req.producer_id_filters or ()}
    error, found = ctx.services.transaction_coordinator.list(wanted, producer_ids, duration)
    visible = filter_authorized(
        ctx,
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        found,
        lambda m: m.transactional_id,
        log_if_denied=False,
    )
    states = tuple(
        ctx.make(
            "TransactionState",
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            transaction_state=STATE_NAMES[m.state],
        )
        for m in found
        if m.transactional_id in visible
    )
    return ctx.response(
        throttle_time=datetime.timedelta(0), error_code=error, unknown_state_filters=unknown, transaction_states=states
    )
