"""``odradek transactions find-hanging`` and ``abort`` (Kafka's kafka-transactions.sh verbs, KIP-664).

A *hanging* transaction is open on a partition (it holds the last stable offset back, so
read_committed consumers stop there) while no coordinator will ever end it: its producer wrote
transactional data without AddPartitionsToTxn, or the coordinator's state was lost.

- ``find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]``:
  DescribeProducers on the partitions' leaders; a producer whose transaction (first offset
  ``current_txn_start_offset``) has been open longer than ``--max-transaction-timeout`` minutes
  (default 15, Kafka's ``transaction.max.timeout.ms``) is checked against the coordinators:
  ListTransactions on every broker filtered by its producer id, then DescribeTransactions of each
  id found; an Ongoing transaction of that producer and epoch naming the partition is not hanging.
  Prints ``Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp
  Duration(min)`` for the rest.
- ``abort --topic T --partition P (--start-offset O | --producer-id I --producer-epoch E
  --coordinator-epoch C)``: writes an ABORT marker for that producer on the partition's leader
  (WriteTxnMarkers v1); with ``--start-offset`` the producer, its epoch and coordinator epoch come
  from DescribeProducers (the producer whose open transaction starts there). Errors of the leader
  (e.g. INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) end the command with status 1.

Call through ``odradek.cli.transactions.main``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from odradek.cli.common import CommandError
from odradek.client import write_txn_markers
from odradek.client.admin import AdminClient
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.storage.topic_partition import TopicPartition

__all__ = ["HANGING_HEADERS", "abort_transaction", "find_hanging", "leaders", "producer_states"]

HANGING_HEADERS = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
]


def leaders(admin: AdminClient, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
    """Leader broker id -> its partitions among ``tps`` (CommandError for a partition without one)."""
    out: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        leader = admin.cluster.leader_of(tp)
        if leader < 0:
            raise CommandError(f"{tp.topic}-{tp.partition} has no leader (or does not exist)")
        out.setdefault(leader, []).append(tp)
    return out


async def producer_states(admin: AdminClient, broker_id: int, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
    """DescribeProducers of ``tps`` on ``broker_id``: partition -> its ``active_producers``."""
    conn = await admin.cluster.connection(broker_id)
    rb = conn.builder(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    topics = tuple(rb.make("TopicRequest", name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())
    response: Any = await conn.send(rb(topics=topics))
    out: dict[TopicPartition, Any] = {}
    for topic in response.topics:
        for answer in topic.partitions:
            tp = TopicPartition(topic.name, int(answer.partition_index))
            error = ErrorCode(answer.error_code)
            if error != ErrorCode.none:
                raise CommandError(f"broker {broker_id} answered {error.name.upper()} for {tp.topic}-{tp.partition}")
            out[tp] = answer.active_producers
    return out


async def _ongoing_partitions(admin: AdminClient, producer_id: int, epoch: int) -> set[TopicPartition]:
    """The partitions of the Ongoing transaction a coordinator knows for ``producer_id``/``epoch``:
    each broker lists the ids it coordinates for that producer id and describes them."""
    for broker_id, *_ in (await admin.describe_cluster()).brokers:
        conn = await admin.cluster.connection(broker_id)
        rb = conn.builder(ApiKey.LIST_TRANSACTIONS, 0, 1)
        fields: dict[str, Any] = {"state_filters": (), "producer_id_filters": (producer_id,)}
        if conn.version_for(ApiKey.LIST_TRANSACTIONS, 0, 1) >= 1:
            fields["duration_filter"] = -1
        listed: Any = await conn.send(rb(**fields))
        txn_ids = tuple(sorted(s.transactional_id for s in listed.transaction_states))
        if not txn_ids:
            continue
        described: Any = await conn.send(conn.builder(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)(transactional_ids=txn_ids))
        for state in described.transaction_states:
            ongoing = ErrorCode(state.error_code) == ErrorCode.none and state.transaction_state == "Ongoing"
            if ongoing and (int(state.producer_id), int(state.producer_epoch)) == (producer_id, epoch):
                return {TopicPartition(t.topic, int(p)) for t in state.topics for p in t.partitions}
    return set()


async def find_hanging(
    admin: AdminClient, broker_id: int | None, topic: str | None, partition: int | None, max_timeout_min: int
) -> list[list[str]]:
    if broker_id is None and topic is None:
        raise CommandError("find-hanging needs --broker-id or --topic")
    await admin.cluster.refresh(None if topic is None else [topic])
    tps = [
        TopicPartition(name, p)
        for name, desc in admin.cluster.topics.items()
        if topic is None or name == topic
        for p in desc.partitions
        if partition is None or p == partition
    ]
    if topic is not None and not tps:
        raise CommandError(f"no partition {topic}{'' if partition is None else f'-{partition}'}")
    if broker_id is None:
        by_leader = leaders(admin, tps)
    else:  # the partitions it leads; leaderless ones elsewhere do not matter
        by_leader = {broker_id: [tp for tp in tps if admin.cluster.leader_of(tp) == broker_id]}
    now_ms = int(time.time() * 1000)
    rows = []
    for leader, led in sorted(by_leader.items()):
        if not led:
            continue
        for tp, producers in sorted((await producer_states(admin, leader, led)).items()):
            for p in producers:
                open_ms = now_ms - int(p.last_timestamp)
                if int(p.current_txn_start_offset) < 0 or open_ms < max_timeout_min * 60_000:
                    continue
                if tp in await _ongoing_partitions(admin, int(p.producer_id), int(p.producer_epoch)):
                    continue
                rows.append(
                    [
                        tp.topic,
                        str(tp.partition),
                        str(p.producer_id),
                        str(p.producer_epoch),
                        str(p.coordinator_epoch),
                        str(p.current_txn_start_offset),
                        str(p.last_timestamp),
                        str(open_ms // 60_000),
                    ]
                )
    return rows


async def abort_transaction(
    admin: AdminClient,
    tp: TopicPartition,
    start_offset: int | None,
    producer: tuple[int, int, int] | None,
) -> str:
    """Write an ABORT marker on ``tp``'s leader for the producer whose transaction starts at
    ``start_offset`` or for ``producer`` (id, epoch, coordinator epoch); the line to print."""
    await admin.cluster.refresh([tp.topic])
    leader = next(iter(leaders(admin, [tp])))
    if producer is None:
        states = (await producer_states(admin, leader, [tp]))[tp]
        match = [p for p in states if int(p.current_txn_start_offset) == start_offset]
        if not match:
            raise CommandError(f"no open transaction starts at offset {start_offset} of {tp.topic}-{tp.partition}")
        found = match[0]
        producer = (int(found.producer_id), int(found.producer_epoch), max(int(found.coordinator_epoch), 0))
    producer_id, epoch, coordinator_epoch = producer
    conn = await admin.cluster.connection(leader)
    version = conn.version_for(write_txn_markers.API_KEY, write_txn_markers.MIN_VERSION, write_txn_markers.MAX_VERSION)
    marker = write_txn_markers.TxnMarkerEntry(producer_id, epoch, coordinator_epoch, False, (tp,))
    response: Any = await conn.send(write_txn_markers.encode([marker], version))
    ((_, error),) = write_txn_markers.decode_response(response)[0]
    if error != ErrorCode.none:
        raise CommandError(f"aborting producer {producer_id} on {tp.topic}-{tp.partition}: {error.name.upper()}")
    return f"Aborted the transaction of producer {producer_id} (epoch {epoch}) on {tp.topic}-{tp.partition}"
