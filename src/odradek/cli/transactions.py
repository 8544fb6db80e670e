"""``odradek transactions``: list, describe, find hanging and abort transactions (Kafka's kafka-transactions.sh).

    odradek transactions --bootstrap-server B list
    odradek transactions --bootstrap-server B describe --transactional-id ID
    odradek transactions --bootstrap-server B describe-producers --topic T --partition P [--broker-id N]
    odradek transactions --bootstrap-server B find-hanging (--broker-id N | --topic T [--partition P])
                                              [--max-transaction-timeout MINUTES]
    odradek transactions --bootstrap-server B abort --topic T --partition P (--start-offset O |
                                              --producer-id I --producer-epoch E --coordinator-epoch C)

``list`` sends ListTransactions to every live broker and prints one row per transactional id:
``TransactionalId Coordinator ProducerId TransactionState``. ``describe`` finds the id's
coordinator (FindCoordinator, key type 1) and prints its DescribeTransactions answer:
``CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState TransactionTimeoutMs
CurrentTransactionStartTimeMs TransactionDurationMs TopicPartitions`` (None for the start time and
duration when no transaction is open). ``describe-producers`` sends DescribeProducers to the
partition's leader (or to ``--broker-id``) and prints one row per active producer:
``ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp
CurrentTransactionStartOffset`` (None where no transaction is open). ``find-hanging`` and
``abort``: see :mod:`odradek.cli.transactions_hanging`. Columns are padded as Kafka's tool pads them. Exit status
0, 1 for an error answer (e.g. TRANSACTIONAL_ID_NOT_FOUND) or an unreachable broker, 2 for a
usage error.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from odradek.cli.common import ArgumentParser, CommandError, add_command_config, client_security, parse_args, run, table
from odradek.cli.transactions_hanging import (
    HANGING_HEADERS,
    abort_transaction,
    find_hanging,
    leaders,
    producer_states,
)
from odradek.client.admin import AdminClient
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.storage.topic_partition import TopicPartition

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]
PRODUCER_HEADERS = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
]


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek transactions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    add_command_config(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the transactional ids of every broker")
    describe = sub.add_parser("describe", help="describe one transactional id")
    describe.add_argument("--transactional-id", required=True)
    producers = sub.add_parser("describe-producers", help="the active producers of one partition")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    producers.add_argument("--broker-id", type=int, help="ask this broker instead of the partition's leader")
    hanging = sub.add_parser("find-hanging", help="open transactions no coordinator will end")
    hanging.add_argument("--broker-id", type=int, help="the partitions this broker leads")
    hanging.add_argument("--topic")
    hanging.add_argument("--partition", type=int)
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, help="minutes (default 15)")
    abort = sub.add_parser("abort", help="write an ABORT marker for a hanging transaction")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="the first offset of the open transaction")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    return parser


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """kafka-transactions.sh's columns: padded to the widest cell, no minimum."""
    return table(headers, rows, [0] * (len(headers) - 1) + [None])


async def list_transactions(admin: AdminClient) -> list[list[str]]:
    rows = []
    for broker_id, *_ in (await admin.describe_cluster()).brokers:
        conn = await admin.cluster.connection(broker_id)
        rb = conn.builder(ApiKey.LIST_TRANSACTIONS, 0, 1)
        fields: dict[str, Any] = {"state_filters": (), "producer_id_filters": ()}
        if conn.version_for(ApiKey.LIST_TRANSACTIONS, 0, 1) >= 1:
            fields["duration_filter"] = -1
        response: Any = await conn.send(rb(**fields))
        if ErrorCode(response.error_code) != ErrorCode.none:
            raise CommandError(f"broker {broker_id} answered {ErrorCode(response.error_code).name.upper()}")
        for s in response.transaction_states:
            rows.append([s.transactional_id, str(broker_id), str(s.producer_id), s.transaction_state])
    return sorted(rows)


async def describe_transaction(admin: AdminClient, txn_id: str) -> list[str]:
    conn = await admin.cluster.any_connection()
    rb = conn.builder(ApiKey.FIND_COORDINATOR, 4, 4)
    found: Any = await conn.send(rb(key_type=1, coordinator_keys=(txn_id,)))
    entry = found.coordinators[0]
    if ErrorCode(entry.error_code) != ErrorCode.none:
        raise CommandError(f"cannot find the coordinator of {txn_id}: {ErrorCode(entry.error_code).name.upper()}")
    coordinator = int(entry.node_id)
    conn = await admin.cluster.connection(coordinator)
    rb = conn.builder(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
    response: Any = await conn.send(rb(transactional_ids=(txn_id,)))
    state = response.transaction_states[0]
    error = ErrorCode(state.error_code)
    if error != ErrorCode.none:
        raise CommandError(f"transactional id {txn_id}: {error.name.upper()}")
    start = int(state.transaction_start_time.timestamp() * 1000)
    open_ = start > 0 and state.transaction_state in ("Ongoing", "PrepareCommit", "PrepareAbort")
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    return [
        str(coordinator),
        txn_id,
        str(state.producer_id),
        str(state.producer_epoch),
        state.transaction_state,
        str(int(state.transaction_timeout.total_seconds() * 1000)),
        str(start) if open_ else "None",
        str(int(time.time() * 1000) - start) if open_ else "None",
        partitions,
    ]


async def describe_producers(admin: AdminClient, topic: str, partition: int, broker_id: int | None) -> list[list[str]]:
    tp = TopicPartition(topic, partition)
    if broker_id is None:
        await admin.cluster.refresh([topic])
        broker_id = next(iter(leaders(admin, [tp])))
    return [
        [
            str(p.producer_id),
            str(p.producer_epoch),
            str(p.coordinator_epoch),
            str(p.last_sequence),
            str(p.last_timestamp),
            str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None",
        ]
        for p in (await producer_states(admin, broker_id, [tp]))[tp]
    ]


async def abort(admin: AdminClient, args: Any) -> str:
    explicit = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    given = [v is not None for v in explicit]
    if (args.start_offset is not None and any(given)) or (args.start_offset is None and not all(given)):
        raise CommandError("abort takes --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch")
    producer = None if args.start_offset is not None else (int(explicit[0]), int(explicit[1]), int(explicit[2]))
    return await abort_transaction(admin, TopicPartition(args.topic, args.partition), args.start_offset, producer)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args

    async def go() -> int:
        async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
            if args.command == "list":
                lines = _table(LIST_HEADERS, await list_transactions(admin))
            elif args.command == "describe":
                lines = _table(DESCRIBE_HEADERS, [await describe_transaction(admin, args.transactional_id)])
            elif args.command == "describe-producers":
                rows = await describe_producers(admin, args.topic, args.partition, args.broker_id)
                lines = _table(PRODUCER_HEADERS, rows)
            elif args.command == "find-hanging":
                rows = await find_hanging(
                    admin, args.broker_id, args.topic, args.partition, args.max_transaction_timeout
                )
                lines = _table(HANGING_HEADERS, rows)
            else:
                lines = [await abort(admin, args)]
        print("\n".join(lines))
        return 0

    return run("odradek transactions", go)
