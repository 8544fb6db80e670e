"""The controller's requests to brokers, as the controller builds them and brokers apply them.

Kafka's ``LeaderAndIsrRequest``, ``UpdateMetadataRequest`` and ``StopReplicaRequest`` in the shape
odradek's controller and broker use internally: partitions keyed by :class:`TopicPartition`, states
as :class:`PartitionState`. :mod:`odradek.controller.wire` turns them into wire messages; the
broker's API modules (``server/apis/leader_and_isr.py`` …) turn wire messages back into them and
call the broker's ``handle_*`` methods (:class:`ControllerRequestTarget`). Each carries the
sender's ``controller_epoch``; a broker refuses an epoch lower than the highest it has seen
(STALE_CONTROLLER_EPOCH), which fences a controller that lost its ZooKeeper session.

Plain data: safe from any thread.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = ["ControllerRequestTarget", "LeaderAndIsrRequest", "StopReplicaRequest", "UpdateMetadataRequest"]


@dataclass
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    partition_states: dict[TopicPartition, PartitionState]
    topic_ids: dict[str, uuid.UUID]


@dataclass
class UpdateMetadataRequest:
    """``deleted_topics``: topics whose partitions (listed in ``partition_states`` when known)
    the brokers must drop from their metadata cache. ``offline_replicas``: replicas on a failed log
    dir of a live broker, per partition (a dead broker's replicas are offline without being listed)."""

    controller_id: int
    controller_epoch: int
    live_brokers: list[BrokerInfo]
    partition_states: dict[TopicPartition, PartitionState]
    topic_ids: dict[str, uuid.UUID]
    deleted_topics: set[str]
    offline_replicas: dict[TopicPartition, set[int]] = field(default_factory=dict)


@dataclass
class StopReplicaRequest:
    """``leader_epochs``: the leader epoch the controller knows per partition (StopReplica v3+);
    missing means -1 (any epoch). Deletions go out with -2 (Kafka's ``EpochDuringDelete``)."""

    controller_id: int
    controller_epoch: int
    partitions: list[TopicPartition]
    delete_partitions: bool
    leader_epochs: dict[TopicPartition, int] = field(default_factory=dict)


class ControllerRequestTarget(Protocol):
    """A broker as the controller's requests see it. Each method raises
    StaleControllerEpochError for an older ``controller_epoch``; the partition methods return an
    error code per partition."""

    async def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> dict[TopicPartition, ErrorCode]: ...

    async def handle_update_metadata(self, request: UpdateMetadataRequest) -> None: ...

    async def handle_stop_replica(self, request: StopReplicaRequest) -> dict[TopicPartition, ErrorCode]: ...
