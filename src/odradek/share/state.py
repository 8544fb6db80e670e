"""The state of a share-partition (KIP-932), as its leader and the share coordinator exchange it.

A *share-partition* is one topic partition as one share group consumes it. Its leader keeps, for
every offset from the share-partition start offset (SPSO) up to the end of the in-flight window
(SPEO), a delivery state and a delivery count; offsets below the SPSO are done (acknowledged or
archived). The share coordinator keeps the durable part in ``__share_group_state``: the SPSO and
every batch of offsets that is not AVAILABLE with a delivery count of 0 (ACQUIRED is never
persisted: after a failover an acquired record is AVAILABLE again, with its delivery count kept).

Numbers are Kafka's: ``RecordState`` (``DeliveryState`` in ShareSnapshotValue/ShareUpdateValue and
Read/WriteShareGroupState: 0 AVAILABLE, 1 ACQUIRED, 2 ACKNOWLEDGED, 4 ARCHIVED) and
``AcknowledgeType`` (ShareFetch/ShareAcknowledge ``AcknowledgeTypes``: 0 GAP, 1 ACCEPT,
2 RELEASE, 3 REJECT, 4 RENEW).

Pure data; any thread.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from odradek.errors import ErrorCode

#: Kafka's default ``group.share.record.lock.duration.ms``.
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000
#: Kafka's default ``group.share.delivery.count.limit``.
DEFAULT_DELIVERY_COUNT_LIMIT = 5
#: Kafka's default ``group.share.partition.max.record.locks``.
DEFAULT_PARTITION_MAX_RECORD_LOCKS = 2000
#: The state epoch of a share-partition never initialized (Kafka's ``PartitionFactory.DEFAULT_STATE_EPOCH``).
UNINITIALIZED_STATE_EPOCH = 0
#: The start offset a share-partition's state carries before its first fetch placed it.
UNINITIALIZED_START_OFFSET = -1


class DeliveryState(enum.IntEnum):
    """A record's state in a share-partition (Kafka's ``RecordState``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """What a consumer says of a record it acquired (Kafka's ``AcknowledgeType``).

    GAP: the offset holds no record (compacted away, a control record); it is archived.
    ACCEPT: processed; acknowledged, never delivered again. RELEASE: give it back; available
    again (archived once its delivery count reaches the limit). REJECT: unprocessable; archived.
    RENEW: keep it acquired, its lock restarted (Kafka 4.2, ShareFetch/ShareAcknowledge v2).
    """

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets ``first_offset..last_offset`` (inclusive) in one state with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: DeliveryState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's durable state, as ReadShareGroupState answers it.

    ``start_offset`` is -1 for a share-partition initialized but never placed (its first fetch
    places it by ``share.auto.offset.reset``); ``batches`` are sorted, disjoint and all at or after
    ``start_offset``.
    """

    state_epoch: int
    start_offset: int
    leader_epoch: int = -1
    batches: tuple[StateBatch, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """Which share-partition: a group, a topic (by id) and a partition index.

    Its coordinator key string is Kafka's ``"groupId:topicId:partition"`` (FindCoordinator key type
    SHARE), the topic id in Kafka's base64 form.
    """

    group_id: str
    topic_id: uuid.UUID
    partition: int


class ShareStateError(Exception):
    """A persister call failed with Kafka's error code (e.g. FENCED_STATE_EPOCH,
    FENCED_LEADER_EPOCH, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION)."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message


class Persister(Protocol):
    """How a partition's leader keeps its share-partitions' state (Kafka's ``Persister``).

    Each call is one share-partition; a failure raises :class:`ShareStateError`. Event loop only.
    """

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        """InitializeShareGroupState: (re)create the state with this epoch and start offset (-1:
        placed by the first fetch). A state epoch below the kept one is FENCED_STATE_EPOCH."""
        ...

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        """ReadShareGroupState: the kept state, or None if never initialized. A leader epoch below
        the kept one is FENCED_LEADER_EPOCH; a higher one is recorded."""
        ...

    async def write_state(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch]
    ) -> None:
        """WriteShareGroupState: merge these batches over the kept ones (a batch replaces the
        offsets it covers; as Kafka combines them, overlapping offsets keep the higher delivery
        count, then the later state, which a leader's newer batch has) and move the start offset
        (-1: unchanged); batches below the new start offset are dropped. Answered only once
        durable. A state epoch below the kept one is FENCED_STATE_EPOCH (Kafka's rule), a leader
        epoch below the kept one FENCED_LEADER_EPOCH; a share-partition never initialized is
        INVALID_REQUEST."""
        ...

    async def delete_state(self, key: SharePartitionKey) -> None:
        """DeleteShareGroupState: forget the share-partition (the group or its offsets deleted)."""
        ...

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        """ReadShareGroupStateSummary: the state epoch and start offset only (``batches`` empty)."""
        ...
