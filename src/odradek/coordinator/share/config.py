"""The share coordinator's settings, read once from the broker's ``server.properties`` keys
(Kafka's ``ShareCoordinatorConfig``).

=============================================================  =============================
key                                                            field
=============================================================  =============================
``share.coordinator.state.topic.num.partitions``               ``num_partitions``
``share.coordinator.state.topic.replication.factor``           ``replication_factor``
``share.coordinator.state.topic.min.isr``                      ``min_isr``
``share.coordinator.state.topic.segment.bytes``                ``segment_bytes``
``share.coordinator.snapshot.update.records.per.snapshot``     ``records_per_snapshot``
``share.coordinator.write.timeout.ms``                         ``write_timeout_ms``
``share.coordinator.load.buffer.size``                         ``load_buffer_size``
``share.coordinator.cold.partition.snapshot.interval.ms``      ``cold_snapshot_interval_ms``
=============================================================  =============================

Immutable: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.coordinator.runtime import ConfigSource

__all__ = ["ShareCoordinatorConfig"]


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    records_per_snapshot: int = 500
    write_timeout_ms: int = 5000
    load_buffer_size: int = 5 * 1024 * 1024
    cold_snapshot_interval_ms: int = 300000

    @classmethod
    def from_broker(cls, config: ConfigSource) -> ShareCoordinatorConfig:
        """From a KafkaConfig (anything with ``config[key]``)."""
        prefix = "share.coordinator."
        return cls(
            num_partitions=int(config[prefix + "state.topic.num.partitions"]),
            replication_factor=int(config[prefix + "state.topic.replication.factor"]),
            min_isr=int(config[prefix + "state.topic.min.isr"]),
            segment_bytes=int(config[prefix + "state.topic.segment.bytes"]),
            records_per_snapshot=int(config[prefix + "snapshot.update.records.per.snapshot"]),
            write_timeout_ms=int(config[prefix + "write.timeout.ms"]),
            load_buffer_size=int(config[prefix + "load.buffer.size"]),
            cold_snapshot_interval_ms=int(config[prefix + "cold.partition.snapshot.interval.ms"]),
        )

    def topic_configs(self, live_brokers: int) -> Mapping[str, str]:
        """Topic configs of ``__share_group_state`` as Kafka creates it: ``cleanup.policy=delete``
        with no retention (the coordinator deletes what it no longer needs itself, through
        DeleteRecords), ``min.insync.replicas`` capped at the replicas it can have among
        ``live_brokers``."""
        return {
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "retention.bytes": "-1",
            "min.insync.replicas": str(max(1, min(self.min_isr, self.replication_factor, live_brokers))),
            "segment.bytes": str(self.segment_bytes),
            "unclean.leader.election.enable": "false",
        }
