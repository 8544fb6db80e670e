"""The controller's requests to brokers as the broker applies them.

The request classes (Kafka's ``LeaderAndIsrRequest``, ``UpdateMetadataRequest`` and
``StopReplicaRequest``: partitions keyed by :class:`TopicPartition`, states as
:class:`PartitionState`) live each in its message module with its builder
(:mod:`odradek.controller.messages.leader_and_isr`, ``.update_metadata``, ``.stop_replica``) and are
named here too. The broker's API modules (``server/apis/leader_and_isr.py`` …) hand them to its
replica manager (``become_leader_or_follower``, ``stop_replicas``, ``maybe_update_metadata_cache``);
:class:`ControllerRequestTarget` is a broker as an in-process channel delivers them. Each request
carries the sender's ``controller_epoch``; a broker refuses an epoch lower than the highest it has
seen (STALE_CONTROLLER_EPOCH), which fences a controller that lost its ZooKeeper session.

Safe from any thread.
"""

from __future__ import annotations

from typing import Protocol

from odradek.controller.messages.leader_and_isr import LeaderAndIsrRequest
from odradek.controller.messages.stop_replica import StopReplicaRequest
from odradek.controller.messages.update_metadata import UpdateMetadataRequest
from odradek.errors import ErrorCode
from odradek.storage import TopicPartition

__all__ = ["ControllerRequestTarget", "LeaderAndIsrRequest", "StopReplicaRequest", "UpdateMetadataRequest"]


class ControllerRequestTarget(Protocol):
    """A broker as the controller's requests see it. Each method raises
    StaleControllerEpochError for an older ``controller_epoch``; the partition methods return an
    error code per partition."""

    async def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> dict[TopicPartition, ErrorCode]: ...

    async def handle_update_metadata(self, request: UpdateMetadataRequest) -> None: ...

    async def handle_stop_replica(self, request: StopReplicaRequest) -> dict[TopicPartition, ErrorCode]: ...
