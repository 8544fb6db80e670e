"""LeaderAndIsr (key 4) at every version Kafka 3.9 defines (v0..v7): encode, decode, response.

Layouts (Kafka's): v0/v1 list partition states flat, each carrying its topic name; v2+ group them
by topic; v5+ add topic ids and ``type`` (always 0: Kafka's ZooKeeper controller sends 1/2 only
during a migration). ``partition_epoch`` is the partition state znode's version (``zk_version``).
``live_leaders`` lists the inter-broker endpoint of every leader the request names that the
sender knows as a registered broker. The response lists partition errors with topic names up to
v4 and grouped by topic id from v5 (the zero id for a topic sent without one).

Pure functions: safe from any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from odradek.controller.messages import (
    ZERO_UUID,
    by_topic,
    endpoint_of,
    frozen_states,
    set_frozen,
    sorted_partitions,
)
from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.inter_broker_messages import VERSIONS, request_class, response_class
from odradek.protocol.messages import build, nested
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = [
    "API_KEY",
    "MAX_VERSION",
    "MIN_VERSION",
    "LeaderAndIsrRequest",
    "LeaderAndIsrRequestBuilder",
    "decode",
    "encode",
    "encode_response",
    "response_errors",
]

API_KEY = ApiKey.LEADER_AND_ISR
MIN_VERSION = VERSIONS[API_KEY].start
MAX_VERSION = VERSIONS[API_KEY].stop - 1
"""v7: what Kafka 3.9's ZooKeeper controller sends, and the highest this broker answers."""


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    """The partitions' states a broker must apply: it leads those whose ``leader`` it is and
    follows the others; ``topic_ids`` name each topic's id (sent from v5)."""

    controller_id: int
    controller_epoch: int
    partition_states: Mapping[TopicPartition, PartitionState]
    topic_ids: Mapping[str, uuid.UUID]

    def __post_init__(self) -> None:
        set_frozen(self, "partition_states", frozen_states(self.partition_states))
        set_frozen(self, "topic_ids", MappingProxyType(dict(self.topic_ids)))


def encode(
    request: LeaderAndIsrRequest,
    version: int,
    brokers: Mapping[int, BrokerInfo],
    listener: str,
    broker_epoch: int = -1,
) -> Any:
    """The wire request at ``version``; ``brokers`` gives the leaders' ``listener`` endpoints."""
    cls = request_class(API_KEY, version)
    state_cls = nested(cls, "LeaderAndIsrPartitionState")

    def partition(tp: TopicPartition, state: PartitionState) -> Any:
        return build(
            state_cls,
            topic_name=tp.topic,
            partition_index=tp.partition,
            controller_epoch=state.controller_epoch,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=tuple(state.isr),
            partition_epoch=state.zk_version,
            replicas=tuple(state.replicas),
            adding_replicas=(),
            removing_replicas=(),
            is_new=False,
            leader_recovery_state=0,
        )

    grouped = by_topic(request.partition_states)
    layout: dict[str, Any] = {}
    if version <= 1:
        layout["ungrouped_partition_states"] = tuple(partition(tp, s) for items in grouped.values() for tp, s in items)
    else:
        layout["topic_states"] = tuple(
            build(
                nested(cls, "LeaderAndIsrTopicState"),
                topic_name=topic,
                topic_id=request.topic_ids.get(topic),
                partition_states=tuple(partition(tp, s) for tp, s in items),
            )
            for topic, items in grouped.items()
        )
    live_leaders = []
    for broker_id in sorted({s.leader for s in request.partition_states.values() if s.leader in brokers}):
        info = brokers[broker_id]
        host, port = endpoint_of(info, listener) or (info.host, info.port)
        live_leaders.append(
            build(nested(cls, "LeaderAndIsrLiveLeader"), broker_id=broker_id, host_name=host, port=port)
        )
    return build(
        cls,
        controller_id=request.controller_id,
        is_k_raft_controller=False,
        controller_epoch=request.controller_epoch,
        broker_epoch=broker_epoch,
        type=0,
        live_leaders=tuple(live_leaders),
        **layout,
    )


@dataclass(frozen=True)
class LeaderAndIsrRequestBuilder:
    """``request`` as queued for one broker: ``brokers`` (the registrations known when queued)
    give the leaders' ``listener`` endpoints; ``broker_epoch`` is the receiver's (KIP-380)."""

    request: LeaderAndIsrRequest
    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)
    listener: str = "PLAINTEXT"
    broker_epoch: int = -1

    def build(self, version: int) -> Any:
        """The wire request at ``version``."""
        return encode(self.request, version, self.brokers, self.listener, self.broker_epoch)

    def topic_names(self) -> dict[str, str]:
        """Topic id (as text) -> name, to name the partitions of a v5+ answer."""
        return {str(topic_id): topic for topic, topic_id in self.request.topic_ids.items()}


def wire_partition_states(message: Any, version: int) -> list[tuple[str, Any]]:
    """(topic name, wire partition state) of every partition, whatever the version's layout."""
    if version <= 1:
        return [(str(p.topic_name), p) for p in message.ungrouped_partition_states]
    return [(str(t.topic_name), p) for t in message.topic_states for p in t.partition_states]


def decode(message: Any, version: int) -> LeaderAndIsrRequest:
    """The request a wire message at ``version`` carries (topic ids from v5, else none)."""
    states = {
        TopicPartition(topic, int(p.partition_index)): PartitionState(
            leader=int(p.leader),
            leader_epoch=int(p.leader_epoch),
            isr=[int(r) for r in p.isr],
            replicas=[int(r) for r in p.replicas],
            controller_epoch=int(p.controller_epoch),
            zk_version=int(p.partition_epoch),
        )
        for topic, p in wire_partition_states(message, version)
    }
    topic_ids = {str(t.topic_name): t.topic_id or ZERO_UUID for t in message.topic_states} if version >= 5 else {}
    return LeaderAndIsrRequest(int(message.controller_id), int(message.controller_epoch), states, topic_ids)


def encode_response(
    version: int,
    error: ErrorCode,
    errors: Mapping[TopicPartition, ErrorCode],
    topic_ids: Mapping[str, uuid.UUID],
) -> Any:
    """The wire response at ``version``: ``error`` at the top, ``errors`` per partition."""
    cls = response_class(API_KEY, version)
    partition_cls = nested(cls, "LeaderAndIsrPartitionError")
    ordered = sorted_partitions(errors)
    if version <= 4:
        partition_errors = tuple(
            build(partition_cls, topic_name=tp.topic, partition_index=tp.partition, error_code=errors[tp])
            for tp in ordered
        )
        return build(cls, error_code=error, partition_errors=partition_errors)
    grouped = by_topic(errors)
    topics = tuple(
        build(
            nested(cls, "LeaderAndIsrTopicError"),
            topic_id=topic_ids.get(topic, ZERO_UUID),
            partition_errors=tuple(
                build(partition_cls, partition_index=tp.partition, error_code=code) for tp, code in items
            ),
        )
        for topic, items in grouped.items()
    )
    return build(cls, error_code=error, topics=topics)


def response_errors(response: Any, topic_names: Mapping[str, str]) -> list[tuple[str, int, ErrorCode]]:
    """(topic, partition, error) of every partition a response lists, at any version; a topic
    answered by id (v5+) is named through ``topic_names`` (id as text -> name) when it is known
    there, else by its id."""
    listed = [(str(p.topic_name), p) for p in getattr(response, "partition_errors", ())]
    for topic in getattr(response, "topics", ()):
        name = topic_names.get(str(topic.topic_id), str(topic.topic_id))
        listed += [(name, p) for p in topic.partition_errors]
    return [(topic, int(p.partition_index), ErrorCode(p.error_code)) for topic, p in listed]
