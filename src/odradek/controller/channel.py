"""How the controller reaches brokers: LeaderAndIsr, UpdateMetadata and StopReplica.

Kafka sends these as inter-broker requests. odradek defines the same three operations as the
:class:`ControllerRequestTarget` protocol; brokers in one process (the embedded mode, tests) are
reached through :data:`LOCAL_BROKERS`, a registry keyed by (cluster id, broker id). Each
call carries the sender's ``controller_epoch``; a broker refuses a lower epoch than the highest
it has seen (STALE_CONTROLLER_EPOCH), which fences a controller that lost its ZooKeeper session.

Called from the controller's event loop. A broker in the registry must run on the same loop
(the in-process modes guarantee it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition


@dataclass
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    partition_states: dict[TopicPartition, PartitionState]
    topic_ids: dict[str, uuid.UUID]


@dataclass
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    live_brokers: list[BrokerInfo]
    partition_states: dict[TopicPartition, PartitionState]
    topic_ids: dict[str, uuid.UUID]
    deleted_topics: set[str]


@dataclass
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    partitions: list[TopicPartition]
    delete_partitions: bool


class ControllerRequestTarget(Protocol):
    async def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> None: ...

    async def handle_update_metadata(self, request: UpdateMetadataRequest) -> None: ...

    async def handle_stop_replica(self, request: StopReplicaRequest) -> None: ...


LOCAL_BROKERS: dict[tuple[str, int], ControllerRequestTarget] = {}
"""Brokers running in this process, by (cluster id, broker id)."""


class ControllerChannelManager:
    """Delivers controller requests to brokers; unreachable brokers are skipped (they resync
    from the controller's full UpdateMetadata/LeaderAndIsr when they register again)."""

    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id

    def _target(self, broker_id: int) -> ControllerRequestTarget | None:
        return LOCAL_BROKERS.get((self.cluster_id, broker_id))

    async def send_leader_and_isr(self, broker_id: int, request: LeaderAndIsrRequest) -> bool:
        target = self._target(broker_id)
        if target is None:
            return False
        await target.handle_leader_and_isr(request)
        return True

    async def send_update_metadata(self, broker_id: int, request: UpdateMetadataRequest) -> bool:
        target = self._target(broker_id)
        if target is None:
            return False
        await target.handle_update_metadata(request)
        return True

    async def send_stop_replica(self, broker_id: int, request: StopReplicaRequest) -> bool:
        target = self._target(broker_id)
        if target is None:
            return False
        await target.handle_stop_replica(request)
        return True
