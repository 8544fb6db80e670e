"""The controller's requests to brokers, as the controller builds them and brokers apply them.

Kafka's ``LeaderAndIsrRequest``, ``UpdateMetadataRequest`` and ``StopReplicaRequest`` in the shape
odradek's controller and broker use internally: partitions keyed by :class:`TopicPartition`, states
as :class:`PartitionState`. :mod:`odradek.controller.messages` turns them into wire messages and
back (one module per message); the broker's API modules (``server/apis/leader_and_isr.py`` …) hand
them to its replica manager (``become_leader_or_follower``, ``stop_replicas``,
``maybe_update_metadata_cache``); :class:`ControllerRequestTarget` is a broker as an in-process
channel delivers them. Each carries the
sender's ``controller_epoch``; a broker refuses an epoch lower than the highest it has seen
(STALE_CONTROLLER_EPOCH), which fences a controller that lost its ZooKeeper session.

Immutable snapshots: a request copies what it is given when built (mappings become read-only
``MappingProxyType`` copies, lists tuples, sets frozensets, and each :class:`PartitionState` a copy of
its own), so a controller that changes its partition states afterwards cannot change a request
already built or queued. Safe from any thread.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = ["ControllerRequestTarget", "LeaderAndIsrRequest", "StopReplicaRequest", "UpdateMetadataRequest"]


def _frozen_states(states: Mapping[TopicPartition, PartitionState]) -> Mapping[TopicPartition, PartitionState]:
    """A read-only copy holding a copy of each state (its replica lists copied too)."""
    return MappingProxyType(
        {
            tp: dataclasses.replace(state, isr=copy.copy(state.isr), replicas=copy.copy(state.replicas))
            for tp, state in states.items()
        }
    )


def _freeze(obj: Any, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    partition_states: Mapping[TopicPartition, PartitionState]
    topic_ids: Mapping[str, uuid.UUID]

    def __post_init__(self) -> None:
        _freeze(self, "partition_states", _frozen_states(self.partition_states))
        _freeze(self, "topic_ids", MappingProxyType(dict(self.topic_ids)))


@dataclass(frozen=True)
class UpdateMetadataRequest:
    """``deleted_topics``: topics whose partitions (listed in ``partition_states`` when known)
    the brokers must drop from their metadata cache. ``offline_replicas``: replicas on a failed log
    dir of a live broker, per partition (a dead broker's replicas are offline without being listed)."""

    controller_id: int
    controller_epoch: int
    live_brokers: Sequence[BrokerInfo]
    partition_states: Mapping[TopicPartition, PartitionState]
    topic_ids: Mapping[str, uuid.UUID]
    deleted_topics: Set[str]
    offline_replicas: Mapping[TopicPartition, Set[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _freeze(self, "live_brokers", tuple(self.live_brokers))  # BrokerInfo is frozen
        _freeze(self, "partition_states", _frozen_states(self.partition_states))
        _freeze(self, "topic_ids", MappingProxyType(dict(self.topic_ids)))
        _freeze(self, "deleted_topics", frozenset(self.deleted_topics))
        _freeze(
            self, "offline_replicas", MappingProxyType({tp: frozenset(r) for tp, r in self.offline_replicas.items()})
        )


@dataclass(frozen=True)
class StopReplicaRequest:
    """``leader_epochs``: the leader epoch the controller knows per partition (StopReplica v3+);
    missing means -1 (any epoch). Deletions go out with -2 (Kafka's ``EpochDuringDelete``)."""

    controller_id: int
    controller_epoch: int
    partitions: Sequence[TopicPartition]
    delete_partitions: bool
    leader_epochs: Mapping[TopicPartition, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _freeze(self, "partitions", tuple(self.partitions))
        _freeze(self, "leader_epochs", MappingProxyType(dict(self.leader_epochs)))


class ControllerRequestTarget(Protocol):
    """A broker as the controller's requests see it. Each method raises
    StaleControllerEpochError for an older ``controller_epoch``; the partition methods return an
    error code per partition."""

    async def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> dict[TopicPartition, ErrorCode]: ...

    async def handle_update_metadata(self, request: UpdateMetadataRequest) -> None: ...

    async def handle_stop_replica(self, request: StopReplicaRequest) -> dict[TopicPartition, ErrorCode]: ...
