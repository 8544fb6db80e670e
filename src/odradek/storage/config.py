"""Topic-level log configuration (Kafka's ``LogConfig``).

``TOPIC_CONFIGS`` defines every per-topic key odradek honours, with Kafka's names and defaults.
Each has a broker-level default key (``BROKER_SYNONYMS``: ``segment.bytes`` <- ``log.segment.bytes``),
so a broker's ``server.properties`` sets the defaults and a topic's overrides (stored under
``/config/topics/<topic>``) win over them.

:class:`LogConfig` is immutable; a config change builds a new one and hands it to the log
(``Log.update_config``). Safe to share between threads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.configdef import ConfigDef, Validator, at_least, between, one_of

WEEK_MS = 7 * 24 * 3600 * 1000
LONG_MAX = 2**63 - 1

# Kafka 3.9's MetadataVersion strings: each release ("3.9", "0.10.0") and each internal version
# ("3.9-IV0", "0.10.0-IV1"); "0.x.y" versions take three dotted parts, later ones two, and
# anything after those is ignored ("1.0.1" is "1.0", "0.8.2.1" is "0.8.2").
_IBP_RELEASES: dict[str, int] = {
    "0.10.0": 1,
    "0.10.1": 2,
    "0.10.2": 0,
    "0.11.0": 2,
    "1.0": 0,
    "1.1": 0,
    "2.0": 1,
    "2.1": 2,
    "2.2": 1,
    "2.3": 1,
    "2.4": 1,
    "2.5": 0,
    "2.6": 0,
    "2.7": 2,
    "2.8": 1,
    "3.0": 1,
    "3.1": 0,
    "3.2": 0,
    "3.3": 3,
    "3.4": 0,
    "3.5": 2,
    "3.6": 2,
    "3.7": 4,
    "3.8": 0,
    "3.9": 0,
}  # release -> highest IV number
METADATA_VERSIONS: frozenset[str] = frozenset(
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0", "4.0-IV0", "4.0-IV1"]
    + list(_IBP_RELEASES)
    + [f"{release}-IV{n}" for release, top in _IBP_RELEASES.items() for n in range(top + 1)]
)
_REMOTE_STORAGE_DISABLED = (
    "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
)
_REMOTE_FLAGS_UNDER_ZK = (
    "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode."
)


def metadata_version(value: object) -> str | None:
    """Kafka's ``MetadataVersionValidator``: ``value`` must name a version Kafka 3.9 knows."""
    if value is None:
        return None
    text = str(value)
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = text if keep >= len(parts) else ".".join(parts[:keep])
    return None if key in METADATA_VERSIONS else f"Version {text} is not a valid version"


def gzip_level(value: object) -> str | None:
    """1..9, or -1 (the default level), as Kafka's ``GzipCompression.LEVEL_VALIDATOR``."""
    if value is None or value == -1 or (isinstance(value, int) and 1 <= value <= 9):
        return None
    return "Value must be between 1 and 9 or equal to -1"


def throttled_replicas(value: object) -> str | None:
    """``*`` or ``partition:broker`` pairs (Kafka's ``ThrottledReplicaListValidator``)."""
    items = [str(v).strip() for v in value] if isinstance(value, list) else []
    if "".join(items) == "*" or all(re.fullmatch(r"([0-9]+:[0-9]+)?", v) for v in items):
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def must_be_false(problem: str) -> Validator:
    """Only ``false`` is accepted; ``problem`` is Kafka's message for ``true``."""

    def check(value: object) -> str | None:
        return problem if value is True else None

    return check


TOPIC_CONFIGS = (
    ConfigDef()
    .define(
        "cleanup.policy",
        "list",
        ["delete"],
        "delete (retention removes old segments), compact (the log cleaner keeps the last record of every key; "
        "records without a key are refused), or both.",
        one_of("delete", "compact"),
    )
    .define(
        "compression.type",
        "string",
        "producer",
        "Kept as the producer sent it; batches are never recompressed.",
        one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    )
    .define(
        "segment.bytes",
        "int",
        1024 * 1024 * 1024,
        "Roll a new segment when the active one reaches this size.",
        at_least(14),
    )
    .define("segment.ms", "long", WEEK_MS, "Roll a new segment when the active one is this old.", at_least(1))
    .define(
        "segment.index.bytes",
        "int",
        10 * 1024 * 1024,
        "Maximum size of an offset or time index file; a full index rolls the segment.",
        at_least(8),
    )
    .define("index.interval.bytes", "int", 4096, "Bytes of log between two sparse index entries.", at_least(0))
    .define(
        "retention.ms",
        "long",
        WEEK_MS,
        "Delete a segment once its newest record is older than this; -1 keeps forever.",
        at_least(-1),
    )
    .define(
        "retention.bytes",
        "long",
        -1,
        "Delete oldest segments while the partition is larger than this; -1 for no limit.",
        at_least(-1),
    )
    .define("max.message.bytes", "int", 1048588, "Largest record batch a producer may append.", at_least(0))
    .define(
        "flush.messages",
        "long",
        2**63 - 1,
        "fsync after this many messages (default: leave it to the OS).",
        at_least(1),
    )
    .define(
        "flush.ms",
        "long",
        2**63 - 1,
        "fsync when data is this old (default: leave it to the OS).",
        at_least(0),
    )
    .define(
        "file.delete.delay.ms",
        "long",
        60000,
        "Accepted for compatibility; segments are deleted at once.",
        at_least(0),
    )
    .define(
        "message.timestamp.type",
        "string",
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of("CreateTime", "LogAppendTime"),
    )
    .define("min.insync.replicas", "int", 1, "Replicas that must acknowledge an acks=all produce.", at_least(1))
    .define("unclean.leader.election.enable", "boolean", False, "Elect a leader outside the ISR as a last resort.")
    .define("preallocate", "boolean", False, "Accepted for compatibility; segments are not preallocated.")
    .define(
        "delete.retention.ms",
        "long",
        86400000,
        "Compacted topics: how long a tombstone (and an emptied transaction marker) stays after its batch was first "
        "cleaned (the delete horizon stored in the batch, KIP-534).",
        at_least(0),
    )
    .define(
        "min.compaction.lag.ms",
        "long",
        0,
        "Compacted topics: a segment whose largest timestamp is younger than this is not cleaned.",
        at_least(0),
    )
    .define(
        "max.compaction.lag.ms",
        "long",
        2**63 - 1,
        "Compacted topics: a dirty segment whose first batch is older than this is cleaned whatever the dirty ratio.",
        at_least(1),
    )
    .define(
        "min.cleanable.dirty.ratio",
        "double",
        0.5,
        "Compacted topics: clean when the dirty (not yet cleaned) bytes exceed this share of the log.",
        between(0, 1),
    )
    .define(
        "message.timestamp.difference.max.ms",
        "long",
        LONG_MAX,
        "Deprecated (Kafka 3.6): the default of message.timestamp.before.max.ms and "
        "message.timestamp.after.max.ms when those are not set.",
        at_least(0),
    )
    .define(
        "message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "CreateTime topics refuse a record whose timestamp is more than this before the broker's clock "
        "(INVALID_TIMESTAMP).",
        at_least(0),
    )
    .define(
        "message.timestamp.after.max.ms",
        "long",
        LONG_MAX,
        "CreateTime topics refuse a record whose timestamp is more than this after the broker's clock "
        "(INVALID_TIMESTAMP).",
        at_least(0),
    )
    .define(
        "confluent.value.schema.validation",
        "boolean",
        False,
        "Confluent Server's key: Produce refuses (INVALID_RECORD) values that do not start with magic "
        "byte 0 and a schema id registered under <topic>-value in the broker's schema registry "
        "(schema.registry.listener).",
    )
    .define("segment.jitter.ms", "long", 0, "Accepted for compatibility.", at_least(0))
    .define(
        "message.format.version",
        "string",
        "3.0-IV1",
        "Deprecated; accepted and reported, ignored as by Kafka 3.x (batches are always format v2). "
        "Any version Kafka 3.9 knows: `0.8.0` .. `3.9`, `0.10.0-IV1`, `3.9-IV0`, ...",
        metadata_version,
    )
    .define(
        "message.downconversion.enable",
        "boolean",
        True,
        "Accepted for compatibility; fetch versions that need down-conversion are not served.",
    )
    .define(
        "compression.gzip.level",
        "int",
        -1,
        "Accepted for compatibility; batches are never recompressed.",
        gzip_level,
    )
    .define(
        "compression.lz4.level",
        "int",
        9,
        "Accepted for compatibility; batches are never recompressed.",
        between(1, 17),
    )
    .define(
        "compression.zstd.level",
        "int",
        3,
        "Accepted for compatibility; batches are never recompressed.",
        between(-131072, 22),
    )
    .define(
        "leader.replication.throttled.replicas",
        "list",
        [],
        "Replicas throttled by leader.replication.throttled.rate on their leader: `*` or partition:broker pairs.",
        throttled_replicas,
    )
    .define(
        "follower.replication.throttled.replicas",
        "list",
        [],
        "Replicas throttled by follower.replication.throttled.rate while they catch up: `*` or partition:broker pairs.",
        throttled_replicas,
    )
    .define(
        "remote.storage.enable",
        "boolean",
        False,
        "Tiered storage is not available: only false is accepted.",
        must_be_false(_REMOTE_STORAGE_DISABLED),
    )
    .define("local.retention.ms", "long", -2, "Accepted for compatibility (tiered storage).", at_least(-2))
    .define("local.retention.bytes", "long", -2, "Accepted for compatibility (tiered storage).", at_least(-2))
    .define(
        "remote.log.copy.disable",
        "boolean",
        False,
        "Tiered storage is not available: only false is accepted.",
        must_be_false(_REMOTE_FLAGS_UNDER_ZK),
    )
    .define(
        "remote.log.delete.on.disable",
        "boolean",
        False,
        "Tiered storage is not available: only false is accepted.",
        must_be_false(_REMOTE_FLAGS_UNDER_ZK),
    )
)

BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "preallocate": "log.preallocate",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.format.version": "log.message.format.version",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}
"""Topic key -> the broker key that sets its default (Kafka's ``ServerTopicConfigSynonyms``); keys
left out (``leader.replication.throttled.replicas``, ``remote.storage.enable``, ...) have no broker
default, as in Kafka."""


@dataclass(frozen=True)
class LogConfig:
    """Typed per-topic settings. Build with :meth:`from_props`; ``values`` holds every key."""

    values: Mapping[str, Any]

    @classmethod
    def from_props(
        cls, overrides: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Defaults (typed, e.g. from the broker's config) overridden by ``overrides`` (strings ok).

        Raises InvalidConfigError for an unknown key or a bad value.
        """
        merged: dict[str, Any] = dict(TOPIC_CONFIGS.defaults())
        if defaults:
            merged.update(defaults)
        if overrides:
            for name, raw in overrides.items():
                merged[name] = TOPIC_CONFIGS.validate_one(name, raw)
        return cls(merged)

    def get(self, name: str) -> Any:
        return self.values[name]

    @property
    def segment_bytes(self) -> int:
        return int(self.values["segment.bytes"])

    @property
    def segment_ms(self) -> int:
        return int(self.values["segment.ms"])

    @property
    def segment_index_bytes(self) -> int:
        return int(self.values["segment.index.bytes"])

    @property
    def index_interval_bytes(self) -> int:
        return int(self.values["index.interval.bytes"])

    @property
    def retention_ms(self) -> int:
        return int(self.values["retention.ms"])

    @property
    def retention_bytes(self) -> int:
        return int(self.values["retention.bytes"])

    @property
    def max_message_bytes(self) -> int:
        return int(self.values["max.message.bytes"])

    @property
    def flush_messages(self) -> int:
        return int(self.values["flush.messages"])

    @property
    def flush_ms(self) -> int:
        return int(self.values["flush.ms"])

    @property
    def message_timestamp_type(self) -> str:
        return str(self.values["message.timestamp.type"])

    @property
    def compacted(self) -> bool:
        """Whether ``cleanup.policy`` includes ``compact`` (records must then have keys)."""
        return "compact" in self.values["cleanup.policy"]

    @property
    def message_timestamp_before_max_ms(self) -> int:
        """``message.timestamp.before.max.ms``, or the deprecated ``message.timestamp.difference.max.ms``
        while the former is at its default (Long.MAX_VALUE), as Kafka 3.9's ``LogConfig``."""
        value = int(self.values["message.timestamp.before.max.ms"])
        return value if value != LONG_MAX else int(self.values["message.timestamp.difference.max.ms"])

    @property
    def message_timestamp_after_max_ms(self) -> int:
        """``message.timestamp.after.max.ms``, falling back like the ``before`` bound."""
        value = int(self.values["message.timestamp.after.max.ms"])
        return value if value != LONG_MAX else int(self.values["message.timestamp.difference.max.ms"])
