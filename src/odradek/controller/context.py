"""What the active controller knows of the cluster (Kafka's ``ControllerContext``).

One :class:`ControllerContext` per controller, built with it and emptied in place
(:meth:`ControllerContext.reset`) when it resigns, so the objects that hold it (the state
machines, the request batch) are built once and always see the current one.

Touched only by the controller's event task (metrics read it from the same loop).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from dataclasses import dataclass, field

from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = ["ControllerContext", "PartitionLifecycle", "ReplicaLifecycle"]


class PartitionLifecycle(enum.Enum):
    """Kafka's ``PartitionState``."""

    NonExistentPartition = "NonExistentPartition"
    NewPartition = "NewPartition"
    OnlinePartition = "OnlinePartition"
    OfflinePartition = "OfflinePartition"

    def __str__(self) -> str:
        return self.value


class ReplicaLifecycle(enum.Enum):
    """Kafka's ``ReplicaState``."""

    NewReplica = "NewReplica"
    OnlineReplica = "OnlineReplica"
    OfflineReplica = "OfflineReplica"
    ReplicaDeletionStarted = "ReplicaDeletionStarted"
    ReplicaDeletionSuccessful = "ReplicaDeletionSuccessful"
    ReplicaDeletionIneligible = "ReplicaDeletionIneligible"
    NonExistentReplica = "NonExistentReplica"

    def __str__(self) -> str:
        return self.value


@dataclass
class ControllerContext:
    """What the active controller knows (Kafka's ``ControllerContext``); emptied by :meth:`reset`
    when the controller resigns. ``states`` maps each partition to its current (immutable) state:
    a change replaces the entry. ``partition_lifecycle`` and ``replica_lifecycle`` are the states
    :mod:`odradek.controller.state_machines` moves."""

    epoch: int = 0
    epoch_zk_version: int = -1
    """The version of ``/controller_epoch`` this controller wrote when elected: every partition state
    write is conditional on it (Kafka's ``controllerEpochZkVersion``), so a deposed controller's
    writes fail with ControllerMovedError instead of overwriting its successor's."""
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    """Brokers in controlled shutdown: never elected leader again until they re-register."""
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    """Replicas on live brokers whose log dir failed: never elected until the broker re-registers."""
    topics_to_be_deleted: set[str] = field(default_factory=set)
    """Topics queued for deletion (:mod:`odradek.controller.topic_deletion`): no elections, no
    LeaderAndIsr, and leader -2 in UpdateMetadata until they are gone."""
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    """Queued topics whose deletion waits for a broker (a replica on a dead broker, a failed answer)."""
    partition_lifecycle: dict[TopicPartition, PartitionLifecycle] = field(default_factory=dict)
    replica_lifecycle: dict[tuple[TopicPartition, int], ReplicaLifecycle] = field(default_factory=dict)

    def live_for(self, tp: TopicPartition, live: set[int]) -> set[int]:
        """``live`` without the brokers on which ``tp``'s replica is offline (a failed log dir)."""
        offline = {b for b, tps in self.offline_replicas.items() if tp in tps}
        return live - offline if offline else live

    def replica_online(self, tp: TopicPartition, replica: int) -> bool:
        """Kafka's ``isReplicaOnline``: the broker is alive, not shutting down, and ``tp``'s log
        dir on it has not failed."""
        return (
            replica in self.live_brokers
            and replica not in self.shutting_down
            and tp not in self.offline_replicas.get(replica, ())
        )

    def reset(self) -> None:
        """Forget everything (Kafka's ``resetContext``): every field back to its default, in place."""
        fresh = ControllerContext()
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(fresh, f.name))
