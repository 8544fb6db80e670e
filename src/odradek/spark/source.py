"""The ``odradek`` PySpark data source: Kafka's options and rows on Spark's Python data source API.

``spark.read.format("odradek")`` / ``readStream`` / ``write`` / ``writeStream`` behave like
Spark's ``format("kafka")`` (see ``docs/spark.md`` for the option table). Requires
pyspark >= 4.2 (admission control for streaming reads) and pyarrow.

Who runs what (Spark's process model for Python sources):

=====================================  =========================================================
``OdradekDataSource.schema``           planner worker on the driver, at ``load()``: validates
                                       the options common to batch and streaming reads
``reader`` / ``partitions``            planner worker: resolves offsets with a
                                       :class:`~odradek.spark.driver.DriverClient`, one
                                       :class:`KafkaInputPartition` per Spark task
``streamReader`` and its offset calls  one long-lived stream-runner worker per query run: a
                                       :class:`~odradek.spark.planning.StreamPlanner` keeps the
                                       state (initial offset, AvailableNow target, ...)
``read``                               executor workers: :func:`~odradek.spark.fetch.read_range`
                                       yields Arrow record batches
``writer`` / ``streamWriter``          see :mod:`odradek.spark.sink`
=====================================  =========================================================

Reader objects are pickled from the driver to the executors: they carry only the parsed options
(live clients are dropped in ``__getstate__``). Streaming offsets are Kafka's JSON in canonical
key order, e.g. ``{"page_visits": {"0": 120, "1": 98}}``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.driver import DriverClient
from odradek.spark.fetch import executor_group_id, read_range
from odradek.spark.offsets import OffsetRange, canonical_offsets, offsets_from_json
from odradek.spark.options import SourceOptions, parse_source_options
from odradek.spark.planning import StreamPlanner, plan_batch

__all__ = [
    "SHORT_NAME",
    "KafkaInputPartition",
    "OdradekBatchReader",
    "OdradekDataSource",
    "OdradekStreamReader",
    "kafka_schema",
]

log = logging.getLogger(__name__)

SHORT_NAME = "odradek"


def kafka_schema(include_headers: bool, decode_values: bool = False) -> StructType:
    """Spark's Kafka row schema; ``headers`` only with ``includeHeaders=true``; ``valueSchemaId``
    and ``valueJson`` last with ``valueSchemaRegistry`` (:mod:`odradek.spark.confluent_avro`)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    if decode_values:
        fields += [StructField("valueSchemaId", IntegerType()), StructField("valueJson", StringType())]
    return StructType(fields)


def _schema_of(options: SourceOptions) -> StructType:
    return kafka_schema(options.include_headers, options.value_schema_registry is not None)


def _check_schema(schema: StructType, options: SourceOptions) -> None:
    if schema.simpleString() != _schema_of(options).simpleString():
        raise ValueError("Kafka source has a fixed schema and cannot be set with a custom one")


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: the offsets ``[from_offset, until_offset)`` of one topic partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @classmethod
    def of(cls, rng: OffsetRange) -> KafkaInputPartition:
        return cls(rng.topic, rng.partition, rng.from_offset, rng.until_offset)

    def range(self) -> OffsetRange:
        return OffsetRange(self.topic, self.partition, self.from_offset, self.until_offset)


def _read(options: SourceOptions, group_id: str, partition: InputPartition) -> Iterator[Any]:
    # Spark replaces an empty partition list by one InputPartition(None): read nothing for it.
    if isinstance(partition, KafkaInputPartition):
        yield from read_range(options, partition.range(), group_id)


class OdradekDataSource(DataSource):
    """``format("odradek")``: Kafka-compatible batch and streaming reads and writes."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        options = parse_source_options(self.options, "any")
        return _schema_of(options)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source_options(self.options, "batch")
        _check_schema(schema, options)
        return OdradekBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source_options(self.options, "stream")
        _check_schema(schema, options)
        return OdradekStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.sink import make_writer

        return make_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.sink import make_stream_writer

        return make_stream_writer(self.options, schema, overwrite)


class OdradekBatchReader(DataSourceReader):
    """Batch read: offsets resolved once at planning, one task per range."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.group_id = executor_group_id(options)

    def partitions(self) -> Sequence[InputPartition]:
        client = DriverClient(self.options.client)
        try:
            ranges = plan_batch(client, self.options)
        finally:
            client.close()
        return [KafkaInputPartition.of(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, self.group_id, partition)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch read with admission control (``maxOffsetsPerTrigger``,
    ``minOffsetsPerTrigger``/``maxTriggerDelay``) and Trigger.AvailableNow support."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.group_id = executor_group_id(options)
        self._planner: StreamPlanner | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_planner"] = None
        return state

    @property
    def planner(self) -> StreamPlanner:
        if self._planner is None:
            settings = self.options.client
            self._planner = StreamPlanner(self.options, lambda: DriverClient(settings))
        return self._planner

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return canonical_offsets(self.planner.initial_offset())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self.planner.latest_offset(offsets_from_json(start), max_rows)
        return canonical_offsets(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        seen = self.planner.latest_seen
        return canonical_offsets(seen) if seen else None

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ranges = self.planner.ranges(offsets_from_json(start), offsets_from_json(end))
        return [KafkaInputPartition.of(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, self.group_id, partition)

    def commit(self, end: dict[str, Any]) -> None:
        self.planner.commit(offsets_from_json(end))

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
