"""Options of the ``odradek`` Spark data source: parsing and validation (pure Python).

The option names, defaults, precedence rules and error messages are those of Spark's Kafka
connector (``KafkaSourceProvider``), so a job written for ``format("kafka")`` runs unchanged on
``format("odradek")``. Two deliberate differences:

* an option this connector does not know (other than ``kafka.*``) is **rejected** instead of
  being silently ignored, so a typo such as ``startingOffset`` cannot go unnoticed;
* ``kafka.default.api.timeout.ms`` bounds every driver-side broker call (default 30 s) instead
  of being handed to the client (librdkafka has no such property).

Security options (``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``) are Java's
client keys as with Spark's connector; :mod:`odradek.spark.kafka_security` translates them for
librdkafka and checks them when the options are parsed.

Spark hands options to the data source lower-cased (a case-insensitive dict); so does every
function here. Values are always strings. Every validation error is a ``ValueError`` whose text
says what to change. Runs in the planner worker, the stream runner and unit tests.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from odradek.client.security import ClientSecurity
from odradek.spark.kafka_security import client_security, librdkafka_params
from odradek.spark.offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    TopicPartition,
    format_tp,
    format_tps,
    parse_assign,
    parse_partition_offsets,
    parse_partition_timestamps,
)

__all__ = [
    "Assign",
    "ClientSettings",
    "Earliest",
    "GlobalTimestamp",
    "Latest",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Strategy",
    "Subscribe",
    "SubscribePattern",
    "parse_sink_options",
    "parse_source_options",
    "time_string_as_ms",
]

log = logging.getLogger(__name__)

Mode = Literal["batch", "stream", "any"]

# Canonical spelling of every non-kafka option, by lower-cased key (for messages and docs).
SOURCE_OPTIONS = {
    k.lower(): k
    for k in (
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "failOnDataLoss",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "maxRecordsPerPartition",
        "includeHeaders",
        "valueSchemaRegistry",
        "groupIdPrefix",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
    )
}
SINK_OPTIONS = {
    k.lower(): k
    for k in (
        "topic",
        "includeHeaders",
        "checkpointLocation",
        "path",
        "deliveryGuarantee",
        "transactionalIdPrefix",
        "queryId",
        "batchId",
    )
}
DELIVERY_GUARANTEES = ("at-least-once", "exactly-once")

_STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
_INTERCEPTED_KAFKA_KEYS = ("default.api.timeout.ms",)
DEFAULT_API_TIMEOUT_MS = 30_000
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_MAX_TRIGGER_DELAY = "15m"

CUSTOM_GROUP_ID_WARNING = (
    "Kafka option 'kafka.group.id' has been set on this query, it is not recommended to set this "
    "option. This option is unsafe to use since multiple concurrent queries or sources using the "
    "same group id will interfere with each other as they are part of the same consumer group. "
    "Restarted queries may also suffer interference from the previous run having the same group "
    "id. The user should have only one query per group id."
)


# ---------------------------------------------------------------------------------- value types
@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: a fixed list of topics (topics that do not exist yet have no partitions)."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every non-internal topic the regex fully matches."""

    pattern: str


@dataclass(frozen=True)
class Assign:
    """``assign``: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]


Strategy = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True)
class Earliest:
    """Every partition's log start offset."""


@dataclass(frozen=True)
class Latest:
    """Every partition's end (high watermark, or last stable offset under read_committed)."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets; ``-2`` earliest, ``-1`` latest. Must name every partition."""

    offsets: PartitionOffsets = field(hash=False)


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset with a timestamp >= ``timestamp_ms`` in every partition."""

    timestamp_ms: int
    no_match: Literal["error", "latest"]


@dataclass(frozen=True)
class SpecificTimestamps:
    """Per-partition timestamps; must name every partition."""

    timestamps: PartitionOffsets = field(hash=False)
    no_match: Literal["error", "latest"]


OffsetSpec = Earliest | Latest | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


@dataclass(frozen=True)
class ClientSettings:
    """How to reach the cluster: what the driver and the executors need to build a client."""

    bootstrap_servers: str
    kafka_params: Mapping[str, str] = field(hash=False)
    """``kafka.*`` options without the prefix (bootstrap included), handed to librdkafka."""
    api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000

    def client_security(self) -> ClientSecurity:
        """How odradek's own client would connect with these options (``kafka.security.protocol``,
        ``kafka.ssl.*``, ``kafka.sasl.*``); ValueError naming the problem. A new security on
        each call, which the caller closes (an OAUTHBEARER login)."""
        return client_security(self.kafka_params)


@dataclass(frozen=True)
class SourceOptions:
    """Validated read options (see :func:`parse_source_options`)."""

    client: ClientSettings
    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    value_schema_registry: str | None = None
    """``valueSchemaRegistry``: a schema registry URL; values framed as Confluent's Avro are then
    decoded into the extra columns ``valueSchemaId`` and ``valueJson``."""
    group_id: str | None = None
    group_id_prefix: str = "spark-kafka-source"
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS

    def anchor_group(self) -> str:
        """The consumer group that anchors ``startingOffsets=latest`` and records progress.

        ``kafka.group.id`` when set; otherwise ``<groupIdPrefix>-<digest>`` where the digest covers
        the bootstrap servers, the subscription and ``startingOffsets``, so a restarted query
        finds the group again. Two queries with identical source options share it: give each its
        own ``groupIdPrefix``.
        """
        if self.group_id:
            return self.group_id
        identity = f"{self.client.bootstrap_servers}|{self.strategy!r}|{self.starting!r}"
        digest = hashlib.sha1(identity.encode()).hexdigest()[:12]
        return f"{self.group_id_prefix}-{digest}"

    @property
    def starts_at_latest(self) -> bool:
        """True when some partition's starting offset resolves to the end of the log."""
        if isinstance(self.starting, Latest):
            return True
        return isinstance(self.starting, SpecificOffsets) and LATEST in self.starting.offsets.values()


@dataclass(frozen=True)
class SinkOptions:
    """Validated write options (see :func:`parse_sink_options`)."""

    client: ClientSettings
    topic: str | None = None
    exactly_once: bool = False
    """``deliveryGuarantee=exactly-once``: one Kafka transaction per task (:mod:`odradek.spark.transactional`)."""
    transactional_id_prefix: str = "odradek-sink"
    query_id: str | None = None
    """Names the query when the tasks cannot learn it from Spark (``foreachBatch``, batch writes)."""
    batch_id: int | None = None
    """The micro-batch when the tasks cannot learn it from Spark (``foreachBatch``, batch writes)."""


# ------------------------------------------------------------------------------------- helpers
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def time_string_as_ms(text: str) -> int:
    """Spark's ``timeStringAsMs``: ``"15m"``, ``"30s"``, ``"250ms"``, ``"1h"``, ``"2d"``;
    a bare number is milliseconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in ("", *_TIME_UNITS_MS):
        raise ValueError(f"Invalid time string '{text}': expected e.g. '15m', '30s', '500ms', '1h' or a number of ms")
    return int(int(match.group(1)) * _TIME_UNITS_MS.get(match.group(2) or "ms", 1))


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"Option '{_name(key)}' must be 'true' or 'false', got '{value}'")


def _int(options: Mapping[str, str], key: str, *, positive: bool = True, allow_zero: bool = False) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"Option '{_name(key)}' must be an integer, got '{value}'") from None
    if positive and (number < 0 or (number == 0 and not allow_zero)):
        raise ValueError(f"{_name(key)} must be positive")
    return number


def _name(key: str) -> str:
    return SOURCE_OPTIONS.get(key, SINK_OPTIONS.get(key, key))


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _client_settings(options: Mapping[str, str], role: str) -> ClientSettings:
    kafka = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in kafka or not kafka["bootstrap.servers"].strip():
        raise ValueError(f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}")
    timeout = _int(options, "kafka.default.api.timeout.ms")
    for key in _INTERCEPTED_KAFKA_KEYS:
        kafka.pop(key, None)
    librdkafka_params(kafka)  # the security options, checked before any client is built
    retries = _int(options, "fetchoffset.numretries")
    interval = _int(options, "fetchoffset.retryintervalms", allow_zero=True)
    return ClientSettings(
        bootstrap_servers=kafka["bootstrap.servers"].strip(),
        kafka_params=kafka,
        api_timeout_ms=DEFAULT_API_TIMEOUT_MS if timeout is None else timeout,
        fetch_offset_num_retries=3 if retries is None else retries,
        fetch_offset_retry_interval_ms=1000 if interval is None else interval,
    )


def _reject_unknown(options: Mapping[str, str], known: Mapping[str, str], what: str) -> None:
    unknown = sorted(k for k in options if not k.startswith("kafka.") and k not in known)
    if unknown:
        raise ValueError(
            f"Unknown option(s) for the odradek {what}: {', '.join(repr(k) for k in unknown)}. "
            f"Supported: {', '.join(sorted(known.values()))} and any 'kafka.'-prefixed client property."
        )


def _strategy(options: Mapping[str, str]) -> Strategy:
    given = [k for k in _STRATEGY_KEYS if k in options]
    keys = ", ".join(_STRATEGY_KEYS)
    if not given:
        raise ValueError(
            f"One of the following options must be specified for Kafka source: {keys}. See the docs for more details."
        )
    if len(given) > 1:
        raise ValueError(
            f"Only one of the following options can be specified for Kafka source: {keys}. "
            "See the docs for more details."
        )
    key, value = given[0], options[given[0]]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise ValueError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
        return Assign(tuple(parse_assign(value)))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise ValueError(f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"Invalid regular expression for option 'subscribePattern': {exc}") from None
    return SubscribePattern(pattern)


def _offset_spec(options: Mapping[str, str], which: Literal["starting", "ending"], default: OffsetSpec) -> OffsetSpec:
    """Spark's precedence: ``<which>Timestamp`` > ``<which>OffsetsByTimestamp`` > ``<which>Offsets``."""
    raw_strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if raw_strategy not in ("error", "latest"):
        raise ValueError(
            f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got '{raw_strategy}'"
        )
    no_match: Literal["error", "latest"] = "latest" if raw_strategy == "latest" else "error"
    if f"{which}timestamp" in options:
        text = options[f"{which}timestamp"].strip()
        try:
            return GlobalTimestamp(int(text), no_match)
        except ValueError:
            raise ValueError(f"Expected a single long value, got {text}") from None
    if f"{which}offsetsbytimestamp" in options:
        return SpecificTimestamps(parse_partition_timestamps(options[f"{which}offsetsbytimestamp"].strip()), no_match)
    value = options.get(f"{which}offsets")
    if value is None:
        return default
    if value.strip().lower() == "latest":
        return Latest()
    if value.strip().lower() == "earliest":
        return Earliest()
    return SpecificOffsets(parse_partition_offsets(value.strip()))


def _check_batch_offsets(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if isinstance(starting, Latest):
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in sorted(starting.offsets.items()):
            if offset == LATEST:
                raise ValueError(f"startingOffsets for {format_tp(tp)} can't be latest for batch queries on Kafka")
    if isinstance(ending, Earliest):
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in sorted(ending.offsets.items()):
            if offset == EARLIEST:
                raise ValueError(f"ending offset for {format_tp(tp)} can't be earliest for batch queries on Kafka")
    pairs: tuple[PartitionOffsets, PartitionOffsets] | None = None
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        pairs = (starting.offsets, ending.offsets)
    elif isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        pairs = (starting.timestamps, ending.timestamps)
    if pairs is None:
        return
    start, end = pairs
    if set(start) != set(end):
        raise ValueError(
            "The specified start offset and end offset should have the same topic-partitions. "
            f"Topic-partitions for start offset: {format_tps(start)}, "
            f"topic-partitions for end offset: {format_tps(end)}."
        )
    for tp in sorted(start):
        if start[tp] >= 0 and end[tp] >= 0 and start[tp] > end[tp]:
            raise ValueError(
                f"The specified start offset {start[tp]} is greater than the end offset {end[tp]} "
                f"for topic {tp[0]} partition {tp[1]}."
            )


# ---------------------------------------------------------------------------------- public API
def _registry_url(value: str | None) -> str | None:
    if not value:
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"Invalid value {value!r} for option valueSchemaRegistry: an http(s):// URL")
    return value


def parse_source_options(raw: Mapping[str, str], mode: Mode) -> SourceOptions:
    """Validate read options for a ``batch`` or ``stream`` query (``any``: checks common to both,
    used when the DataFrame is created, before Spark says which it is).

    Defaults: ``startingOffsets`` earliest (batch) or latest (stream); ``endingOffsets`` latest
    (batch only; rejected on streams); ``failOnDataLoss`` true; ``maxTriggerDelay`` 15m.
    """
    options = _lower(raw)
    _reject_unknown(options, SOURCE_OPTIONS, "source")
    strategy = _strategy(options)
    kafka_keys = {k[len("kafka.") :] for k in options if k.startswith("kafka.")}
    if "auto.offset.reset" in kafka_keys:
        raise ValueError(
            "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
            "'startingoffsets' to 'earliest' or 'latest' to specify where to start. Structured "
            "Streaming manages which offsets are consumed internally, rather than relying on the "
            "kafkaConsumer to do it. This will ensure that no data is missed when new "
            "topics/partitions are dynamically subscribed. Note that 'startingoffsets' only applies "
            "when a new Streaming query is started, and that resuming will always pick up from where "
            "the query left off. See the docs for more details."
        )
    for part in ("key", "value"):
        if f"{part}.deserializer" in kafka_keys:
            raise ValueError(
                f"Kafka option '{part}.deserializer' is not supported as {part}s are deserialized as "
                f"byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
                f"deserialize the {part}s."
            )
    for key in ("enable.auto.commit", "interceptor.classes"):
        if key in kafka_keys:
            raise ValueError(f"Kafka option '{key}' is not supported")
    client = _client_settings(options, "consumer")
    max_offsets = _int(options, "maxoffsetspertrigger")
    min_offsets = _int(options, "minoffsetspertrigger")
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise ValueError(
            f"The value of minOffsetPerTrigger({min_offsets}) is higher than the maxOffsetsPerTrigger({max_offsets})."
        )
    if mode == "stream":
        if "endingoffsets" in options:
            raise ValueError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in options or "endingtimestamp" in options:
            raise ValueError("ending timestamp not valid in streaming queries")
    starting = _offset_spec(options, "starting", Latest() if mode == "stream" else Earliest())
    ending = _offset_spec(options, "ending", Latest())
    if mode == "batch":
        _check_batch_offsets(starting, ending)
        for key in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if key in options:
                log.warning("%s option ignored in batch queries", _name(key))
    group_id = options.get("kafka.group.id")
    if group_id:
        log.warning(CUSTOM_GROUP_ID_WARNING)
        if "groupidprefix" in options:
            log.warning("Option groupIdPrefix will be ignored as option kafka.group.id has been set.")
    return SourceOptions(
        client=client,
        strategy=strategy,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failondataloss", True),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=time_string_as_ms(options.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY)),
        min_partitions=_int(options, "minpartitions"),
        max_records_per_partition=_int(options, "maxrecordsperpartition"),
        include_headers=_bool(options, "includeheaders", False),
        value_schema_registry=_registry_url(options.get("valueschemaregistry")),
        group_id=group_id or None,
        group_id_prefix=options.get("groupidprefix", "spark-kafka-source"),
        poll_timeout_ms=_int(options, "kafkaconsumer.polltimeoutms") or DEFAULT_POLL_TIMEOUT_MS,
    )


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """Validate write options: ``topic`` (overrides the ``topic`` column), ``kafka.*``.

    ``checkpointLocation`` and ``path`` are accepted (Spark passes the former through).
    """
    options = _lower(raw)
    _reject_unknown(options, SINK_OPTIONS, "sink")
    for part, noun in (("key", "keys"), ("value", "value")):
        if f"kafka.{part}.serializer" in options:
            raise ValueError(
                f"Kafka option '{part}.serializer' is not supported as {noun} are serialized with ByteArraySerializer."
            )
    topic = options.get("topic")
    guarantee = options.get("deliveryguarantee", "at-least-once").strip().lower()
    if guarantee not in DELIVERY_GUARANTEES:
        raise ValueError(f"Option 'deliveryGuarantee' must be 'at-least-once' or 'exactly-once', got '{guarantee}'")
    exactly_once = guarantee == "exactly-once"
    for key in ("kafka.transactional.id", "kafka.enable.idempotence"):
        if exactly_once and key in options:
            raise ValueError(
                f"Kafka option '{key[6:]}' is not supported with deliveryGuarantee=exactly-once: the sink sets it "
                "(one transactional id per task, derived from transactionalIdPrefix, the query id and the partition)"
            )
    prefix = options.get("transactionalidprefix", "odradek-sink").strip()
    if not prefix:
        raise ValueError("Option 'transactionalIdPrefix' must not be empty")
    query_id = options.get("queryid")
    return SinkOptions(
        client=_client_settings(options, "producer"),
        topic=topic.strip() if topic is not None and topic.strip() else None,
        exactly_once=exactly_once,
        transactional_id_prefix=prefix,
        query_id=query_id.strip() if query_id is not None and query_id.strip() else None,
        batch_id=_int(options, "batchid", allow_zero=True),
    )
