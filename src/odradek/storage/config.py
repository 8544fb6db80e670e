"""Topic-level log configuration (Kafka's ``LogConfig``).

``TOPIC_CONFIGS`` defines every per-topic key odradek honours, with Kafka's names and defaults.
Each has a broker-level default key (``BROKER_SYNONYMS``: ``segment.bytes`` <- ``log.segment.bytes``),
so a broker's ``server.properties`` sets the defaults and a topic's overrides (stored under
``/config/topics/<topic>``) win over them.

:class:`LogConfig` is immutable; a config change builds a new one and hands it to the log
(``Log.update_config``). Safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.configdef import ConfigDef, at_least, one_of

WEEK_MS = 7 * 24 * 3600 * 1000

TOPIC_CONFIGS = (
    ConfigDef()
    .define(
        "cleanup.policy",
        "list",
        ["delete"],
        "delete or compact (compaction is recorded, not run).",
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
    .define("delete.retention.ms", "long", 86400000, "Accepted for compatibility (compaction).", at_least(0))
    .define("min.compaction.lag.ms", "long", 0, "Accepted for compatibility (compaction).", at_least(0))
    .define("max.compaction.lag.ms", "long", 2**63 - 1, "Accepted for compatibility (compaction).", at_least(1))
    .define("min.cleanable.dirty.ratio", "double", 0.5, "Accepted for compatibility (compaction).")
    .define("message.timestamp.difference.max.ms", "long", 2**63 - 1, "Accepted for compatibility.", at_least(0))
    .define("segment.jitter.ms", "long", 0, "Accepted for compatibility.", at_least(0))
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
}


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
