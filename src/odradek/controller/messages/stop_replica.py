"""StopReplica (key 5) at every version Kafka 3.9 defines (v0..v4): encode, decode, response.

Layouts (Kafka's): v0 lists (topic, partition) pairs, v1/v2 topics with partition indexes and one
``delete_partitions`` flag for the whole request, v3+ a ``delete_partition`` flag and a
``leader_epoch`` per partition: -2 (Kafka's ``EpochDuringDelete``) when deleting, else the leader
epoch the controller knows (-1: any). A v3+ message may mix deletions and plain stops; it decodes
to one request per value of the flag. The response lists partition errors with topic names at
every version.

Pure functions: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from odradek.controller.messages import by_topic, set_frozen, sorted_partitions
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.inter_broker_messages import VERSIONS, request_class, response_class
from odradek.protocol.messages import build, nested
from odradek.storage import TopicPartition

__all__ = [
    "API_KEY",
    "EPOCH_DURING_DELETE",
    "MAX_VERSION",
    "MIN_VERSION",
    "StopReplicaRequest",
    "StopReplicaRequestBuilder",
    "decode",
    "encode",
    "encode_response",
    "response_errors",
]

API_KEY = ApiKey.STOP_REPLICA
MIN_VERSION = VERSIONS[API_KEY].start
MAX_VERSION = VERSIONS[API_KEY].stop - 1
"""v4: what Kafka 3.9's ZooKeeper controller sends, and the highest this broker answers."""

EPOCH_DURING_DELETE = -2


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
        set_frozen(self, "partitions", tuple(self.partitions))
        set_frozen(self, "leader_epochs", MappingProxyType(dict(self.leader_epochs)))


def encode(request: StopReplicaRequest, version: int, broker_epoch: int = -1) -> Any:
    """The wire request at ``version``."""
    cls = request_class(API_KEY, version)
    grouped = by_topic(dict.fromkeys(request.partitions))
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
        delete = request.delete_partitions
        fields["topic_states"] = tuple(
            build(
                nested(cls, "StopReplicaTopicState"),
                topic_name=topic,
                partition_states=tuple(
                    build(
                        state_cls,
                        partition_index=tp.partition,
                        leader_epoch=EPOCH_DURING_DELETE if delete else request.leader_epochs.get(tp, -1),
                        delete_partition=delete,
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
        broker_epoch=broker_epoch,
        delete_partitions=request.delete_partitions,
        **fields,
    )


@dataclass(frozen=True)
class StopReplicaRequestBuilder:
    """``request`` as queued for one broker; ``broker_epoch`` is the receiver's (KIP-380)."""

    request: StopReplicaRequest
    broker_epoch: int = -1

    def build(self, version: int) -> Any:
        """The wire request at ``version``."""
        return encode(self.request, version, self.broker_epoch)


def decode(message: Any, version: int) -> list[StopReplicaRequest]:
    """The requests a wire message at ``version`` carries: one per value of the delete flag
    (only v3+ can mix them; an empty message is one empty plain stop)."""
    controller_id, epoch = int(message.controller_id), int(message.controller_epoch)
    if version == 0:
        tps = [TopicPartition(str(p.topic_name), int(p.partition_index)) for p in message.ungrouped_partitions]
        return [StopReplicaRequest(controller_id, epoch, tps, bool(message.delete_partitions))]
    if version <= 2:
        tps = [TopicPartition(str(t.name), int(i)) for t in message.topics for i in t.partition_indexes]
        return [StopReplicaRequest(controller_id, epoch, tps, bool(message.delete_partitions))]
    split: dict[bool, dict[TopicPartition, int]] = {}
    for t in message.topic_states:
        for p in t.partition_states:
            split.setdefault(bool(p.delete_partition), {})[
                TopicPartition(str(t.topic_name), int(p.partition_index))
            ] = int(p.leader_epoch)
    if not split:
        return [StopReplicaRequest(controller_id, epoch, [], False)]
    return [StopReplicaRequest(controller_id, epoch, list(epochs), delete, epochs) for delete, epochs in split.items()]


def encode_response(version: int, error: ErrorCode, errors: Mapping[TopicPartition, ErrorCode]) -> Any:
    """The wire response at ``version``: ``error`` at the top, ``errors`` per partition."""
    cls = response_class(API_KEY, version)
    partition_cls = nested(cls, "StopReplicaPartitionError")
    return build(
        cls,
        error_code=error,
        partition_errors=tuple(
            build(partition_cls, topic_name=tp.topic, partition_index=tp.partition, error_code=errors[tp])
            for tp in sorted_partitions(errors)
        ),
    )


def response_errors(response: Any) -> list[tuple[str, int, ErrorCode]]:
    """(topic, partition, error) of every partition a response lists, at any version."""
    return [(str(p.topic_name), int(p.partition_index), ErrorCode(p.error_code)) for p in response.partition_errors]
