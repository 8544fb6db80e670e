"""Exactly-once writes of the ``odradek`` sink (``deliveryGuarantee=exactly-once``).

Each Spark task writes its rows in one Kafka transaction and, in the same transaction, records
that its micro-batch is done; a task that finds its micro-batch already recorded produces nothing.
So a micro-batch replayed after a failure (a killed driver restarts from its checkpoint and runs
the last batch again, Spark retries a task) never doubles the output that consumers with
``isolation.level=read_committed`` see, and an attempt that died half-way leaves nothing visible.

Per task (executor):

- identity: the query id (Spark's ``sql.streaming.queryId`` local property, stable across restarts
  from one checkpoint, or the ``queryId`` option), the micro-batch id (``streaming.sql.batchId``
  or the ``batchId`` option, e.g. from ``foreachBatch``) and the task's partition id;
- ``transactional.id = <transactionalIdPrefix>-<queryId>-<partition>``: ``init_transactions``
  fences an earlier attempt of the same task (zombie) and aborts what it left open;
- the *progress marker* is a consumer-group offset: group ``<transactional.id>``, partition 0 of the
  task's first output topic, offset = the last micro-batch written. It is read with
  ``require_stable`` (a pending transactional offset is waited for) before writing; an offset of
  this batch or later means the batch is already in Kafka and the task returns at once;
- otherwise: begin, produce every row, ``send_offsets_to_transaction`` with the new marker, commit.
  Any error aborts the transaction and fails the task (Spark retries it or fails the batch).

Leader changes: librdkafka re-sends produce requests to a partition's new leader (idempotent, so
without duplicates) and finds the transaction coordinator again when it moves, within
``message.timeout.ms`` (``kafka.delivery.timeout.ms``) and ``kafka.transaction.timeout.ms`` (60 s
by default). The transactional calls (``init_transactions``, the marker look-up,
``send_offsets_to_transaction``, ``commit_transaction``) are called again while they fail with a
retriable error, as librdkafka's documentation says to, until the transaction timeout has passed
since the task began; an error that requires an abort aborts and fails the task.

Assumptions, as for every exactly-once sink: a replayed micro-batch gives each task partition the
same rows (deterministic query, same input offsets, which Spark's checkpoint guarantees), and a
``queryId`` option is unique per checkpoint (a new checkpoint with an old ``queryId`` would find its
batches "done"). A task with no rows writes no marker. Runs in executor Python workers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from odradek.spark.driver import client_config, kafka_error_of, retry_until
from odradek.spark.options import SinkOptions
from odradek.spark.sink import Delivery, ProducedMessage, Row

__all__ = ["TaskIdentity", "produce_in_transaction", "task_identity", "transactional_id"]

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
TRANSACTION_TIMEOUT_S = 60.0
_RETRY_BACKOFF_S = 0.2

T = TypeVar("T")


def txn_retriable(exc: BaseException) -> bool:
    """librdkafka's rule for its transactional calls: call again when the error is retriable,
    unless the transaction must be aborted (``txn_requires_abort``)."""
    error = kafka_error_of(exc)
    if error is None or not (hasattr(error, "retriable") and error.retriable()):
        return False
    return not (hasattr(error, "txn_requires_abort") and error.txn_requires_abort())


def retry_retriable(
    what: str,
    call: Callable[[float], T],
    deadline: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call(timeout_s)`` again while :func:`txn_retriable` and before ``deadline`` (a ``clock``
    value); see :func:`odradek.spark.driver.retry_until`. Executor thread only."""
    return retry_until(
        what,
        call,
        deadline,
        transient=txn_retriable,
        backoff_s=_RETRY_BACKOFF_S,
        min_timeout_s=1.0,
        clock=clock,
        sleep=sleep,
    )


class TaskIdentity:
    """(query id, micro-batch id, task partition id) of the running task."""

    def __init__(self, query_id: str, batch_id: int, partition_id: int) -> None:
        self.query_id = query_id
        self.batch_id = batch_id
        self.partition_id = partition_id


def task_identity(options: SinkOptions) -> TaskIdentity:
    """The running task's identity; ``ValueError`` when Spark does not say which micro-batch this
    is and the options do not either (a batch ``df.write`` without ``batchId``)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query_id = options.query_id or (ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None)
    batch = options.batch_id
    if batch is None and ctx is not None:
        prop = ctx.getLocalProperty(BATCH_ID_PROPERTY)
        batch = int(prop) if prop is not None else None
    if query_id is None or batch is None or ctx is None:
        raise ValueError(
            "deliveryGuarantee=exactly-once needs a streaming query (writeStream), or the 'queryId' and "
            "'batchId' options (e.g. in foreachBatch)"
        )
    return TaskIdentity(query_id, batch, ctx.partitionId())


def transactional_id(options: SinkOptions, identity: TaskIdentity) -> str:
    return f"{options.transactional_id_prefix}-{identity.query_id}-{identity.partition_id}"


def produce_in_transaction(options: SinkOptions, produced: Iterator[Row], conf: dict[str, Any]) -> ProducedMessage:
    """Write ``produced`` in one transaction unless this micro-batch is already recorded."""
    from confluent_kafka import Consumer, TopicPartition

    identity = task_identity(options)
    first = next(produced, None)
    if first is None:
        return ProducedMessage({})
    txn_id = transactional_id(options, identity)
    conf = {**conf, "transactional.id": txn_id, "enable.idempotence": True, "acks": "all"}
    conf.setdefault("transaction.timeout.ms", int(TRANSACTION_TIMEOUT_S * 1000))
    # librdkafka: message.timeout.ms may not exceed transaction.timeout.ms
    conf["message.timeout.ms"] = min(int(conf["message.timeout.ms"]), int(conf["transaction.timeout.ms"]))
    delivery = Delivery(options, conf)
    producer = delivery.producer
    deadline = time.monotonic() + int(conf["transaction.timeout.ms"]) / 1000
    # fences and aborts an earlier attempt of this task
    retry_retriable("init_transactions", producer.init_transactions, deadline)
    # the marker's consumer: the sink's kafka.* options (security, timeouts) as a consumer takes them
    consumer_conf = client_config(options.client, "consumer")
    consumer_conf.update({"group.id": txn_id, "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer = Consumer(consumer_conf)
    try:
        marker = TopicPartition(first[0], 0)
        committed = retry_retriable(
            "the progress marker look-up", lambda t: consumer.committed([marker], timeout=t)[0].offset, deadline
        )
        if committed >= identity.batch_id:
            log.info("%s: micro-batch %d already written (marker %d)", txn_id, identity.batch_id, committed)
            return ProducedMessage({}, replayed=True)
        producer.begin_transaction()
        try:
            delivery.produce_all(_chain(first, produced))
            delivery.flush()
            note = f"odradek-sink query {identity.query_id} batch {identity.batch_id}"
            done = TopicPartition(first[0], 0, identity.batch_id, metadata=note)
            group = consumer.consumer_group_metadata()
            retry_retriable(
                "send_offsets_to_transaction",
                lambda t: producer.send_offsets_to_transaction([done], group, t),
                deadline,
            )
            retry_retriable("commit_transaction", producer.commit_transaction, deadline)
        except BaseException:
            try:
                producer.abort_transaction(TRANSACTION_TIMEOUT_S)
            except Exception as exc:  # the task fails with the first error; the next attempt fences
                log.warning("%s: abort failed: %s", txn_id, exc)
            raise
    finally:
        consumer.close()
    return ProducedMessage(dict(delivery.counts))


def _chain(first: Row, rest: Iterator[Row]) -> Iterator[Row]:
    yield first
    yield from rest
