"""What the transaction APIs share: the coordinator extension and Kafka's error mapping by version.

Older request versions predate PRODUCER_FENCED (Kafka 2.7): they are answered
INVALID_PRODUCER_EPOCH instead, as Kafka's ``KafkaApis`` does. Without a transaction coordinator
every request is answered COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any

from odradek.errors import ErrorCode
from odradek.server.request import RequestContext


def coordinator(ctx: RequestContext) -> Any:
    return ctx.broker.extensions.get("transaction_coordinator")


def for_version(error: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """``error`` as a client of ``version`` understands it."""
    if error == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return error
