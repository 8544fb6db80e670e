"""What the transaction APIs share: Kafka's error mapping by version.

Older request versions predate PRODUCER_FENCED (Kafka 2.7): they are answered
INVALID_PRODUCER_EPOCH instead, as Kafka's ``KafkaApis`` does.
"""

from __future__ import annotations

from odradek.errors import ErrorCode


def for_version(error: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """``error`` as a client of ``version`` understands it."""
    if error == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return error
