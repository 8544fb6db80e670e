"""The group coordinator's settings, read once from the broker's ``server.properties`` keys.

=========================================  ==========================  ===========================
key                                        field                       meaning
=========================================  ==========================  ===========================
``group.min.session.timeout.ms``           ``min_session_timeout_ms``  smaller session timeouts get
                                                                       INVALID_SESSION_TIMEOUT
``group.max.session.timeout.ms``           ``max_session_timeout_ms``  likewise for larger ones
``group.max.size``                         ``max_size``                members beyond it get
                                                                       GROUP_MAX_SIZE_REACHED
``group.initial.rebalance.delay.ms``       ``initial_rebalance_delay`` wait for more members before
                                                                       an empty group's first rebalance
``offsets.topic.num.partitions``           ``offsets_partitions``      partitions of __consumer_offsets
``offsets.topic.replication.factor``       ``offsets_replication``     its replication factor
``offsets.topic.segment.bytes``            ``offsets_segment_bytes``   its segment.bytes
``offsets.retention.minutes``              ``retention_ms``            offsets of empty groups expire
``offsets.retention.check.interval.ms``    ``retention_check_ms``      how often expiry runs
``offsets.commit.timeout.ms``              ``commit_timeout_ms``       how long a write may wait to
                                                                       be durable
``offset.metadata.max.bytes``              ``metadata_max_bytes``      longer commit metadata gets
                                                                       OFFSET_METADATA_TOO_LARGE
=========================================  ==========================  ===========================

Immutable: safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.runtime import ConfigSource

__all__ = ["LOAD_BUFFER_BYTES", "NEW_MEMBER_JOIN_TIMEOUT_MS", "GroupCoordinatorConfig"]

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""A new member's JoinGroup waits at most this long for the rebalance (Kafka's constant)."""

LOAD_BUFFER_BYTES = 5 * 1024 * 1024
"""Bytes read per step while loading a partition (Kafka's ``offsets.load.buffer.size``)."""


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    offsets_partitions: int = 50
    offsets_replication: int = 3
    offsets_segment_bytes: int = 104857600
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_check_ms: int = 600000
    commit_timeout_ms: int = 5000
    metadata_max_bytes: int = 4096

    @classmethod
    def from_broker(cls, config: ConfigSource) -> GroupCoordinatorConfig:
        """From a KafkaConfig (anything with ``config[key]``)."""
        return cls(
            min_session_timeout_ms=int(config["group.min.session.timeout.ms"]),
            max_session_timeout_ms=int(config["group.max.session.timeout.ms"]),
            max_size=int(config["group.max.size"]),
            initial_rebalance_delay_ms=int(config["group.initial.rebalance.delay.ms"]),
            offsets_partitions=int(config["offsets.topic.num.partitions"]),
            offsets_replication=int(config["offsets.topic.replication.factor"]),
            offsets_segment_bytes=int(config["offsets.topic.segment.bytes"]),
            retention_ms=int(config["offsets.retention.minutes"]) * 60000,
            retention_check_ms=int(config["offsets.retention.check.interval.ms"]),
            commit_timeout_ms=int(config["offsets.commit.timeout.ms"]),
            metadata_max_bytes=int(config["offset.metadata.max.bytes"]),
        )

    def offsets_topic_configs(self) -> dict[str, str]:
        """Topic configs of ``__consumer_offsets``: compacted, as Kafka creates it."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.offsets_segment_bytes),
            "compression.type": "producer",
        }
