"""Kafka's ``KafkaZkClient`` verbs over a :class:`~odradek.metadata.store.CoordinationStore`.

Everything the broker, the controller and the admin tools read or write in the coordination store
goes through these verbs, so the znode layout of :mod:`odradek.metadata.znodes` is used in one
place. Every method is a coroutine called from the store's event loop.

Broker start-up::

    zk = KafkaZkClient(store)
    await zk.create_top_level_paths()
    cluster_id = await zk.get_or_create_cluster_id()
    await zk.register_broker(BrokerInfo(id=broker_id, host=host, port=port, endpoints=[...]))
    store.watch_data(ControllerZNode.path(), on_controller_change)   # re-run the election
    elected = await zk.try_elect_controller(broker_id)  # (epoch, epoch_zk_version) or None

Fencing: :meth:`try_elect_controller` creates ``/controller`` and bumps ``/controller_epoch`` in one
``multi`` conditioned on the epoch znode's version; the controller then passes that version as
``controller_epoch_zk_version`` to :meth:`update_leader_and_isr`, so a deposed controller's
writes fail with :class:`ControllerMovedError` instead of overwriting the new controller's.

Topic deletion, Kafka's way: the admin side marks the topic with :meth:`request_topic_deletion`
(``/admin/delete_topics/<t>``); the controller, watching that folder, stops the replicas, calls
:meth:`delete_topic` (``/brokers/topics/<t>`` recursively and ``/config/topics/<t>``) and then
:meth:`delete_topic_deletion` (removes the mark). A tool without a controller may call the three
in a row: the znodes go at once.

Topic ids are ``uuid.UUID`` in Python and Kafka's 22-character base64 form in the znode;
``ZERO_UUID`` stands for "no id".
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence

from odradek.errors import TopicExistsError
from odradek.metadata.codec import ZERO_UUID, uuid_to_kafka_string
from odradek.metadata.config_entities import create_config_change_notification, fetch_entity_config
from odradek.metadata.errors import (
    BadVersionError,
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    NodeExistsError,
    NoNodeError,
)
from odradek.metadata.partition_state_zk import PartitionStateZk
from odradek.metadata.store import (
    ANY_VERSION,
    CoordinationStore,
    CreateOp,
    Op,
    SetDataOp,
    WatchCallback,
    WatchHandle,
    ZnodeStat,
)
from odradek.metadata.znodes import (
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityZNode,
    ConfigType,
    ConsumerOffsetZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    PartitionAssignment,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicAssignment,
    TopicPartition,
    TopicPartitionLike,
    TopicsZNode,
    TopicZNode,
    ZkData,
)

log = logging.getLogger(__name__)

__all__ = ["PREFERRED_REPLICA_ELECTION_PATH", "KafkaZkClient", "new_cluster_id"]

PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
"""The ZooKeeper-era preferred replica election request (Kafka's ``PreferredReplicaElectionZNode``)."""


def new_cluster_id() -> str:
    """A random cluster id as Kafka makes it: ``Uuid.randomUuid().toString`` (22 base64 characters)."""
    return uuid_to_kafka_string(uuid.uuid4())


class KafkaZkClient(PartitionStateZk):
    """Kafka's verbs on the znode layout; see the module docstring. Loop-only, like the store."""

    def __init__(self, store: CoordinationStore) -> None:
        self.store = store

    # -- watches --------------------------------------------------------------------------------------

    def watch_data(self, path: str, callback: WatchCallback) -> WatchHandle:
        """The store's persistent data watch on ``path`` (see :meth:`CoordinationStore.watch_data`)."""
        return self.store.watch_data(path, callback)

    def watch_children(self, path: str, callback: WatchCallback) -> WatchHandle:
        """The store's persistent children watch on ``path``."""
        return self.store.watch_children(path, callback)

    # -- cluster --------------------------------------------------------------------------------------

    async def create_top_level_paths(self) -> None:
        """Create :meth:`ZkData.persistent_paths` (idempotent; safe to race with other brokers)."""
        for path in ZkData.persistent_paths():
            await self.store.ensure_path(path)

    async def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id in ``/cluster/id``, writing ``proposed`` (or a new one) the first time."""
        try:
            data, _ = await self.store.get(ClusterIdZNode.path())
            return ClusterIdZNode.decode(data)
        except NoNodeError:
            pass
        cluster_id = proposed or new_cluster_id()
        try:
            await self.store.create(ClusterIdZNode.path(), ClusterIdZNode.encode(cluster_id), makepath=True)
            return cluster_id
        except NodeExistsError:
            data, _ = await self.store.get(ClusterIdZNode.path())
            return ClusterIdZNode.decode(data)

    # -- brokers --------------------------------------------------------------------------------------

    async def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; the broker epoch (the znode's czxid, KIP-380).

        If it exists and belongs to this session (a retried registration), it is left alone;
        otherwise raises :class:`BrokerIdAlreadyRegisteredError`.
        """
        path = BrokerIdZNode.path(info.id)
        try:
            await self.store.create(path, BrokerIdZNode.encode(info), ephemeral=True, makepath=True)
        except NodeExistsError:
            stat = await self.store.exists(path)
            if stat is not None and stat.ephemeral_owner == self.store.session_id:
                return stat.czxid
            raise BrokerIdAlreadyRegisteredError(
                f"broker id {info.id} already registered: {path} exists and belongs to another "
                "live broker; give each broker a unique broker.id",
                path,
            ) from None
        stat = await self.store.exists(path)
        return stat.czxid if stat is not None else -1

    async def get_broker(self, broker_id: int) -> BrokerInfo | None:
        """The registration with its broker epoch (``epoch``: the znode's czxid)."""
        try:
            data, stat = await self.store.get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return None
        return dataclasses.replace(BrokerIdZNode.decode(broker_id, data), epoch=stat.czxid)

    async def get_all_broker_ids(self) -> list[int]:
        """Registered broker ids, ascending; children that are not integers are skipped."""
        try:
            children = await self.store.get_children(BrokerIdsZNode.path())
        except NoNodeError:
            return []
        return sorted(int(c) for c in children if c.lstrip("-").isdigit())

    async def get_all_brokers(self) -> list[BrokerInfo]:
        """Registered brokers by ascending id (brokers that leave meanwhile are skipped). The
        registrations are read in pipelined requests, as Kafka's ``getAllBrokersInCluster``."""
        ids = await self.get_all_broker_ids()
        infos = await asyncio.gather(*(self.get_broker(broker_id) for broker_id in ids))
        return [info for info in infos if info is not None]

    # -- controller -----------------------------------------------------------------------------------

    async def get_controller_id(self) -> int | None:
        try:
            data, _ = await self.store.get(ControllerZNode.path())
        except NoNodeError:
            return None
        return ControllerZNode.decode(data)

    async def try_create_controller(self, broker_id: int) -> bool:
        """Create the ephemeral ``/controller`` for ``broker_id``; False if another broker holds it."""
        try:
            await self.store.create(ControllerZNode.path(), ControllerZNode.encode(broker_id), ephemeral=True)
            return True
        except NodeExistsError:
            return False

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(controller_epoch, znode version)`` or None before the first election."""
        try:
            data, stat = await self.store.get(ControllerEpochZNode.path())
        except NoNodeError:
            return None
        return ControllerEpochZNode.decode(data), stat.version

    async def increment_controller_epoch(self) -> int:
        """Bump ``/controller_epoch`` (create it with 1 the first time); return the new epoch.

        Conditional on the version read, so two racing controllers cannot both succeed: the
        loser gets :class:`ControllerMovedError`.
        """
        epoch, _ = await self._increment_controller_epoch()
        return epoch

    async def _increment_controller_epoch(self) -> tuple[int, int]:
        path = ControllerEpochZNode.path()
        current = await self.get_controller_epoch()
        if current is None:
            try:
                await self.store.create(path, ControllerEpochZNode.encode(1))
                return 1, 0
            except NodeExistsError:
                raise ControllerMovedError(f"{path} was created by another controller") from None
        epoch, version = current
        try:
            stat = await self.store.set(path, ControllerEpochZNode.encode(epoch + 1), version)
        except BadVersionError:
            raise ControllerMovedError(f"{path} moved past epoch {epoch}: another controller") from None
        return epoch + 1, stat.version

    async def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Kafka's ``registerControllerAndIncrementControllerEpoch``, atomically.

        Returns ``(controller_epoch, epoch_zk_version)`` when this broker became controller, or
        None when ``/controller`` is held by another broker (watch it and try again when it goes).
        """
        for _ in range(10):
            if await self.store.exists(ControllerZNode.path()) is not None:
                return None
            current = await self.get_controller_epoch()
            if current is None:
                try:
                    await self.store.create(ControllerEpochZNode.path(), ControllerEpochZNode.encode(0))
                except NodeExistsError:
                    pass
                continue
            epoch, version = current
            ops: list[Op] = [
                CreateOp(ControllerZNode.path(), ControllerZNode.encode(broker_id), ephemeral=True),
                SetDataOp(ControllerEpochZNode.path(), ControllerEpochZNode.encode(epoch + 1), version),
            ]
            try:
                results = await self.store.multi(ops)
            except NodeExistsError:
                return None
            except BadVersionError:
                continue  # the epoch moved: re-read and retry
            stat = results[1]
            assert isinstance(stat, ZnodeStat)
            return epoch + 1, stat.version
        raise ControllerMovedError(f"{ControllerEpochZNode.path()} keeps changing; election abandoned")

    # -- topics ---------------------------------------------------------------------------------------

    async def get_all_topics(self) -> list[str]:
        try:
            return await self.store.get_children(TopicsZNode.path())
        except NoNodeError:
            return []

    async def topic_exists(self, topic: str) -> bool:
        return await self.store.exists(TopicZNode.path(topic)) is not None

    async def create_topic_assignment(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Write ``/config/topics/<t>`` then ``/brokers/topics/<t>``; returns the topic id.

        Kafka's order, so the config exists when the controller sees the topic. A new topic id is
        generated unless given (Kafka 2.8+), so the topic znode is written in version 2 (with
        ``topic_id``). Raises :class:`TopicExistsError`.
        """
        if await self.topic_exists(topic):
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        topic_id = topic_id or uuid.uuid4()
        config_path = ConfigEntityZNode.path(ConfigType.TOPIC, topic)
        config_data = ConfigEntityZNode.encode(configs or {})
        try:
            await self.store.create(config_path, config_data, makepath=True)
        except NodeExistsError:
            await self.store.set(config_path, config_data)  # leftover of an interrupted deletion
        try:
            await self.store.create(TopicZNode.path(topic), TopicZNode.encode(assignment, topic_id), makepath=True)
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None
        return topic_id

    async def set_topic_assignment(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        topic_id: uuid.UUID | None = None,
        expected_zk_version: int = ANY_VERSION,
        adding_replicas: Mapping[int, Sequence[int]] | None = None,
        removing_replicas: Mapping[int, Sequence[int]] | None = None,
    ) -> int:
        """Replace the topic's assignment (CreatePartitions, reassignment); returns the new version.

        ``topic_id`` None or ``ZERO_UUID`` writes no id. ``adding_replicas``/``removing_replicas``:
        the reassignments in progress (Kafka 2.4+). Raises :class:`NoNodeError` for an unknown
        topic, :class:`BadVersionError` on a conflict.
        """
        if topic_id == ZERO_UUID:
            topic_id = None
        data = TopicZNode.encode(assignment, topic_id, adding_replicas, removing_replicas)
        stat = await self.store.set(TopicZNode.path(topic), data, expected_zk_version)
        return stat.version

    async def get_replica_assignment_and_topic_id(self, topic: str) -> TopicAssignment | None:
        """The full ``/brokers/topics/<t>`` value (with adding/removing replicas), or None."""
        try:
            data, _ = await self.store.get(TopicZNode.path(topic))
        except NoNodeError:
            return None
        return TopicZNode.decode(topic, data)

    async def get_topic_assignment(self, topic: str) -> tuple[dict[int, list[int]] | None, uuid.UUID]:
        """``(partition id -> replicas, topic id)``, partitions ascending.

        ``(None, ZERO_UUID)`` for an unknown topic; the id is ``ZERO_UUID`` for a topic written
        without one (Kafka before 2.8).
        """
        assignment = await self.get_replica_assignment_and_topic_id(topic)
        if assignment is None:
            return None, ZERO_UUID
        partitions = {p: list(r) for p, r in assignment.partitions.items()}
        return partitions, assignment.topic_id or ZERO_UUID

    async def get_topic_assignments(self, topics: Sequence[str]) -> list[tuple[dict[int, list[int]] | None, uuid.UUID]]:
        """:meth:`get_topic_assignment` of many topics, read in one pipelined batch."""
        znodes = await self.store.get_many([TopicZNode.path(t) for t in topics])
        out: list[tuple[dict[int, list[int]] | None, uuid.UUID]] = []
        for topic, znode in zip(topics, znodes, strict=True):
            if znode is None:
                out.append((None, ZERO_UUID))
                continue
            assignment = TopicZNode.decode(topic, znode[0])
            out.append(({p: list(r) for p, r in assignment.partitions.items()}, assignment.topic_id or ZERO_UUID))
        return out

    async def request_topic_deletion(self, topic: str) -> None:
        """Mark ``topic`` for deletion: create ``/admin/delete_topics/<t>`` (idempotent).

        Kafka's ``createDeleteTopicPath``: the admin side of a deletion.
        """
        try:
            await self.store.create(DeleteTopicsTopicZNode.path(topic), makepath=True)
        except NodeExistsError:
            pass

    async def get_topic_deletions(self) -> list[str]:
        """Topics marked for deletion (children of ``/admin/delete_topics``), sorted."""
        try:
            return await self.store.get_children(DeleteTopicsZNode.path())
        except NoNodeError:
            return []

    async def delete_topic(self, topic: str) -> None:
        """Delete ``/brokers/topics/<t>`` (recursively: partition states) and ``/config/topics/<t>``.

        The controller's step once the replicas are stopped. Idempotent: missing znodes are
        skipped. The deletion mark stays until :meth:`delete_topic_deletion`, Kafka's order, so a
        controller that fails over midway finds the topic still marked and finishes the job.
        """
        for path, recursive in (
            (TopicZNode.path(topic), True),
            (ConfigEntityZNode.path(ConfigType.TOPIC, topic), False),
        ):
            try:
                await self.store.delete(path, recursive=recursive)
            except NoNodeError:
                pass

    async def delete_topic_deletion(self, topic: str) -> None:
        """Remove the mark ``/admin/delete_topics/<t>`` (Kafka's ``deleteTopicDeletions``); idempotent."""
        try:
            await self.store.delete(DeleteTopicsTopicZNode.path(topic))
        except NoNodeError:
            pass

    # -- partition state ------------------------------------------------------------------------------

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartitionLike]) -> str:
        """Write an ``isr_change_`` sequential notification (the controller then refreshes metadata)."""
        return await self.store.create(
            IsrChangeNotificationSequenceZNode.path(),
            IsrChangeNotificationSequenceZNode.encode(partitions),
            sequential=True,
            makepath=True,
        )

    async def pop_isr_change_notifications(self) -> set[TopicPartition]:
        """Read and delete every pending ISR change notification (the controller's side)."""
        changed: set[TopicPartition] = set()
        for path, data in await self._pop_children(IsrChangeNotificationZNode.path()):
            changed |= IsrChangeNotificationSequenceZNode.decode(path, data)
        return changed

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        """Write a ``log_dir_event_`` sequential notification: a log dir of ``broker_id`` failed."""
        return await self.store.create(
            LogDirEventNotificationSequenceZNode.path(),
            LogDirEventNotificationSequenceZNode.encode(broker_id),
            sequential=True,
            makepath=True,
        )

    async def pop_log_dir_event_notifications(self) -> set[int]:
        """Read and delete every pending log dir event; the brokers they name (the controller's side)."""
        brokers: set[int] = set()
        for path, data in await self._pop_children(LogDirEventNotificationZNode.path()):
            try:
                brokers.add(LogDirEventNotificationSequenceZNode.decode(path, data))
            except ValueError as exc:
                log.warning("ignoring malformed log dir event %s: %s", path, exc)
        return brokers

    async def _pop_children(self, parent: str) -> list[tuple[str, bytes]]:
        """(path, data) of every child of ``parent``, each deleted once read (none: no parent)."""
        try:
            children = await self.store.get_children(parent)
        except NoNodeError:
            return []
        out = []
        for child in children:
            path = f"{parent}/{child}"
            try:
                data, _ = await self.store.get(path)
                await self.store.delete(path)
            except NoNodeError:
                continue
            out.append((path, data))
        return out

    # -- reassignment ---------------------------------------------------------------------------------

    async def get_partition_reassignment(self) -> list[PartitionAssignment]:
        try:
            data, _ = await self.store.get(ReassignPartitionsZNode.path())
        except NoNodeError:
            return []
        return ReassignPartitionsZNode.decode(data)

    async def set_partition_reassignment(self, assignments: Iterable[PartitionAssignment]) -> None:
        """Create or replace ``/admin/reassign_partitions``."""
        data = ReassignPartitionsZNode.encode(assignments)
        try:
            await self.store.create(ReassignPartitionsZNode.path(), data, makepath=True)
        except NodeExistsError:
            await self.store.set(ReassignPartitionsZNode.path(), data)

    async def delete_partition_reassignment(self) -> None:
        try:
            await self.store.delete(ReassignPartitionsZNode.path())
        except NoNodeError:
            pass

    async def get_preferred_replica_election(self) -> bytes | None:
        """The raw ``/admin/preferred_replica_election`` (``{"version":1,"partitions":[{"topic":"t",
        "partition":0}]}``, written by the ZooKeeper-era tool), or None when there is none."""
        try:
            data, _ = await self.store.get(PREFERRED_REPLICA_ELECTION_PATH)
        except NoNodeError:
            return None
        return data

    async def delete_preferred_replica_election(self) -> None:
        """Delete ``/admin/preferred_replica_election`` once handled; idempotent."""
        try:
            await self.store.delete(PREFERRED_REPLICA_ELECTION_PATH)
        except NoNodeError:
            pass

    # -- configs ----------------------------------------------------------------------------------------

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """Overrides of one entity (``ConfigType.TOPIC``, ``"t"``); empty if none."""
        return await fetch_entity_config(self.store, entity_type, entity_name)

    async def set_entity_configs(self, entity_type: str, entity_name: str, configs: Mapping[str, str]) -> None:
        """Replace the entity's overrides, then write a ``config_change_`` notification (writers that
        share an entity's map merge with :func:`~odradek.metadata.config_entities.alter_entity_config`)."""
        path = ConfigEntityZNode.path(entity_type, entity_name)
        data = ConfigEntityZNode.encode(configs)
        try:
            await self.store.set(path, data)
        except NoNodeError:
            await self.store.create(path, data, makepath=True)
        await create_config_change_notification(self.store, f"{entity_type}/{entity_name}")

    # -- consumer offsets (ZooKeeper-stored, seed 004) ----------------------------------------------

    async def get_consumer_offset(self, group: str, tp: TopicPartitionLike) -> int | None:
        try:
            data, _ = await self.store.get(ConsumerOffsetZNode.path(group, tp.topic, tp.partition))
        except NoNodeError:
            return None
        return ConsumerOffsetZNode.decode(group, tp.topic, tp.partition, data)

    async def set_consumer_offset(self, group: str, tp: TopicPartitionLike, offset: int) -> None:
        path = ConsumerOffsetZNode.path(group, tp.topic, tp.partition)
        data = ConsumerOffsetZNode.encode(offset)
        try:
            await self.store.set(path, data)
        except NoNodeError:
            try:
                await self.store.create(path, data, makepath=True)
            except NodeExistsError:
                await self.store.set(path, data)

    # -- producer ids -----------------------------------------------------------------------------

    async def allocate_producer_id_block(self, broker_id: int, block_size: int = 1000) -> ProducerIdBlock:
        """Claim the next ``block_size`` producer ids (Kafka's ``ZkProducerIdManager``).

        A conditional update of ``/latest_producer_id_block`` (created if missing), retried until
        it wins, so two brokers never get overlapping blocks. The first block starts at 0.
        """
        path = ProducerIdBlockZNode.path()
        while True:
            try:
                data, stat = await self.store.get(path)
            except NoNodeError:
                await self.store.ensure_path(path)
                continue
            previous = ProducerIdBlockZNode.decode(data)
            start = 0 if previous is None else previous.block_end + 1
            block = ProducerIdBlock(broker_id, start, start + block_size - 1)
            try:
                await self.store.set(path, ProducerIdBlockZNode.encode(block), stat.version)
                return block
            except BadVersionError:
                continue
