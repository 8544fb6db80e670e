"""Executor side of the ``odradek`` source: fetch one offset range into Arrow record batches.

Runs in Spark's executor Python workers (``DataSourceReader.read``). Each task reads one
:class:`~odradek.spark.offsets.OffsetRange` with a confluent-kafka ``Consumer`` that is
*assigned* the partition at the range start (no group membership, no subscription, no commits,
``auto.offset.reset=error``) and consumes in bulk with ``consume(num_messages, timeout)``.

Output: ``pyarrow.RecordBatch`` es of at most ``batch_rows`` rows whose schema equals what Spark
derives from Kafka's row schema (:func:`arrow_schema`), so Spark takes them without conversion:

====================  ==============================================================
key, value            binary (null when the record has none)
topic                 string
partition             int32
offset                int64
timestamp             timestamp[us, UTC]
timestampType         int32: 0 CreateTime, 1 LogAppendTime, -1 none
headers (optional)    list<struct<key: string, value: binary>>, null when no headers
====================  ==============================================================

Edge cases: offsets past the range end are dropped; gaps inside the range (compaction,
transaction markers, aborted records under read_committed) are normal; the range ends early when
the partition end (end-of-partition event) reaches the range end. A start below the log start
offset (retention) or a partition that ends before the range does is data loss: an error when
``failOnDataLoss`` is true, otherwise the task skips to what is there. A partition end short of
the range end is only data loss once the leader's high watermark, asked afresh, is short too: a
leader just elected may answer with a high watermark that lags for a moment.

Leader changes: librdkafka refreshes metadata and fetches from the new leader by itself; the
errors it reports meanwhile (transport, not leader, all brokers down, ...) are transient
(:func:`odradek.spark.driver.is_transient`) and only logged. What bounds the task is progress: a
fetch making no progress for ``kafkaConsumer.pollTimeoutMs`` (default 120 s) fails the task with a
``TimeoutError`` naming the partition, its leader and replicas as the cluster's metadata says, the
last client error and the option to raise. ``kafka.request.timeout.ms`` bounds one request
(librdkafka's ``socket.timeout.ms``).

Consumers are pooled per worker process (Spark reuses Python workers), one idle consumer per
configuration, so back-to-back micro-batches do not pay a new connection each time.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from odradek.spark.confluent_avro import ValueDecoder
from odradek.spark.driver import client_config, describe_partitions, is_transient
from odradek.spark.offsets import OffsetRange, format_tp, report_data_loss
from odradek.spark.options import SourceOptions

__all__ = ["arrow_schema", "executor_group_id", "read_range"]

log = logging.getLogger(__name__)

_TIMESTAMP_TYPES = {0: -1, 1: 0, 2: 1}  # librdkafka's NOT_AVAILABLE/CREATE/LOG_APPEND -> Kafka ids
_POOL: OrderedDict[tuple[tuple[str, str], ...], Any] = OrderedDict()
_POOL_SIZE = 4
_END_WAIT_S = 1.0  # how long an end-of-partition short of the range end may persist


def arrow_schema(include_headers: bool, decode_values: bool = False) -> Any:
    """The Arrow schema of the rows ``read_range`` yields (all fields nullable, as Spark's)."""
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    if decode_values:
        fields += [pa.field("valueSchemaId", pa.int32()), pa.field("valueJson", pa.string())]
    return pa.schema(fields)


def executor_group_id(options: SourceOptions) -> str:
    """The consumer ``group.id`` of executor consumers: ``kafka.group.id`` when set, else
    ``<groupIdPrefix>-executor``. Executor consumers never join the group or commit (librdkafka
    only requires the id), so unlike Spark's unique per-query ids a stable one is safe and lets
    pooled consumers serve every query of a worker."""
    return options.group_id or f"{options.group_id_prefix}-executor"


def _consumer_conf(options: SourceOptions, group_id: str) -> dict[str, Any]:
    conf = client_config(options.client, "consumer")
    conf.update(
        {
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }
    )
    conf.setdefault("fetch.wait.max.ms", 100)
    return conf


def _acquire(conf: dict[str, Any]) -> tuple[Any, tuple[tuple[str, str], ...]]:
    from confluent_kafka import Consumer

    key = tuple(sorted((k, str(v)) for k, v in conf.items()))
    consumer = _POOL.pop(key, None)
    if consumer is None:
        consumer = Consumer(conf)
    return consumer, key


def _release(consumer: Any, key: tuple[tuple[str, str], ...], healthy: bool) -> None:
    try:
        consumer.unassign()
    except Exception:
        healthy = False
    if not healthy or key in _POOL:
        consumer.close()
        return
    _POOL[key] = consumer
    while len(_POOL) > _POOL_SIZE:
        _, old = _POOL.popitem(last=False)
        old.close()


class _Columns:
    """Column buffers for one record batch."""

    def __init__(self, include_headers: bool, decoder: ValueDecoder | None = None) -> None:
        self.include_headers = include_headers
        self.decoder = decoder
        self.schema_ids: list[int | None] = []
        self.json: list[str | None] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    def add(self, message: Any) -> None:
        ts_type, ts_ms = message.timestamp()
        self.keys.append(message.key())
        self.values.append(message.value())
        self.offsets.append(message.offset())
        self.timestamps.append(ts_ms * 1000)
        self.types.append(_TIMESTAMP_TYPES.get(ts_type, -1))
        if self.include_headers:
            raw = message.headers()
            self.headers.append([{"key": k, "value": v} for k, v in raw] if raw else None)
        if self.decoder is not None:
            schema_id, text = self.decoder.decode(self.values[-1])
            self.schema_ids.append(schema_id)
            self.json.append(text)

    def __len__(self) -> int:
        return len(self.offsets)

    def to_batch(self, topic: str, partition: int, schema: Any) -> Any:
        import pyarrow as pa

        n = len(self.offsets)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, schema.field("headers").type))
        if self.decoder is not None:
            arrays += [pa.array(self.schema_ids, pa.int32()), pa.array(self.json, pa.string())]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_range(options: SourceOptions, rng: OffsetRange, group_id: str, batch_rows: int = 10_000) -> Iterator[Any]:
    """Yield the records of ``rng`` as Arrow record batches (see the module docstring)."""
    if rng.size <= 0:
        return
    from confluent_kafka import KafkaError, TopicPartition

    schema = arrow_schema(options.include_headers, options.value_schema_registry is not None)
    decoder = ValueDecoder(options.value_schema_registry) if options.value_schema_registry else None
    consumer, key = _acquire(_consumer_conf(options, group_id))
    healthy = False
    next_offset = rng.from_offset
    poll_timeout_s = options.poll_timeout_ms / 1000
    try:
        consumer.assign([TopicPartition(rng.topic, rng.partition, next_offset)])
        columns = _Columns(options.include_headers, decoder)
        last_progress = time.monotonic()
        short_end_since: float | None = None
        short_end = -1
        last_error = ""
        done = False
        while not done:
            wanted = max(1, min(batch_rows - len(columns), rng.until_offset - next_offset))
            messages = consumer.consume(num_messages=wanted, timeout=min(1.0, poll_timeout_s))
            for message in messages:
                error = message.error()
                if error is None:
                    offset = message.offset()
                    if offset < next_offset:
                        continue
                    if offset >= rng.until_offset:
                        done = True
                        break
                    columns.add(message)
                    next_offset = offset + 1
                    last_progress = time.monotonic()
                    short_end_since = None
                    if next_offset >= rng.until_offset:
                        done = True
                        break
                elif error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= rng.until_offset:
                        done = True
                        break
                    short_end = message.offset()  # the end is below the range end: truncated?
                    if short_end_since is None:
                        short_end_since = time.monotonic()
                elif error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    next_offset = _skip_lost(consumer, options, rng, next_offset, group_id)
                    if next_offset >= rng.until_offset:
                        done = True
                        break
                    consumer.assign([TopicPartition(rng.topic, rng.partition, next_offset)])
                    last_progress = time.monotonic()
                    break
                elif _transient_error(error):
                    last_error = error.str()
                    log.info(
                        "fetching %s at offset %d: %s (retried by the client)",
                        format_tp(rng.tp),
                        next_offset,
                        last_error,
                    )
                else:
                    raise RuntimeError(f"Failed to fetch {format_tp(rng.tp)} at offset {next_offset}: {error.str()}")
            if (
                not done
                and short_end_since is not None
                and time.monotonic() - short_end_since >= _END_WAIT_S
                and _high_watermark(consumer, options, rng) < rng.until_offset
            ):
                report_data_loss(
                    f"Could not read records in offset [{next_offset}, {rng.until_offset}) for topic partition "
                    f"{format_tp(rng.tp)} with consumer group {group_id}: the partition ends at {short_end}",
                    options.fail_on_data_loss,
                )
                done = True
            elif short_end_since is not None and time.monotonic() - short_end_since >= _END_WAIT_S:
                short_end_since = None  # the leader has the records: its end was behind, wait on
            if len(columns) >= batch_rows or (done and len(columns)):
                yield columns.to_batch(rng.topic, rng.partition, schema)
                columns = _Columns(options.include_headers, decoder)
            if not done and time.monotonic() - last_progress > poll_timeout_s:
                detail = f"; last client error: {last_error}" if last_error else ""
                raise TimeoutError(
                    f"Cannot fetch records in [{next_offset}, {rng.until_offset}) of {format_tp(rng.tp)} "
                    f"within {options.poll_timeout_ms} ms from '{options.client.bootstrap_servers}'"
                    f"{detail}. {_leader_text(consumer, options, rng)}. Raise kafkaConsumer.pollTimeoutMs "
                    "to wait longer for a leader."
                )
        healthy = True
    finally:
        _release(consumer, key, healthy)


def _transient_error(error: Any) -> bool:
    from confluent_kafka import KafkaException

    return is_transient(KafkaException(error))


def _high_watermark(consumer: Any, options: SourceOptions, rng: OffsetRange) -> int:
    """The partition's high watermark asked of its leader now; -1 when it cannot be asked
    (treated as short: the caller then reports the data loss it suspected)."""
    from confluent_kafka import KafkaException, TopicPartition

    timeout_s = min(5.0, options.client.api_timeout_ms / 1000)
    try:
        _, high = consumer.get_watermark_offsets(
            TopicPartition(rng.topic, rng.partition), timeout=timeout_s, cached=False
        )
    except KafkaException as exc:
        return rng.until_offset if is_transient(exc) else -1
    return int(high)


def _leader_text(consumer: Any, options: SourceOptions, rng: OffsetRange) -> str:
    """Who leads and hosts the partition now (best effort, at most 5 s)."""
    try:
        metadata = consumer.list_topics(rng.topic, timeout=min(5.0, options.client.api_timeout_ms / 1000))
        return "Partition " + describe_partitions(metadata, [rng.tp])
    except Exception as exc:
        return f"The leader of {format_tp(rng.tp)} is unknown (no metadata: {exc})"


def _skip_lost(consumer: Any, options: SourceOptions, rng: OffsetRange, offset: int, group_id: str) -> int:
    """``offset`` is out of range: report the data loss, return where the data starts now."""
    from confluent_kafka import TopicPartition

    low, high = consumer.get_watermark_offsets(
        TopicPartition(rng.topic, rng.partition), timeout=options.client.api_timeout_ms / 1000, cached=False
    )
    report_data_loss(
        f"Could not read records in offset [{offset}, {rng.until_offset}) for topic partition "
        f"{format_tp(rng.tp)} with consumer group {group_id}: the partition now holds [{low}, {high})",
        options.fail_on_data_loss,
    )
    # Below the log start: resume at the log start. Past the end (truncation): nothing to read.
    return low if offset < low else rng.until_offset
