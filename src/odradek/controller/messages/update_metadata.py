"""UpdateMetadata (key 6) at every version Kafka 3.9 defines (v0..v8): encode, decode, response.

Layouts (Kafka's): v0 gives one host/port per broker (the inter-broker listener's), v1+
``endpoints`` (v3+ with the listener name; before v3 an endpoint is named by its security
protocol, so other listeners cannot be expressed and are left out), v2+ ``rack``, v4+
``offline_replicas``, v5+ groups partitions by topic, v7+ ``topic_id``. The partitions of a
deleted topic go out with leader -2 (Kafka's ``LeaderDuringDelete``), which tells brokers to drop
them from their cache; decoding turns them back into ``deleted_topics``. A replica is offline
when its broker is not live or the controller listed it as on a failed log dir. The response is
an error code only.

Pure functions: safe from any thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from odradek.controller.messages import ZERO_UUID, by_topic, endpoint_of, frozen_states, set_frozen
from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.inter_broker_messages import VERSIONS, request_class, response_class
from odradek.protocol.messages import build, nested
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = [
    "API_KEY",
    "LEADER_DURING_DELETE",
    "MAX_VERSION",
    "MIN_VERSION",
    "SECURITY_PROTOCOL_IDS",
    "UpdateMetadataRequest",
    "UpdateMetadataRequestBuilder",
    "brokers_from_wire",
    "decode",
    "encode",
    "encode_response",
]

API_KEY = ApiKey.UPDATE_METADATA
MIN_VERSION = VERSIONS[API_KEY].start
MAX_VERSION = VERSIONS[API_KEY].stop - 1
"""v8: what Kafka 3.9's ZooKeeper controller sends, and the highest this broker answers."""

LEADER_DURING_DELETE = -2
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's ``SecurityProtocol`` ids, as UpdateMetadata carries them."""


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
        set_frozen(self, "live_brokers", tuple(self.live_brokers))  # BrokerInfo is frozen
        set_frozen(self, "partition_states", frozen_states(self.partition_states))
        set_frozen(self, "topic_ids", MappingProxyType(dict(self.topic_ids)))
        set_frozen(self, "deleted_topics", frozenset(self.deleted_topics))
        set_frozen(
            self, "offline_replicas", MappingProxyType({tp: frozenset(r) for tp, r in self.offline_replicas.items()})
        )


def _live_broker(cls: type, info: BrokerInfo, version: int, listener: str) -> Any:
    protocols = info.listener_security_protocol_map
    endpoints = []
    for name, (host, port) in info.endpoint_map().items() if version >= 1 else ():
        protocol = protocols.get(name, name)
        if version < 3 and name != protocol:
            continue  # before v3 an endpoint is named by its protocol; other listeners cannot be expressed
        endpoints.append(
            build(
                nested(cls, "UpdateMetadataEndpoint"),
                port=port,
                host=host,
                listener=name,
                security_protocol=SECURITY_PROTOCOL_IDS.get(protocol, -1),
            )
        )
    v0_host, v0_port = endpoint_of(info, listener) or (info.host, info.port)
    return build(
        nested(cls, "UpdateMetadataBroker"),
        id=info.id,
        v0_host=v0_host,
        v0_port=v0_port,
        endpoints=tuple(endpoints),
        rack=info.rack,
    )


def encode(request: UpdateMetadataRequest, version: int, listener: str, broker_epoch: int = -1) -> Any:
    """The wire request at ``version``; ``listener`` names the v0 host/port of each broker."""
    cls = request_class(API_KEY, version)
    state_cls = nested(cls, "UpdateMetadataPartitionState")
    live = {b.id for b in request.live_brokers}

    def partition(tp: TopicPartition, state: PartitionState) -> Any:
        deleted = tp.topic in request.deleted_topics
        return build(
            state_cls,
            topic_name=tp.topic,
            partition_index=tp.partition,
            controller_epoch=state.controller_epoch,
            leader=LEADER_DURING_DELETE if deleted else state.leader,
            leader_epoch=state.leader_epoch,
            isr=tuple(state.isr),
            zk_version=state.zk_version,
            replicas=tuple(state.replicas),
            offline_replicas=tuple(
                r for r in state.replicas if r not in live or r in request.offline_replicas.get(tp, ())
            ),
        )

    grouped = by_topic(request.partition_states)
    layout: dict[str, Any] = {}
    if version <= 4:
        layout["ungrouped_partition_states"] = tuple(partition(tp, s) for items in grouped.values() for tp, s in items)
    else:
        layout["topic_states"] = tuple(
            build(
                nested(cls, "UpdateMetadataTopicState"),
                topic_name=topic,
                topic_id=request.topic_ids.get(topic),
                partition_states=tuple(partition(tp, s) for tp, s in items),
            )
            for topic, items in grouped.items()
        )
    brokers = sorted(request.live_brokers, key=lambda b: b.id)
    return build(
        cls,
        controller_id=request.controller_id,
        is_k_raft_controller=False,
        type=0,
        controller_epoch=request.controller_epoch,
        broker_epoch=broker_epoch,
        **layout,
        live_brokers=tuple(_live_broker(cls, b, version, listener) for b in brokers),
    )


@dataclass(frozen=True)
class UpdateMetadataRequestBuilder:
    """``request`` as queued for one broker: ``listener`` names each broker's v0 host/port;
    ``broker_epoch`` is the receiver's (KIP-380)."""

    request: UpdateMetadataRequest
    listener: str = "PLAINTEXT"
    broker_epoch: int = -1

    def build(self, version: int) -> Any:
        """The wire request at ``version``."""
        return encode(self.request, version, self.listener, self.broker_epoch)


def brokers_from_wire(live_brokers: Iterable[Any], version: int) -> list[BrokerInfo]:
    """``live_brokers`` of a wire message as registrations; ``host``/``port`` are the first
    endpoint's. Before v3 an endpoint's listener is named after its security protocol, as Kafka does."""
    names = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}
    result = []
    for b in live_brokers:
        if version == 0:
            endpoints = [("PLAINTEXT", str(b.v0_host), int(b.v0_port), "PLAINTEXT")]
        else:
            endpoints = []
            for e in b.endpoints:
                protocol = names.get(int(e.security_protocol), "PLAINTEXT")
                endpoints.append((str(e.listener) if version >= 3 else protocol, str(e.host), int(e.port), protocol))
        first = endpoints[0] if endpoints else ("PLAINTEXT", "", -1, "PLAINTEXT")
        result.append(
            BrokerInfo(
                id=int(b.id),
                host=first[1],
                port=first[2],
                endpoints=[f"{n}://{h}:{p}" for n, h, p, _ in endpoints],
                listener_security_protocol_map={n: proto for n, _, _, proto in endpoints},
                rack=getattr(b, "rack", None),
            )
        )
    return result


def decode(message: Any, version: int) -> UpdateMetadataRequest:
    """The request a wire message at ``version`` carries (topic ids from v7, else none)."""
    if version <= 4:
        wire_states = [(str(p.topic_name), p) for p in message.ungrouped_partition_states]
    else:
        wire_states = [(str(t.topic_name), p) for t in message.topic_states for p in t.partition_states]
    states: dict[TopicPartition, PartitionState] = {}
    deleted: set[str] = set()
    offline: dict[TopicPartition, set[int]] = {}
    for topic, p in wire_states:
        if int(p.leader) == LEADER_DURING_DELETE:
            deleted.add(topic)
            continue
        tp = TopicPartition(topic, int(p.partition_index))
        if getattr(p, "offline_replicas", ()):  # v4+
            offline[tp] = {int(r) for r in p.offline_replicas}
        states[tp] = PartitionState(
            leader=int(p.leader),
            leader_epoch=int(p.leader_epoch),
            isr=[int(r) for r in p.isr],
            replicas=[int(r) for r in p.replicas],
            controller_epoch=int(p.controller_epoch),
            zk_version=int(p.zk_version),
        )
    topic_ids = (
        {str(t.topic_name): t.topic_id or ZERO_UUID for t in getattr(message, "topic_states", ())}
        if version >= 7
        else {}
    )
    return UpdateMetadataRequest(
        int(message.controller_id),
        int(message.controller_epoch),
        brokers_from_wire(message.live_brokers, version),
        states,
        topic_ids,
        deleted,
        offline,
    )


def encode_response(version: int, error: ErrorCode) -> Any:
    """The wire response at ``version``."""
    return build(response_class(API_KEY, version), error_code=error)
