"""The controller's events and its view of the cluster (Kafka's ``ControllerEvent`` and
``ControllerContext``).

Events are queued by ZooKeeper watches, by requests (ControlledShutdown, ElectLeaders,
AlterPartitionReassignments) and by LeaderAndIsr answers, and processed one at a time by the
controller's event task, which dispatches on the event's class (``KafkaController._process``).
One class per event, named as Kafka names it, with its payload as fields; the events that answer
a request carry the future the requester awaits, completed by the handler (with the "not the
controller" answer when this broker is not the active controller).

Plain data: safe anywhere; the futures are completed on the controller's loop.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from odradek.controller.state_machines import PartitionLifecycle, ReplicaLifecycle
from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = [
    "AlterResult",
    "ApiPartitionReassignment",
    "BrokerChange",
    "ControlledShutdown",
    "ControllerChange",
    "ControllerContext",
    "ControllerEvent",
    "IsrChangeNotification",
    "LeaderAndIsrResponseReceived",
    "LogDirEventNotification",
    "PartitionModifications",
    "Reassignment",
    "Reelect",
    "ReplicaLeaderElection",
    "ShutdownEventThread",
    "Startup",
    "TopicChange",
    "TopicDeletion",
    "TopicUncleanLeaderElectionEnable",
    "ZkPartitionReassignment",
    "ZkPreferredReplicaLeaderElection",
]

AlterResult = dict[TopicPartition, tuple[ErrorCode, str | None]]
"""AlterPartitionReassignments' answer: (error, message) per partition."""


@dataclass(frozen=True)
class Startup:
    """The first election, queued by ``startup()``."""


@dataclass(frozen=True)
class ControllerChange:
    """``/controller`` was created, changed or deleted: run the election again."""


@dataclass(frozen=True)
class Reelect:
    """The broker's session expired and it registered again: run the election again."""


@dataclass(frozen=True)
class BrokerChange:
    """The children of ``/brokers/ids`` changed."""


@dataclass(frozen=True)
class TopicChange:
    """The children of ``/brokers/topics`` changed (a topic created or deleted)."""


@dataclass(frozen=True)
class PartitionModifications:
    """``/brokers/topics/<topic>`` changed (partitions added, an assignment rewritten)."""

    topic: str


@dataclass(frozen=True)
class TopicDeletion:
    """The children of ``/admin/delete_topics`` changed."""


@dataclass(frozen=True)
class IsrChangeNotification:
    """A leader wrote ``/isr_change_notification/isr_change_<seq>``."""


@dataclass(frozen=True)
class TopicUncleanLeaderElectionEnable:
    """A config change notification (``/config/changes``): a topic's
    ``unclean.leader.election.enable`` may have been turned on."""


@dataclass(frozen=True)
class ZkPartitionReassignment:
    """``/admin/reassign_partitions`` was created or changed."""


@dataclass(frozen=True)
class ZkPreferredReplicaLeaderElection:
    """``/admin/preferred_replica_election`` was created or changed."""


@dataclass(frozen=True)
class LogDirEventNotification:
    """A broker wrote ``/log_dir_event_notification/log_dir_event_<seq>``."""


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived:
    """``broker_id`` answered a LeaderAndIsr with KAFKA_STORAGE_ERROR for ``offline_partitions``."""

    broker_id: int
    offline_partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class ControlledShutdown:
    """ControlledShutdown of ``broker_id``; ``future`` gets (error, partitions it still leads).
    ``broker_epoch``: the one the broker sent (v2+, KIP-380), -1 when not sent."""

    broker_id: int
    future: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = field(compare=False)
    broker_epoch: int = -1


@dataclass(frozen=True)
class ReplicaLeaderElection:
    """ElectLeaders (preferred or ``unclean``) of ``partitions`` (None: all); ``future`` gets the
    error per partition, or None when this broker is not the controller."""

    partitions: frozenset[TopicPartition] | None
    unclean: bool
    future: asyncio.Future[dict[TopicPartition, ErrorCode] | None] = field(compare=False)


@dataclass(frozen=True)
class ApiPartitionReassignment:
    """AlterPartitionReassignments: a target replica list per partition (None: cancel);
    ``future`` gets :data:`AlterResult`, or None when this broker is not the controller."""

    targets: dict[TopicPartition, list[int] | None]
    future: asyncio.Future[AlterResult | None] = field(compare=False)


@dataclass(frozen=True)
class ShutdownEventThread:
    """Stops the event task (queued by ``shutdown()``)."""


ControllerEvent = (
    Startup
    | ControllerChange
    | Reelect
    | BrokerChange
    | TopicChange
    | PartitionModifications
    | TopicDeletion
    | IsrChangeNotification
    | TopicUncleanLeaderElectionEnable
    | ZkPartitionReassignment
    | ZkPreferredReplicaLeaderElection
    | LogDirEventNotification
    | LeaderAndIsrResponseReceived
    | ControlledShutdown
    | ReplicaLeaderElection
    | ApiPartitionReassignment
    | ShutdownEventThread
)


@dataclass
class Reassignment:
    """One partition's move: ``target`` (TRS, first = preferred leader) from ``original`` (ORS);
    see :mod:`odradek.controller.reassignment`."""

    target: list[int]
    original: list[int]
    superseded: list[int] = field(default_factory=list)
    """Replicas a replaced or cancelled move had added: removed at the end too."""

    @property
    def replicas(self) -> list[int]:
        """RS: the assignment while the move runs."""
        return self.target + self.removing

    @property
    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self) -> list[int]:
        leaving = [r for r in self.original + self.superseded if r not in self.target]
        return list(dict.fromkeys(leaving))


@dataclass
class ControllerContext:
    """What the active controller knows (Kafka's ``ControllerContext``); a new one at every
    election. ``states`` maps each partition to its current (immutable) state: a change replaces
    the entry. ``partition_lifecycle`` and ``replica_lifecycle`` are the states of
    :mod:`odradek.controller.state_machines`."""

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
