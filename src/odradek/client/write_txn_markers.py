"""WriteTxnMarkers (key 27): the one place its wire shape is written and read.

Kafka's ``WriteTxnMarkersRequest``: markers, each (producer id, producer epoch, coordinator epoch,
COMMIT or ABORT, partitions), sent by a transaction coordinator (and ``odradek transactions
abort``) to a partition leader, which appends one control batch per marker and partition. Only
v1 is spoken (Kafka 4.0 removed v0, and the protocol library has no codec for it). The request
lists each marker's partitions per topic; the response answers an error code per partition, per
marker, in the request's order. :class:`TxnMarkerEntry` is a marker as the coordinator, the CLI
and the broker's API module (``server/apis/write_txn_markers.py``) handle it.

Pure functions and immutable data: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import api_schema
from odradek.protocol.messages import build, nested
from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "API_KEY",
    "MAX_VERSION",
    "MIN_VERSION",
    "TxnMarkerEntry",
    "decode",
    "decode_response",
    "encode",
    "encode_response",
]

API_KEY = ApiKey.WRITE_TXN_MARKERS
MIN_VERSION = 1
MAX_VERSION = 1


@dataclass(frozen=True)
class TxnMarkerEntry:
    """One marker: ``commit`` True for COMMIT, False for ABORT; ``partitions`` in request order."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


def _topic_runs(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Consecutive partitions of one topic as (topic, partition indexes), in order."""
    runs: list[tuple[str, list[int]]] = []
    for tp in partitions:
        if not runs or runs[-1][0] != tp.topic:
            runs.append((tp.topic, []))
        runs[-1][1].append(tp.partition)
    return runs


def encode(markers: Sequence[TxnMarkerEntry], version: int = MAX_VERSION) -> Any:
    """The wire request at ``version``; a marker's partitions of one topic should be adjacent."""
    cls = api_schema(API_KEY, version).request_type
    return build(
        cls,
        markers=tuple(
            build(
                nested(cls, "WritableTxnMarker"),
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                transaction_result=m.commit,
                topics=tuple(
                    build(nested(cls, "WritableTxnMarkerTopic"), name=topic, partition_indexes=tuple(indexes))
                    for topic, indexes in _topic_runs(m.partitions)
                ),
                coordinator_epoch=m.coordinator_epoch,
            )
            for m in markers
        ),
    )


def decode(message: Any) -> list[TxnMarkerEntry]:
    """The markers of a wire request, partitions in the request's order."""
    return [
        TxnMarkerEntry(
            int(m.producer_id),
            int(m.producer_epoch),
            int(m.coordinator_epoch),
            bool(m.transaction_result),
            tuple(TopicPartition(str(t.name), int(i)) for t in m.topics for i in t.partition_indexes),
        )
        for m in message.markers
    ]


def encode_response(version: int, results: Sequence[tuple[int, Sequence[tuple[TopicPartition, ErrorCode]]]]) -> Any:
    """The wire response at ``version``: per marker (producer id, (partition, error) in request order)."""
    cls = api_schema(API_KEY, version).response_type
    partition_cls = nested(cls, "WritableTxnMarkerPartitionResult")
    markers = []
    for producer_id, errors in results:
        codes = iter(code for _, code in errors)
        topics = tuple(
            build(
                nested(cls, "WritableTxnMarkerTopicResult"),
                name=topic,
                partitions=tuple(build(partition_cls, partition_index=i, error_code=next(codes)) for i in indexes),
            )
            for topic, indexes in _topic_runs(tp for tp, _ in errors)
        )
        markers.append(build(nested(cls, "WritableTxnMarkerResult"), producer_id=producer_id, topics=topics))
    return build(cls, markers=tuple(markers))


def decode_response(response: Any) -> list[list[tuple[TopicPartition, ErrorCode]]]:
    """Per marker, (partition, error) in the response's order."""
    return [
        [
            (TopicPartition(str(t.name), int(p.partition_index)), ErrorCode(p.error_code))
            for t in m.topics
            for p in t.partitions
        ]
        for m in response.markers
    ]
