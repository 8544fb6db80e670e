"""AddPartitionsToTxn (key 24): partitions join the producer's transaction before it writes to them.

v0..v5. v0-v3 carry one transaction (``v3_and_below_*``) and answer per topic-partition; v4+
(KIP-890, from brokers) carry a batch of transactions, each possibly ``verify_only`` (answered
without changing anything: NONE when the partitions are in the ongoing transaction, else
INVALID_TXN_STATE). Every partition of a transaction gets the transaction's error (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED, which is INVALID_PRODUCER_EPOCH before v2).

The answer, one entry per partition named (thousands are possible), is built in slices
(:class:`odradek.replication.pacing.Pacer`), as are the transactions of a v4+ batch.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.replication.pacing import Pacer
from odradek.server.apis.txn_support import for_version
from odradek.server.auth_helper import AclOperation, ResourceType, authorize, authorize_cluster, filter_authorized
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from kio.schema.add_partitions_to_txn.v0 import request as add_partitions_to_txn_v0
    from kio.schema.add_partitions_to_txn.v4 import request as add_partitions_to_txn_v4

    from odradek.server.apis.request_types import AddPartitionsToTxnRequest

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 5

_BATCHED = 4
"""v4+ carry ``transactions``; v0..v3 one transaction, in the ``v3_and_below_*`` fields. The
request is read by version number, so that only the version a client uses is imported."""


class _Topic(Protocol):
    """A topic of the request (every version's ``AddPartitionsToTxnTopic``)."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[int]: ...


async def _one(
    ctx: RequestContext[AddPartitionsToTxnRequest],
    txn_id: str,
    pid: int,
    epoch: int,
    topics: Sequence[_Topic],
    verify: bool,
) -> tuple[Any, ...]:
    refused = _refused_topics(ctx, txn_id, topics)
    error = ErrorCode.none
    if refused is None:
        partitions = [(str(t.name), int(p)) for t in topics for p in t.partitions]
        txn = ctx.services.transaction_coordinator
        error = await txn.add_partitions(txn_id, pid, epoch, partitions, verify_only=verify)
        error = for_version(error, ctx.api_version, 2)
    pacer = Pacer()
    results = []
    for t in topics:
        await pacer.step()
        topic_error = error if refused is None else refused.get(t.name, ErrorCode.operation_not_attempted)
        by_partition = tuple(
            ctx.make("AddPartitionsToTxnPartitionResult", partition_index=int(p), partition_error_code=topic_error)
            for p in t.partitions
        )
        results.append(ctx.make("AddPartitionsToTxnTopicResult", name=t.name, results_by_partition=by_partition))
    return tuple(results)


def _refused_topics(
    ctx: RequestContext[AddPartitionsToTxnRequest], txn_id: str, topics: Sequence[_Topic]
) -> dict[str, ErrorCode] | None:
    """Kafka's checks before anything is added: WRITE on the transactional id (else every
    partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic (TOPIC_AUTHORIZATION_FAILED)
    and the topic known (UNKNOWN_TOPIC_OR_PARTITION); the other topics of a refused request are
    answered OPERATION_NOT_ATTEMPTED. None: nothing refused."""
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return {t.name: ErrorCode.transactional_id_authorization_failed for t in topics}
    writable = filter_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, topics, lambda t: t.name)
    cache = ctx.services.metadata_cache
    refused = {
        t.name: ErrorCode.topic_authorization_failed if t.name not in writable else ErrorCode.unknown_topic_or_partition
        for t in topics
        if t.name not in writable or cache.topic(t.name) is None
    }
    return refused or None


async def handle(ctx: RequestContext[AddPartitionsToTxnRequest]) -> Any:
    if ctx.api_version < _BATCHED:
        one = cast("add_partitions_to_txn_v0.AddPartitionsToTxnRequest", ctx.request)
        results = await _one(
            ctx,
            one.v3_and_below_transactional_id,
            int(one.v3_and_below_producer_id),
            int(one.v3_and_below_producer_epoch),
            one.v3_and_below_topics,
            False,
        )
        return ctx.response(throttle_time=datetime.timedelta(0), results_by_topic_v3_and_below=results)
    req = cast("add_partitions_to_txn_v4.AddPartitionsToTxnRequest", ctx.request)
    verify_only = all(bool(t.verify_only) for t in req.transactions)
    if not verify_only and not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return ctx.response(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=(),
        )
    by_txn = []
    pacer = Pacer()
    for t in req.transactions:
        await pacer.step()
        topics = await _one(
            ctx, t.transactional_id, int(t.producer_id), int(t.producer_epoch), t.topics, bool(t.verify_only)
        )
        by_txn.append(ctx.make("AddPartitionsToTxnResult", transactional_id=t.transactional_id, topic_results=topics))
    return ctx.response(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, results_by_transaction=tuple(by_txn)
    )
