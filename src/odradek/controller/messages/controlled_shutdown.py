"""ControlledShutdown (key 7) at every version Kafka 3.9 defines (v0..v3): encode, decode, response.

A broker stopping asks the controller to move its leaderships away: ``broker_id``, and from v2
``broker_epoch`` (-1: unknown; not checked by this controller). v0 uses request header v0 (no
client id, :mod:`odradek.protocol.codec`). The response carries an error code and the partitions
the broker still leads (``remaining_partitions``, with topic names at every version).

Pure functions: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from odradek.controller.messages import sorted_partitions
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.inter_broker_messages import VERSIONS, request_class, response_class
from odradek.protocol.messages import build, nested
from odradek.storage import TopicPartition

__all__ = ["API_KEY", "MAX_VERSION", "MIN_VERSION", "decode", "decode_response", "encode", "encode_response"]

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
MIN_VERSION = VERSIONS[API_KEY].start
MAX_VERSION = VERSIONS[API_KEY].stop - 1


def encode(broker_id: int, version: int, broker_epoch: int = -1) -> Any:
    """The wire request at ``version``."""
    return build(request_class(API_KEY, version), broker_id=broker_id, broker_epoch=broker_epoch)


def decode(message: Any) -> int:
    """The id of the broker asking."""
    return int(message.broker_id)


def encode_response(version: int, error: ErrorCode, remaining: Iterable[TopicPartition]) -> Any:
    """The wire response at ``version``: ``remaining`` in (topic, partition) order."""
    cls = response_class(API_KEY, version)
    return build(
        cls,
        error_code=error,
        remaining_partitions=tuple(
            build(nested(cls, "RemainingPartition"), topic_name=tp.topic, partition_index=tp.partition)
            for tp in sorted_partitions(remaining)
        ),
    )


def decode_response(response: Any) -> tuple[ErrorCode, list[TopicPartition]]:
    """(error, the partitions the broker still leads)."""
    remaining = [TopicPartition(str(p.topic_name), int(p.partition_index)) for p in response.remaining_partitions]
    return ErrorCode(response.error_code), remaining
