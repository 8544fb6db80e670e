"""The controller's seam to the metadata store: exactly the verbs it uses.

:class:`~odradek.metadata.kafka_zk_client.KafkaZkClient` implements it over any
:class:`~odradek.metadata.store.CoordinationStore`: a ZooKeeper ensemble in production, an
:class:`~odradek.metadata.embedded.EmbeddedStore` session in tests (``EmbeddedStore(None)`` is an
in-memory tree with ZooKeeper's semantics: conditional writes by znode version, ephemeral nodes
owned by a session and removed when it closes or expires, persistent watches, the
``/controller_epoch`` znode). The verbs, their znodes and their errors are documented on
``KafkaZkClient``.

Every method is called from the controller's event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from odradek.metadata.errors import CoordinationError
from odradek.metadata.store import ANY_VERSION, WatchCallback, WatchHandle
from odradek.metadata.znodes import BrokerInfo, LeaderAndIsr, PartitionAssignment, TopicAssignment
from odradek.metadata.znodes import TopicPartition as ZkTopicPartition
from odradek.storage import TopicPartition

__all__ = ["ControllerZkClient"]


class ControllerZkClient(Protocol):
    """What :class:`~odradek.controller.controller.KafkaController` reads and writes."""

    # -- watches --------------------------------------------------------------------------------
    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle: ...

    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle: ...

    # -- controller election ----------------------------------------------------------------------
    async def get_controller_id(self) -> int | None: ...

    async def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None: ...

    async def increment_controller_epoch(self) -> int: ...

    # -- brokers, topics, partitions ----------------------------------------------------------------
    async def get_all_brokers(self) -> list[BrokerInfo]: ...

    async def get_all_topics(self) -> list[str]: ...

    async def get_topic_assignment(self, topic: str) -> tuple[dict[int, list[int]] | None, uuid.UUID]: ...

    async def get_topic_assignments(
        self, topics: Sequence[str]
    ) -> list[tuple[dict[int, list[int]] | None, uuid.UUID]]: ...

    async def get_replica_assignment_and_topic_id(self, topic: str) -> TopicAssignment | None: ...

    async def set_topic_assignment(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        topic_id: uuid.UUID | None = None,
        expected_zk_version: int = ANY_VERSION,
        adding_replicas: Mapping[int, Sequence[int]] | None = None,
        removing_replicas: Mapping[int, Sequence[int]] | None = None,
    ) -> int: ...

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]: ...

    async def get_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None: ...

    async def get_partition_states_of(self, tps: Sequence[TopicPartition]) -> list[LeaderAndIsr | None]: ...

    async def create_partition_states(
        self, topic: str, states: Mapping[int, LeaderAndIsr], controller_epoch_zk_version: int | None = None
    ) -> None: ...

    async def update_leader_and_isr(
        self,
        tp: TopicPartition,
        state: LeaderAndIsr,
        expected_zk_version: int,
        controller_epoch_zk_version: int | None = None,
    ) -> int: ...

    async def update_leader_and_isrs(
        self, updates: Sequence[tuple[TopicPartition, LeaderAndIsr, int]], controller_epoch_zk_version: int
    ) -> list[int | CoordinationError]: ...

    # -- topic deletion -----------------------------------------------------------------------------
    async def get_topic_deletions(self) -> list[str]: ...

    async def delete_topic(self, topic: str) -> None: ...

    async def delete_topic_deletion(self, topic: str) -> None: ...

    # -- notifications --------------------------------------------------------------------------------
    async def pop_isr_change_notifications(self) -> set[ZkTopicPartition]: ...

    async def pop_log_dir_event_notifications(self) -> set[int]: ...

    # -- admin znodes ---------------------------------------------------------------------------------
    async def get_partition_reassignment(self) -> list[PartitionAssignment]: ...

    async def set_partition_reassignment(self, assignments: Sequence[PartitionAssignment]) -> None: ...

    async def delete_partition_reassignment(self) -> None: ...

    async def get_preferred_replica_election(self) -> bytes | None: ...

    async def delete_preferred_replica_election(self) -> None: ...
