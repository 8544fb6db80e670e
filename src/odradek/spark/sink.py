"""The ``odradek`` sink: ``df.write`` / ``df.writeStream`` ``.format("odradek")`` produce to Kafka.

Columns, as Spark's Kafka sink (matched by exact name; other columns are ignored):

=============  ================  ==========================================================
``value``      string or binary  required; null produces a tombstone
``key``        string or binary  optional; strings are UTF-8 encoded
``topic``      string            required unless the ``topic`` option is set, which wins
``partition``  int               optional; null or absent: the partitioner picks (murmur2 on
                                 the key by default, as Java clients, so keys land where a
                                 Java producer would put them)
``headers``    array<struct<key: string, value: binary>>  optional
=============  ================  ==========================================================

Who runs what: ``make_writer``/``make_stream_writer`` run in the driver's planner worker
(validate options and columns, check that the cluster answers: an unreachable cluster fails
there, fast); ``write`` runs in executor workers on Arrow record batches (one confluent-kafka
``Producer`` per task, flushed before the task returns); ``commit``/``abort`` run on the driver.

Delivery is **at-least-once** by default, like Spark's Kafka sink: a task retried after a partial
write, or a micro-batch replayed after a failure, produces its rows again. ``abort`` cannot take
back rows a successful task already produced. With ``deliveryGuarantee=exactly-once`` each task
writes in a Kafka transaction that also records its micro-batch as done, and skips a micro-batch
already recorded (:mod:`odradek.spark.transactional`): readers with
``isolation.level=read_committed`` see every row exactly once across task retries, replayed
micro-batches and driver restarts. Save mode: ``append`` (PySpark rejects ``errorifexists`` and ``ignore``
for Python sinks; ``overwrite`` is refused here, as Kafka cannot truncate a topic).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, DataType, IntegerType, StringType, StructField, StructType

from odradek.spark.driver import DriverClient, client_config
from odradek.spark.options import SinkOptions, parse_sink_options

__all__ = [
    "Delivery",
    "OdradekArrowWriter",
    "OdradekStreamArrowWriter",
    "ProducedMessage",
    "make_stream_writer",
    "make_writer",
    "producer_conf",
    "rows",
]

log = logging.getLogger(__name__)

NULL_TOPIC_MESSAGE = (
    "The Kafka message data sent to the producer contains a null topic. "
    "Use the `topic` option for setting a default topic."
)
_HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
_PARTITION_UNASSIGNED = -1


@dataclass
class ProducedMessage(WriterCommitMessage):
    """What one task produced: record count per ``(topic, partition)``."""

    counts: dict[tuple[str, int], int] = field(default_factory=dict)
    replayed: bool = False
    """exactly-once: the task found its micro-batch already committed and produced nothing."""

    @property
    def records(self) -> int:
        return sum(self.counts.values())


def _same(actual: DataType, expected: DataType) -> bool:
    """Type equality ignoring nullability (Spark's ``sameType``)."""
    if isinstance(actual, ArrayType) and isinstance(expected, ArrayType):
        return _same(actual.elementType, expected.elementType)
    if isinstance(actual, StructType) and isinstance(expected, StructType):
        return len(actual.fields) == len(expected.fields) and all(
            a.name == e.name and _same(a.dataType, e.dataType)
            for a, e in zip(actual.fields, expected.fields, strict=True)
        )
    return type(actual) is type(expected)


def validate_columns(schema: StructType, topic_option: str | None) -> tuple[str, ...]:
    """Check the input columns as Spark's ``KafkaWriter.validateQuery`` does; returns the
    Kafka columns present. Raises ``ValueError`` with Spark's messages."""
    by_name = {f.name: f.dataType for f in schema.fields}
    rules: list[tuple[str, tuple[DataType, ...]]] = [
        ("topic", (StringType(),)),
        ("key", (StringType(), BinaryType())),
        ("value", (StringType(), BinaryType())),
        ("headers", (_HEADERS_TYPE,)),
        ("partition", (IntegerType(),)),
    ]
    if topic_option is None and "topic" not in by_name:
        raise ValueError(
            "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
        )
    if "value" not in by_name:
        raise ValueError("Required attribute 'value' not found")
    for name, allowed in rules:
        if name == "topic" and topic_option is not None:
            continue
        actual = by_name.get(name)
        if actual is not None and not any(_same(actual, a) for a in allowed):
            wanted = " or ".join(a.simpleString() for a in allowed)
            raise ValueError(f"{name} attribute unsupported type {actual.simpleString()}. {name} must be a(n) {wanted}")
    present = {"key", "value", "headers", "partition"} | ({"topic"} if topic_option is None else set())
    return tuple(sorted(n for n in present if n in by_name))


def _prepare(raw: Mapping[str, str], schema: StructType, overwrite: bool) -> tuple[SinkOptions, tuple[str, ...]]:
    if overwrite:
        raise ValueError("Save mode Overwrite not allowed for Kafka. Allowed save mode is Append.")
    options = parse_sink_options(raw)
    columns = validate_columns(schema, options.topic)
    client = DriverClient(options.client)
    try:
        client.check_connectivity()
    finally:
        client.close()
    return options, columns


def make_writer(raw: Mapping[str, str], schema: StructType, overwrite: bool) -> OdradekArrowWriter:
    """Batch writer for ``df.write.format("odradek")`` (driver, planner worker)."""
    options, columns = _prepare(raw, schema, overwrite)
    return OdradekArrowWriter(options, columns)


def make_stream_writer(raw: Mapping[str, str], schema: StructType, overwrite: bool) -> OdradekStreamArrowWriter:
    """Streaming writer for ``df.writeStream.format("odradek")`` (driver)."""
    options, columns = _prepare(raw, schema, overwrite)
    return OdradekStreamArrowWriter(options, columns)


def producer_conf(options: SinkOptions) -> dict[str, Any]:
    conf = client_config(options.client, "producer")
    conf.setdefault("partitioner", "murmur2_random")
    conf.setdefault("linger.ms", 5)
    conf.setdefault("message.timeout.ms", 120_000)
    return conf


Row = tuple[str, dict[str, Any]]
"""A row to produce: topic and the keyword arguments of ``Producer.produce``."""


def rows(options: SinkOptions, columns: tuple[str, ...], batches: Iterator[Any]) -> Iterator[Row]:
    """``(topic, produce keyword arguments)`` for every row of the Arrow ``batches``; raises
    ``ValueError`` for a row without a topic (Spark's message)."""
    for batch in batches:
        data = {name: batch.column(name).to_pylist() for name in columns}
        topics = data.get("topic")
        keys = data.get("key")
        values = data["value"]
        headers = data.get("headers")
        partitions = data.get("partition")
        for i in range(batch.num_rows):
            topic = options.topic if options.topic is not None else topics[i] if topics else None
            if topic is None:
                raise ValueError(NULL_TOPIC_MESSAGE)
            key = keys[i] if keys else None
            value = values[i]
            kwargs: dict[str, Any] = {
                "key": key.encode() if isinstance(key, str) else key,
                "value": value.encode() if isinstance(value, str) else value,
                "partition": partitions[i] if partitions and partitions[i] is not None else _PARTITION_UNASSIGNED,
            }
            if headers and headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            yield topic, kwargs


class Delivery:
    """One task's producer: produces rows, counts deliveries per ``(topic, partition)``, raises on
    the first delivery error and waits for everything to be delivered (:meth:`flush`)."""

    def __init__(self, options: SinkOptions, conf: dict[str, Any]) -> None:
        from confluent_kafka import Producer

        self.options = options
        self.timeout_s = float(conf["message.timeout.ms"]) / 1000 + 5
        self.producer = Producer(conf)
        self.counts: Counter[tuple[str, int]] = Counter()
        self.errors: list[str] = []

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(f"{message.topic()}: {error.str()}")
        else:
            self.counts[(message.topic(), message.partition())] += 1

    def produce_all(self, produced: Iterable[Row]) -> None:
        for n, (topic, kwargs) in enumerate(produced):
            while True:
                try:
                    self.producer.produce(topic, on_delivery=self._on_delivery, **kwargs)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            if self.errors:
                raise RuntimeError(f"Failed to produce to Kafka: {self.errors[0]}")
            if n % 1000 == 999:
                self.producer.poll(0)

    def flush(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while self.producer.flush(1.0) > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Records not delivered to '{self.options.client.bootstrap_servers}' within {self.timeout_s}s"
                )
        if self.errors:
            first = self.errors[0]
            raise RuntimeError(f"Failed to produce {len(self.errors)} record(s) to Kafka; first error: {first}")


def produce_batches(options: SinkOptions, columns: tuple[str, ...], batches: Iterator[Any]) -> ProducedMessage:
    """Produce every row of ``batches`` (executor); raise on the first delivery error."""
    if options.exactly_once:
        from odradek.spark.transactional import produce_in_transaction

        return produce_in_transaction(options, rows(options, columns, batches), producer_conf(options))
    delivery = Delivery(options, producer_conf(options))
    delivery.produce_all(rows(options, columns, batches))
    delivery.flush()
    return ProducedMessage(dict(delivery.counts))


def _summary(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    produced = [m for m in messages if isinstance(m, ProducedMessage)]
    replayed = sum(m.replayed for m in produced)
    if replayed:
        log.info("%d task(s) found their micro-batch already written (exactly-once) and produced nothing", replayed)
    return sum(m.records for m in produced), len(messages) - len(produced)


class OdradekArrowWriter(DataSourceArrowWriter):
    """Batch sink: each task produces its rows; ``commit`` only reports (at-least-once)."""

    def __init__(self, options: SinkOptions, columns: tuple[str, ...]) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return produce_batches(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        records, _ = _summary(messages)
        log.info("write committed: %d records produced", records)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        records, failed = _summary(messages)
        log.warning("write aborted (%d failed tasks); %d records already produced stay in Kafka", failed, records)


class OdradekStreamArrowWriter(DataSourceStreamArrowWriter):
    """Streaming sink: each micro-batch's tasks produce their rows (at-least-once)."""

    def __init__(self, options: SinkOptions, columns: tuple[str, ...]) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return produce_batches(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        records, _ = _summary(messages)
        log.info("micro-batch %d committed: %d records produced", batchId, records)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        records, failed = _summary(messages)
        log.warning(
            "micro-batch %d aborted (%d failed tasks); %d records already produced stay in Kafka",
            batchId,
            failed,
            records,
        )
