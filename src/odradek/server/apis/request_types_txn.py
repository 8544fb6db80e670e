"""The request bodies of the transaction and producer-state APIs the handlers of
:mod:`odradek.server.apis` serve, as unions over the generated request classes of each API's served
versions (``MIN_VERSION``..``MAX_VERSION``), as in :mod:`odradek.server.apis.request_types`.

Handlers import this module for annotations only (under ``TYPE_CHECKING``).
"""

from __future__ import annotations

from typing import TypeAlias

from kio.schema.add_offsets_to_txn import v0 as add_offsets_to_txn_v0
from kio.schema.add_offsets_to_txn import v1 as add_offsets_to_txn_v1
from kio.schema.add_offsets_to_txn import v2 as add_offsets_to_txn_v2
from kio.schema.add_offsets_to_txn import v3 as add_offsets_to_txn_v3
from kio.schema.add_offsets_to_txn import v4 as add_offsets_to_txn_v4
from kio.schema.describe_producers import v0 as describe_producers_v0
from kio.schema.describe_transactions import v0 as describe_transactions_v0
from kio.schema.end_txn import v0 as end_txn_v0
from kio.schema.end_txn import v1 as end_txn_v1
from kio.schema.end_txn import v2 as end_txn_v2
from kio.schema.end_txn import v3 as end_txn_v3
from kio.schema.end_txn import v4 as end_txn_v4
from kio.schema.init_producer_id import v0 as init_producer_id_v0
from kio.schema.init_producer_id import v1 as init_producer_id_v1
from kio.schema.init_producer_id import v2 as init_producer_id_v2
from kio.schema.init_producer_id import v3 as init_producer_id_v3
from kio.schema.init_producer_id import v4 as init_producer_id_v4
from kio.schema.init_producer_id import v5 as init_producer_id_v5
from kio.schema.list_transactions import v0 as list_transactions_v0
from kio.schema.list_transactions import v1 as list_transactions_v1
from kio.schema.txn_offset_commit import v0 as txn_offset_commit_v0
from kio.schema.txn_offset_commit import v1 as txn_offset_commit_v1
from kio.schema.txn_offset_commit import v2 as txn_offset_commit_v2
from kio.schema.txn_offset_commit import v3 as txn_offset_commit_v3
from kio.schema.txn_offset_commit import v4 as txn_offset_commit_v4

__all__ = [
    "AddOffsetsToTxnRequest",
    "DescribeProducersRequest",
    "DescribeTransactionsRequest",
    "EndTxnRequest",
    "InitProducerIdRequest",
    "ListTransactionsRequest",
    "TxnOffsetCommitRequest",
]

InitProducerIdRequest: TypeAlias = (
    init_producer_id_v0.InitProducerIdRequest
    | init_producer_id_v1.InitProducerIdRequest
    | init_producer_id_v2.InitProducerIdRequest
    | init_producer_id_v3.InitProducerIdRequest
    | init_producer_id_v4.InitProducerIdRequest
    | init_producer_id_v5.InitProducerIdRequest
)
"""init_producer_id v0..v5."""

AddOffsetsToTxnRequest: TypeAlias = (
    add_offsets_to_txn_v0.AddOffsetsToTxnRequest
    | add_offsets_to_txn_v1.AddOffsetsToTxnRequest
    | add_offsets_to_txn_v2.AddOffsetsToTxnRequest
    | add_offsets_to_txn_v3.AddOffsetsToTxnRequest
    | add_offsets_to_txn_v4.AddOffsetsToTxnRequest
)
"""add_offsets_to_txn v0..v4."""

EndTxnRequest: TypeAlias = (
    end_txn_v0.EndTxnRequest
    | end_txn_v1.EndTxnRequest
    | end_txn_v2.EndTxnRequest
    | end_txn_v3.EndTxnRequest
    | end_txn_v4.EndTxnRequest
)
"""end_txn v0..v4."""

TxnOffsetCommitRequest: TypeAlias = (
    txn_offset_commit_v0.TxnOffsetCommitRequest
    | txn_offset_commit_v1.TxnOffsetCommitRequest
    | txn_offset_commit_v2.TxnOffsetCommitRequest
    | txn_offset_commit_v3.TxnOffsetCommitRequest
    | txn_offset_commit_v4.TxnOffsetCommitRequest
)
"""txn_offset_commit v0..v4."""

DescribeTransactionsRequest: TypeAlias = describe_transactions_v0.DescribeTransactionsRequest
"""describe_transactions v0."""

ListTransactionsRequest: TypeAlias = (
    list_transactions_v0.ListTransactionsRequest | list_transactions_v1.ListTransactionsRequest
)
"""list_transactions v0..v1."""

DescribeProducersRequest: TypeAlias = describe_producers_v0.DescribeProducersRequest
"""describe_producers v0."""
