"""The broker's view of the cluster (Kafka's ``MetadataCache``), filled by UpdateMetadata.

Answers Metadata, DescribeCluster and "who leads this partition" without touching the
metadata store. Filled only by UpdateMetadata from the controller (over the wire, see
``server/apis/update_metadata.py``): each replaces the live brokers and the partitions it
carries, and drops the topics it deletes, in one synchronous step, so readers never see a
half-applied update. Until the first UpdateMetadata arrives the cache is empty
(``controller_epoch`` 0, no brokers, no topics) and Metadata answers with that. Event loop only.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from odradek.metadata.znodes import BrokerInfo
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

ZERO_UUID = uuid.UUID(int=0)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    offline_replicas: dict[int, frozenset[int]] = field(default_factory=dict)
    """Partition -> its replicas the controller last reported offline (a failed log dir, or a
    dead broker); partitions without offline replicas are absent."""

    def offline(self, partition: int, live: Collection[int]) -> tuple[int, ...]:
        """The partition's offline replicas: on a broker not in ``live``, or reported offline."""
        state = self.partitions[partition]
        reported = self.offline_replicas.get(partition, frozenset())
        return tuple(r for r in state.replicas if r not in live or r in reported)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataCache:
    def __init__(self, inter_broker_listener: str | None = None) -> None:
        self.inter_broker_listener = inter_broker_listener
        """The listener :meth:`broker_address` answers for (None: each broker's first)."""
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.controller_id: int = -1
        self.controller_epoch: int = 0
        self.topic_names: dict[uuid.UUID, str] = {}
        """Topic id -> name, for requests that name topics by id (Fetch v13+); no zero id."""
        self._by_listener: dict[str, dict[int, BrokerInfo]] = {}

    def update(
        self,
        controller_id: int,
        controller_epoch: int,
        brokers: Iterable[BrokerInfo],
        states: Mapping[TopicPartition, PartitionState],
        topic_ids: Mapping[str, uuid.UUID],
        deleted_topics: AbstractSet[str],
        offline_replicas: Mapping[TopicPartition, Collection[int]] | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        self.brokers = {b.id: b for b in brokers}
        self._by_listener = {}
        for topic in deleted_topics:
            gone = self.topics.pop(topic, None)
            if gone is not None:
                self.topic_names.pop(gone.topic_id, None)
        for tp, state in states.items():
            if tp.topic in deleted_topics:
                continue
            meta = self.topics.get(tp.topic)
            topic_id = topic_ids.get(tp.topic, ZERO_UUID)
            if meta is None:
                meta = self.topics[tp.topic] = TopicMetadata(tp.topic, topic_id)
            elif topic_id != ZERO_UUID and meta.topic_id != topic_id:  # an id learnt later
                self.topic_names.pop(meta.topic_id, None)
                meta.topic_id = topic_id
            if meta.topic_id != ZERO_UUID:
                self.topic_names[meta.topic_id] = tp.topic
            meta.partitions[tp.partition] = state
            offline = frozenset((offline_replicas or {}).get(tp, ()))
            if offline:
                meta.offline_replicas[tp.partition] = offline
            else:
                meta.offline_replicas.pop(tp.partition, None)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        meta = self.topics.get(tp.topic)
        return meta.partitions.get(tp.partition) if meta else None

    def brokers_on(self, listener: str) -> dict[int, BrokerInfo]:
        """The live brokers as a client of ``listener`` must reach them (KIP-103, Kafka's
        ``getAliveBrokerNodes(listenerName)``): ``host``/``port`` are each broker's endpoint on that
        listener; a broker without the listener is left out. Cached until the next update."""
        found = self._by_listener.get(listener)
        if found is None:
            found = {}
            for broker_id, info in self.brokers.items():
                address = info.endpoint_map().get(listener)
                if address is not None:
                    found[broker_id] = dataclasses.replace(info, host=address[0], port=address[1])
            self._by_listener[listener] = found
        return found

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    # --- the coordinators' view (odradek.coordinator.runtime.MetadataView) ---------------------

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The topic's id; None while unknown (or known without an id)."""
        meta = self.topics.get(name)
        return meta.topic_id if meta is not None and meta.topic_id != ZERO_UUID else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id; None while unknown."""
        return self.topic_names.get(topic_id)

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count; None while the cache does not know the topic."""
        meta = self.topics.get(topic)
        return None if meta is None else len(meta.partitions)

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader; -1 when unknown or offline."""
        state = self.partition_state(tp)
        return -1 if state is None else int(state.leader)

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """(host, port) of a live broker's inter-broker listener (its first listener when that is
        not known); None if it is not live. What the transaction markers are sent to."""
        info = self.brokers.get(broker_id)
        if info is None:
            return None
        by_listener = info.endpoint_map().get(self.inter_broker_listener or "")
        return by_listener if by_listener is not None else (info.host, info.port)
