"""The transaction coordinator's settings, read once from the broker's ``server.properties`` keys.

=================================================================  ========================
key                                                                field
=================================================================  ========================
``transaction.state.log.num.partitions``                           ``num_partitions``
``transaction.state.log.replication.factor``                       ``replication_factor``
``transaction.state.log.min.isr``                                  ``min_isr``
``transaction.state.log.segment.bytes``                            ``segment_bytes``
``transaction.max.timeout.ms``                                     ``max_timeout_ms``
``transaction.abort.timed.out.transaction.cleanup.interval.ms``    ``abort_interval_ms``
``transactional.id.expiration.ms``                                 ``id_expiration_ms``
``transaction.remove.expired.transaction.cleanup.interval.ms``     ``expire_interval_ms``
``offsets.topic.num.partitions``                                   ``offsets_partitions``
=================================================================  ========================

``offsets_partitions`` places a group on its ``__consumer_offsets`` partition (AddOffsetsToTxn)
while the metadata cache does not know that topic yet. Immutable: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.coordinator.runtime import ConfigSource

__all__ = ["TransactionCoordinatorConfig"]


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    max_timeout_ms: int = 900000
    abort_interval_ms: int = 10000
    id_expiration_ms: int = 604800000
    expire_interval_ms: int = 3600000
    offsets_partitions: int = 50

    @classmethod
    def from_broker(cls, config: ConfigSource) -> TransactionCoordinatorConfig:
        """From a KafkaConfig (anything with ``config[key]``)."""
        return cls(
            num_partitions=int(config["transaction.state.log.num.partitions"]),
            replication_factor=int(config["transaction.state.log.replication.factor"]),
            min_isr=int(config["transaction.state.log.min.isr"]),
            segment_bytes=int(config["transaction.state.log.segment.bytes"]),
            max_timeout_ms=int(config["transaction.max.timeout.ms"]),
            abort_interval_ms=int(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]),
            id_expiration_ms=int(config["transactional.id.expiration.ms"]),
            expire_interval_ms=int(config["transaction.remove.expired.transaction.cleanup.interval.ms"]),
            offsets_partitions=int(config["offsets.topic.num.partitions"]),
        )

    def topic_configs(self, live_brokers: int) -> Mapping[str, str]:
        """Topic configs of ``__transaction_state`` (compacted, as Kafka creates it), with
        ``min.insync.replicas`` capped at the replicas it can have among ``live_brokers``."""
        return {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(max(1, min(self.min_isr, self.replication_factor, live_brokers))),
            "segment.bytes": str(self.segment_bytes),
            "unclean.leader.election.enable": "false",
        }
