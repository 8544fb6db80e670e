"""The consume-transform-produce workload: Kafka's exactly-once loop, whose reads give the
checker write-read dependencies between committed transactions (G1c).

:class:`TransformWorkload` consumes, read_committed, the transactional workload's topic (``source``)
and its own output topic (``sink``) in one consumer group; for each poll it begins a transaction,
writes one derived value (``<name>:<seq>``) to ``sink`` for every record of ``source`` (to the
same partition number modulo the sink's partitions; records of ``sink`` are read, not derived
again, so the loop does not feed itself), adds the consumer's positions with
``send_offsets_to_transaction`` and commits. The transaction's ``reads`` are every value the poll
returned. On an abort (or a transaction whose outcome is unknown) the consumer goes back to the
group's committed offsets, as Kafka's exactly-once applications do, and a new poll session starts.
One transaction at a time, on its own thread; the producer's ``transactional.id`` is its own.
"""

from __future__ import annotations

import contextlib
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from chaos.history import History, Poll, Send, Txn
from chaos.workloads import Worker, client_config, read_committed_member, records_of

__all__ = ["TransformWorkload"]


class TransformWorkload(Worker):
    def __init__(
        self, history: History, bootstrap: str, source: str, sink: str, sink_partitions: int, name: str = "x"
    ) -> None:
        super().__init__(f"transform-{name}")
        self.history, self.bootstrap = history, bootstrap
        self.source, self.sink, self.sink_partitions, self.base_name = source, sink, sink_partitions, name
        self.group = f"chaos-transform-{name}"
        self.instance = 0
        self.session = 0
        self.n = 0

    def _producer(self) -> tuple[Producer, str]:
        self.instance += 1
        producer = Producer(
            client_config(
                self.bootstrap,
                **{
                    "transactional.id": f"chaos-transform-{self.base_name}",
                    "transaction.timeout.ms": 20000,
                    "message.timeout.ms": 20000,
                    "request.timeout.ms": 5000,
                },
            )
        )
        producer.init_transactions(30)
        return producer, f"{self.base_name}.{self.instance}"

    def _consumer(self) -> Consumer:
        consumer = read_committed_member(self.bootstrap, self.group)

        def assigned(_consumer: Any, _partitions: Any) -> None:
            self.session += 1

        consumer.subscribe([self.source, self.sink], on_assign=assigned, on_revoke=assigned)
        return consumer

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the group's committed offsets (the beginning where none is committed)."""
        self.session += 1
        committed = consumer.committed(consumer.assignment(), timeout=10)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def run(self) -> None:
        consumer = self._consumer()
        producer: Producer | None = None
        name = ""
        seq = 0
        try:
            while not self.stopping.is_set():
                if producer is None:
                    try:
                        producer, name = self._producer()
                    except KafkaException as exc:
                        self.errors.append(f"init: {exc}")
                        self.stopping.wait(1.0)
                        continue
                    seq = 0
                try:
                    records = records_of(consumer.consume(200, 0.5))
                except KafkaException as exc:
                    self.errors.append(str(exc))
                    continue
                if not records:
                    continue
                self.history.polls.append(Poll(self.name, self.session, self.history.now(), records))
                txn = Txn(f"{name}#{self.n}", t_start=self.history.now(), reads=[r[3] for r in records])
                self.n += 1
                self.history.txns.append(txn)
                try:
                    seq = self._transaction(producer, consumer, txn, records, name, seq)
                except KafkaException as exc:
                    error: KafkaError = exc.args[0]
                    self.errors.append(str(error))
                    if error.txn_requires_abort():
                        with contextlib.suppress(KafkaException):
                            producer.abort_transaction(20)
                            txn.outcome = "aborted"
                            txn.t_end = self.history.now()
                    else:
                        producer = None  # a new instance fences this one; the outcome stays unknown
                    with contextlib.suppress(KafkaException):
                        self._rewind(consumer)
        finally:
            with contextlib.suppress(Exception):
                consumer.close()

    def _transaction(
        self,
        producer: Producer,
        consumer: Consumer,
        txn: Txn,
        records: tuple[tuple[str, int, int, str], ...],
        name: str,
        seq: int,
    ) -> int:
        """Write the derived values of ``records``, commit them with the consumer's positions;
        the producer's next sequence number."""
        history = self.history
        producer.begin_transaction()
        for topic, partition, _offset, _value in records:
            if topic != self.source:
                continue
            value = f"{name}:{seq}"
            seq += 1
            sink_partition = partition % self.sink_partitions
            txn.values.append(value)
            history.sends.append(Send(value, self.sink, sink_partition, history.now()))
            producer.produce(self.sink, value.encode(), partition=sink_partition)
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 20)
        txn.t_end_start = history.now()
        producer.commit_transaction(20)
        txn.outcome = "committed"
        txn.t_end = history.now()
        return seq
