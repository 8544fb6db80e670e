"""The controller's requests as Kafka wire messages, at any version Kafka 3.9 defines.

:mod:`odradek.controller.channel` keeps requests as the internal dataclasses of that module and
turns each into a kio message (:mod:`odradek.protocol.inter_broker_messages`) only when it is sent,
at the highest version both sides support (:data:`MAX_VERSIONS` on ours: LeaderAndIsr v7,
StopReplica v4, UpdateMetadata v8, as Kafka 3.9's controller sends them). Layouts follow the specs:

- LeaderAndIsr: v0/v1 flat partition states carrying their topic name, v2+ grouped by topic,
  v5+ with topic ids and ``type`` 0 (Kafka's ZooKeeper controller never sends 1/2 outside a
  migration). ``partition_epoch`` is the state znode's version. ``live_leaders`` lists the
  inter-broker endpoint of every leader named in the request.
- StopReplica: v0 (topic, partition) pairs, v1/v2 per topic with one ``delete_partitions`` flag,
  v3+ per partition with ``delete_partition`` and ``leader_epoch``: -2 (Kafka's
  ``EpochDuringDelete``) when deleting, else the leader epoch the controller knows (-1 unknown).
- UpdateMetadata: every live broker with all its endpoints (v0: the inter-broker one only), the
  rack (v2+), partition states; a deleted topic's partitions carry leader -2 (Kafka's
  ``LeaderDuringDelete``), which tells brokers to drop them from their cache.

Pure functions: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol.inter_broker_messages import (
    LEADER_AND_ISR_KEY,
    STOP_REPLICA_KEY,
    UPDATE_METADATA_KEY,
    request_class,
)
from odradek.protocol.messages import build, nested
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

__all__ = [
    "EPOCH_DURING_DELETE",
    "LEADER_DURING_DELETE",
    "MAX_VERSIONS",
    "SECURITY_PROTOCOL_IDS",
    "leader_and_isr",
    "stop_replica",
    "update_metadata",
]

MAX_VERSIONS = {LEADER_AND_ISR_KEY: 7, STOP_REPLICA_KEY: 4, UPDATE_METADATA_KEY: 8}
"""The highest version the controller sends of each API (Kafka 3.9's ZooKeeper controller)."""

LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's ``SecurityProtocol`` ids, as UpdateMetadata carries them."""


def _by_topic(states: Mapping[TopicPartition, Any]) -> dict[str, list[tuple[TopicPartition, Any]]]:
    grouped: dict[str, list[tuple[TopicPartition, Any]]] = {}
    for tp, value in sorted(states.items(), key=lambda item: (item[0].topic, item[0].partition)):
        grouped.setdefault(tp.topic, []).append((tp, value))
    return grouped


def endpoint_of(info: BrokerInfo, listener: str) -> tuple[str, int] | None:
    """(host, port) of ``listener`` in a broker's registration, or None if it lacks it."""
    return info.endpoint_map().get(listener)


def leader_and_isr(request: LeaderAndIsrRequest, version: int, brokers: Mapping[int, BrokerInfo], listener: str) -> Any:
    """LeaderAndIsr at ``version``; ``brokers`` gives the leaders' endpoints for ``live_leaders``."""
    cls = request_class(LEADER_AND_ISR_KEY, version)
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

    grouped = _by_topic(request.partition_states)
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
    leaders = sorted({s.leader for s in request.partition_states.values() if s.leader in brokers})
    live_leaders = []
    for broker_id in leaders:
        endpoint = endpoint_of(brokers[broker_id], listener) or (brokers[broker_id].host, brokers[broker_id].port)
        live_leaders.append(
            build(nested(cls, "LeaderAndIsrLiveLeader"), broker_id=broker_id, host_name=endpoint[0], port=endpoint[1])
        )
    return build(
        cls,
        controller_id=request.controller_id,
        is_k_raft_controller=False,
        controller_epoch=request.controller_epoch,
        broker_epoch=-1,
        type=0,
        live_leaders=tuple(live_leaders),
        **layout,
    )


def stop_replica(request: StopReplicaRequest, version: int) -> Any:
    """StopReplica at ``version``."""
    cls = request_class(STOP_REPLICA_KEY, version)
    grouped = _by_topic({tp: None for tp in request.partitions})
    fields: dict[str, Any] = {}
    if version == 0:
        fields["ungrouped_partitions"] = tuple(
            build(nested(cls, "StopReplicaPartitionV0"), topic_name=tp.topic, partition_index=tp.partition)
            for items in grouped.values()
            for tp, _ in items
        )
    elif version <= 2:
        fields["topics"] = tuple(
            build(
                nested(cls, "StopReplicaTopicV1"), name=topic, partition_indexes=tuple(tp.partition for tp, _ in items)
            )
            for topic, items in grouped.items()
        )
    else:
        state_cls = nested(cls, "StopReplicaPartitionState")
        fields["topic_states"] = tuple(
            build(
                nested(cls, "StopReplicaTopicState"),
                topic_name=topic,
                partition_states=tuple(
                    state_cls(
                        partition_index=tp.partition,
                        leader_epoch=EPOCH_DURING_DELETE
                        if request.delete_partitions
                        else request.leader_epochs.get(tp, -1),
                        delete_partition=request.delete_partitions,
                    )
                    for tp, _ in items
                ),
            )
            for topic, items in grouped.items()
        )
    return build(
        cls,
        controller_id=request.controller_id,
        is_k_raft_controller=False,
        controller_epoch=request.controller_epoch,
        broker_epoch=-1,
        delete_partitions=request.delete_partitions,
        **fields,
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


def update_metadata(request: UpdateMetadataRequest, version: int, listener: str) -> Any:
    """UpdateMetadata at ``version``; partitions of ``request.deleted_topics`` go out with leader -2."""
    cls = request_class(UPDATE_METADATA_KEY, version)
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

    grouped = _by_topic(request.partition_states)
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
    return build(
        cls,
        controller_id=request.controller_id,
        is_k_raft_controller=False,
        type=0,
        controller_epoch=request.controller_epoch,
        broker_epoch=-1,
        **layout,
        live_brokers=tuple(_live_broker(cls, b, version, listener) for b in sorted(request.live_brokers, key=_id)),
    )


def _id(info: BrokerInfo) -> int:
    return info.id


def brokers_from_wire(live_brokers: Iterable[Any], version: int) -> list[BrokerInfo]:
    """UpdateMetadata's ``live_brokers`` as registrations; ``host``/``port`` are the first endpoint's.
    Before v3 an endpoint's listener is named after its security protocol, as Kafka does."""
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
