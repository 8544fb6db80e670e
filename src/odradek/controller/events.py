"""The controller's events (Kafka's ``ControllerEvent``); its view of the cluster is
:class:`~odradek.controller.context.ControllerContext`.

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
from dataclasses import dataclass, field

from odradek.errors import ErrorCode
from odradek.storage import TopicPartition

__all__ = [
    "AlterResult",
    "ApiPartitionReassignment",
    "BrokerChange",
    "ControlledShutdown",
    "ControllerChange",
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
    "TopicDeletionStopReplicaResponseReceived",
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
class TopicDeletionStopReplicaResponseReceived:
    """``broker_id`` answered a StopReplica with delete for ``partitions``; ``failed``: those it
    answered with an error (all of them for a top-level error)."""

    broker_id: int
    partitions: frozenset[TopicPartition]
    failed: frozenset[TopicPartition]


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
    | TopicDeletionStopReplicaResponseReceived
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
