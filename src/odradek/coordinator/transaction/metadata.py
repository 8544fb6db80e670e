"""Transaction metadata: the state machine, and its record in ``__transaction_state`` (Kafka's schemas).

States and the states each may be entered from (Kafka's ``TransactionState.validPreviousStates``):

    Empty              <- Empty, CompleteCommit, CompleteAbort
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit      <- Ongoing
    PrepareAbort       <- Ongoing, PrepareEpochFence
    CompleteCommit     <- PrepareCommit
    CompleteAbort      <- PrepareAbort
    Dead               <- Empty, CompleteAbort, CompleteCommit
    PrepareEpochFence  <- Ongoing

Record format (``TransactionLogKey``/``TransactionLogValue`` version 0, big-endian):

    key    version int16 (0), transactional_id string (int16 length)
    value  version int16 (0), producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
           transaction_status int8 (the state ids below), transaction_partitions nullable array
           [topic string, partition_ids array int32], transaction_last_update_timestamp_ms int64,
           transaction_start_timestamp_ms int64

A null value is a tombstone (an expired transactional id). The partition of a transactional id is
``abs(String.hashCode) % transaction.state.log.num.partitions``. Pure code: any thread.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from odradek.protocol.java_hash import key_partition as partition_for

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionMetadata",
    "TransactionState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


_S = TransactionState
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    pass


@dataclass
class TransactionMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TransactionState | None = None
    """A transition written to the log but not yet acknowledged (Kafka's ``pendingState``)."""

    def transition(self, state: TransactionState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.state.name} -> {state.name}")
        if state is TransactionState.ONGOING and self.state is not TransactionState.ONGOING:
            self.start_ms = now_ms
        self.state = state
        self.last_update_ms = now_ms

    @property
    def in_progress(self) -> bool:
        return self.state in (TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", 0) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    (version, length) = struct.unpack_from(">hh", data, 0)
    if version != 0 or length < 0 or 4 + length > len(data):
        raise ValueError(f"not a transaction log key (version {version}, length {length})")
    return data[4 : 4 + length].decode()


def encode_value(m: TransactionMetadata) -> bytes:
    out = bytearray(struct.pack(">hqhib", 0, m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state)))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += struct.pack(">i", len(by_topic))
    for topic, partitions in by_topic.items():
        out += _string(topic) + struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    out += struct.pack(">qq", m.last_update_ms, m.start_ms)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """Version 0 values (and the version 0 fields of a version 1 one written without tags)."""
    version, producer_id, epoch, timeout_ms, status = struct.unpack_from(">hqhib", data, 0)
    if version != 0:
        raise ValueError(f"transaction log value version {version} is not supported")
    pos = struct.calcsize(">hqhib")
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(count, 0)):
        (length,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + length].decode()
        pos += 2 + length
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for i in range(n):
            partitions.add((topic, struct.unpack_from(">i", data, pos + 4 * i)[0]))
        pos += 4 * n
    last_update, start = struct.unpack_from(">qq", data, pos)
    return TransactionMetadata(
        transactional_id, producer_id, epoch, timeout_ms, TransactionState(status), partitions, start, last_update
    )
