"""The controller's events and its view of the cluster (Kafka's ``ControllerContext``).

Events are queued by ZooKeeper watches and by requests (ControlledShutdown, ElectLeaders) and
processed one at a time by the controller's event task. Plain data: safe anywhere.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = ["ControllerContext", "ControllerEvent"]


class ControllerEvent(enum.Enum):
    ELECT = "elect"
    CONTROLLER_CHANGE = "controller_change"
    BROKER_CHANGE = "broker_change"
    TOPIC_CHANGE = "topic_change"
    TOPIC_DELETION = "topic_deletion"
    PARTITION_MODIFICATION = "partition_modification"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    ISR_CHANGE = "isr_change"
    TOPIC_CONFIG_CHANGE = "topic_config_change"
    ELECT_LEADERS = "elect_leaders"
    ALTER_REASSIGNMENTS = "alter_reassignments"
    REASSIGN_PARTITIONS = "reassign_partitions"
    PREFERRED_REPLICA_ELECTION = "preferred_replica_election"
    LOG_DIR_EVENT = "log_dir_event"
    REPLICAS_OFFLINE = "replicas_offline"
    SHUTDOWN = "shutdown"


@dataclass
class ControllerContext:
    """What the active controller knows (Kafka's ``ControllerContext``)."""

    epoch: int = 0
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    """Brokers in controlled shutdown: never elected leader again until they re-register."""
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    """Replicas on live brokers whose log dir failed: never elected until the broker re-registers."""
