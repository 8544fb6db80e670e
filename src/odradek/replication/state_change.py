"""The replica state changes the controller's requests make on a broker (Kafka's
``ReplicaManager.becomeLeaderOrFollower``, ``stopReplicas`` and ``maybeUpdateMetadataCache``).

:class:`ReplicaStateChanges` is the part of :class:`~odradek.replication.replica_manager.ReplicaManager`
that the LeaderAndIsr, StopReplica and UpdateMetadata request handlers call (the replica manager
derives from it; the per-partition steps, :meth:`~ReplicaStateChanges.make_leader_or_follower` and
:meth:`~ReplicaStateChanges.stop_replica`, are the replica manager's). The order of checks is Kafka's:

1. the sender's permission and broker epoch (STALE_BROKER_EPOCH): the request handler's, before
   anything here (:mod:`odradek.server.apis.controller_request`);
2. the controller epoch (:meth:`~ReplicaStateChanges.update_controller_epoch`): older than the
   highest seen raises StaleControllerEpochError and nothing is applied;
3. per partition, the leader epoch: LeaderAndIsr applies only a newer one (else
   STALE_CONTROLLER_EPOCH), StopReplica refuses an older one (FENCED_LEADER_EPOCH).

The broker wires three hooks (:attr:`~ReplicaStateChanges.topic_config_loader`,
:attr:`~ReplicaStateChanges.on_leadership_change`, :attr:`~ReplicaStateChanges.on_topics_deleted`);
left None, nothing is told. Event loop only.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from odradek.errors import ErrorCode, KafkaError, StaleControllerEpochError
from odradek.replication.pacing import Pacer
from odradek.replication.partition import Partition, PartitionState
from odradek.storage import TopicPartition

__all__ = ["LeaderAndIsrCommand", "LeadershipChange", "ReplicaStateChanges", "StopReplicaCommand"]

log = logging.getLogger(__name__)


class LeaderAndIsrCommand(Protocol):
    """A LeaderAndIsr request as :meth:`ReplicaStateChanges.become_leader_or_follower` reads it
    (:class:`odradek.controller.requests.LeaderAndIsrRequest`)."""

    @property
    def controller_epoch(self) -> int: ...

    @property
    def partition_states(self) -> Mapping[TopicPartition, PartitionState]: ...


class StopReplicaCommand(Protocol):
    """A StopReplica request as :meth:`ReplicaStateChanges.stop_replicas` reads it
    (:class:`odradek.controller.requests.StopReplicaRequest`)."""

    @property
    def controller_epoch(self) -> int: ...

    @property
    def partitions(self) -> Sequence[TopicPartition]: ...

    @property
    def delete_partitions(self) -> bool: ...

    @property
    def leader_epochs(self) -> Mapping[TopicPartition, int]: ...


LeadershipChange = Callable[[TopicPartition, Partition | None], None]
"""The broker's hook, told each partition LeaderAndIsr or StopReplica changed here, with the
partition (a leader or a follower) or None (stopped): the coordinators follow their internal
topics' leadership with it (Kafka's ``onLeadershipChange``)."""


BATCH_CREATE_MIN = 16
"""A LeaderAndIsr naming this many partitions new to the broker has their logs created together
(:meth:`ReplicaStateChanges.create_logs`) first."""


class ReplicaStateChanges(ABC):
    """See the module docstring. The hooks and the controller epoch start as these class
    defaults; the replica manager (or the broker wiring it) sets them per instance."""

    broker_id: int
    partitions: dict[TopicPartition, Partition]
    controller_epoch: int = 0
    """The highest controller epoch seen in a controller's request (:meth:`update_controller_epoch`)."""
    topic_config_loader: Callable[[str], Awaitable[None]] | None = None
    """Awaited with the topic before LeaderAndIsr changes one of its partitions: the broker reads
    the topic's config overrides when they are not known yet, so a new log is created with them."""
    on_leadership_change: LeadershipChange | None = None
    on_topics_deleted: Callable[[set[str]], None] | None = None
    """Told the topics a StopReplica with ``delete_partitions`` named, after it applied."""

    @abstractmethod
    def make_leader_or_follower(self, tp: TopicPartition, state: PartitionState) -> Partition:
        """Apply one partition's state (creating the partition and its log when new)."""

    @abstractmethod
    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        """Stop one replica, deleting its log with ``delete``."""

    @abstractmethod
    async def create_logs(self, new: list[TopicPartition]) -> None:
        """Create the logs of partitions new to this broker before their states are applied one
        by one (the replica manager creates them on its I/O threads, several at once); a log not
        created here is created by :meth:`make_leader_or_follower`."""

    def update_controller_epoch(self, controller_epoch: int) -> None:
        """The fence every request from the controller passes first (LeaderAndIsr, StopReplica,
        UpdateMetadata; Kafka's ``controllerEpoch`` check): an epoch older than the highest seen
        raises StaleControllerEpochError and the request applies nothing; any other becomes the
        highest seen."""
        if controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"controller epoch {controller_epoch} is older than {self.controller_epoch}"
            )
        self.controller_epoch = controller_epoch

    def maybe_update_metadata_cache(self, controller_epoch: int, update_cache: Callable[[], None]) -> None:
        """UpdateMetadata: ``update_cache`` (the broker's metadata cache update) runs once
        ``controller_epoch`` passed :meth:`update_controller_epoch`, which raises as it does."""
        self.update_controller_epoch(controller_epoch)
        update_cache()

    async def become_leader_or_follower(self, request: LeaderAndIsrCommand) -> dict[TopicPartition, ErrorCode]:
        """LeaderAndIsr: apply the controller's partition states; an error code per partition.

        Raises StaleControllerEpochError for an older controller epoch (nothing applied). Per
        partition, as Kafka's ``becomeLeaderOrFollower``: a leader epoch not newer than the one this
        broker has is STALE_CONTROLLER_EPOCH (already applied, or older); a state whose replicas
        leave out this broker is UNKNOWN_TOPIC_OR_PARTITION; otherwise :attr:`topic_config_loader`
        is awaited, the partition made leader or follower (:meth:`make_leader_or_follower`) and
        :attr:`on_leadership_change` told. Errors raised on the way map to their codes
        (KAFKA_STORAGE_ERROR for a failed log dir), anything unexpected to UNKNOWN_SERVER_ERROR (logged).
        """
        self.update_controller_epoch(request.controller_epoch)
        errors: dict[TopicPartition, ErrorCode] = {}
        new = [
            tp
            for tp, state in request.partition_states.items()
            if tp not in self.partitions and self.broker_id in state.replicas
        ]
        if len(new) >= BATCH_CREATE_MIN:
            if self.topic_config_loader is not None:
                for topic in sorted({tp.topic for tp in new}):
                    await self.topic_config_loader(topic)
            await self.create_logs(new)
        pacer = Pacer()  # thousands of partitions: the loop gets a turn every slice
        for tp, state in request.partition_states.items():
            await pacer.step()
            current = self.partitions.get(tp)
            if current is not None and state.leader_epoch <= current.leader_epoch:
                errors[tp] = ErrorCode.stale_controller_epoch
            elif self.broker_id not in state.replicas:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                errors[tp] = await self._state_change(tp, "LeaderAndIsr", self._become(tp, state))
        return errors

    async def stop_replicas(self, request: StopReplicaCommand) -> dict[TopicPartition, ErrorCode]:
        """StopReplica: stop (with ``delete_partitions`` also delete) replicas; an error code per partition.

        Raises StaleControllerEpochError for an older controller epoch (nothing applied). A hosted
        partition whose request leader epoch (StopReplica v3+; -1 without one, -2 during topic
        deletion: no check) is older than this broker's answers FENCED_LEADER_EPOCH and stays; a
        partition this broker does not host is stopped anyway, its log deleted if asked, as Kafka
        does (a topic deleted while the broker was down). Each stopped partition is told to
        :attr:`on_leadership_change`; with ``delete_partitions`` the request's topics go to
        :attr:`on_topics_deleted`. Errors map as in :meth:`become_leader_or_follower`.
        """
        self.update_controller_epoch(request.controller_epoch)
        errors: dict[TopicPartition, ErrorCode] = {}
        pacer = Pacer()
        for tp in request.partitions:
            await pacer.step()
            epoch = request.leader_epochs.get(tp, -1)
            current = self.partitions.get(tp)
            if current is not None and 0 <= epoch < current.leader_epoch:
                errors[tp] = ErrorCode.fenced_leader_epoch
            else:
                errors[tp] = await self._state_change(tp, "StopReplica", self._stop(tp, request.delete_partitions))
        if request.delete_partitions and self.on_topics_deleted is not None:
            self.on_topics_deleted({tp.topic for tp in request.partitions})
        return errors

    async def _become(self, tp: TopicPartition, state: PartitionState) -> None:
        if self.topic_config_loader is not None:
            await self.topic_config_loader(tp.topic)
        partition = self.make_leader_or_follower(tp, state)
        if self.on_leadership_change is not None:
            self.on_leadership_change(tp, partition)

    async def _stop(self, tp: TopicPartition, delete: bool) -> None:
        self.stop_replica(tp, delete)
        if self.on_leadership_change is not None:
            self.on_leadership_change(tp, None)

    async def _state_change(self, tp: TopicPartition, api: str, change: Awaitable[None]) -> ErrorCode:
        """Await one partition's ``change``: NONE, the code of a KafkaError it raised, or
        UNKNOWN_SERVER_ERROR (logged) for anything else."""
        try:
            await change
        except KafkaError as exc:
            return exc.error_code
        except Exception:
            log.exception("broker %d: %s for %s-%d failed", self.broker_id, api, tp.topic, tp.partition)
            return ErrorCode.unknown_server_error
        return ErrorCode.none

    def hosts_topic(self, topic: str) -> bool:
        """Whether a partition of ``topic`` is hosted here (Kafka drops a topic's metrics once none is)."""
        return any(tp.topic == topic for tp in self.partitions)
