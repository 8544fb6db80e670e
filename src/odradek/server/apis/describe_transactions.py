"""DescribeTransactions (key 65): the state of transactional ids this broker coordinates.

v0. Per id: NOT_COORDINATOR (another broker coordinates it), COORDINATOR_LOAD_IN_PROGRESS,
TRANSACTIONAL_ID_NOT_FOUND, or its state with Kafka's names (Empty, Ongoing, PrepareCommit, ...),
timeout, the start time of the current (or last) transaction, producer id and epoch, and the
partitions of the open transaction. Difference from Kafka: an id that never started a transaction
(and an error entry) has start time 0, not -1, because kio, whose reader odradek's own tools use,
cannot decode a negative timestamp.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.coordinator.transaction.coordinator import STATE_NAMES
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.auth_helper import AclOperation, ResourceType, authorize
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types_txn import DescribeTransactionsRequest

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 0

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


async def handle(ctx: RequestContext[DescribeTransactionsRequest]) -> Any:
    txn = ctx.services.transaction_coordinator
    states = []
    for txn_id in ctx.request.transactional_ids:
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            error, meta = txn.describe(txn_id)
        else:
            error, meta = ErrorCode.transactional_id_authorization_failed, None
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions if meta is not None else ()):
            topics.setdefault(topic, []).append(partition)
        # the last transaction's start, as Kafka keeps it; 0 (not Kafka's -1) when none ever started:
        # the protocol library odradek's own tools decode with cannot read negative timestamps
        start = max(meta.start_ms, 0) if meta is not None else 0
        states.append(
            ctx.make(
                "TransactionState",
                error_code=error,
                transactional_id=txn_id,
                transaction_state=STATE_NAMES[meta.state] if meta is not None else "",
                transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms if meta is not None else 0),
                transaction_start_time=_EPOCH + datetime.timedelta(milliseconds=start),
                producer_id=meta.producer_id if meta is not None else -1,
                producer_epoch=meta.producer_epoch if meta is not None else -1,
                topics=tuple(ctx.make("TopicData", topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
            )
        )
    return ctx.response(throttle_time=datetime.timedelta(0), transaction_states=tuple(states))
