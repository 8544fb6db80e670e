"""The transaction state machine and its ``__transaction_state`` records (Kafka's version 0 schema)."""

from __future__ import annotations

import struct

import pytest

from odradek.coordinator.transaction.metadata import (
    VALID_PREVIOUS,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)

S = TransactionState


def test_key_and_value_bytes() -> None:
    assert encode_key("tx") == struct.pack(">hh", 0, 2) + b"tx"
    assert decode_key(encode_key("tx")) == "tx"
    meta = TransactionMetadata("tx", 42, 3, 60000, S.ONGOING, {("t", 1), ("t", 0), ("u", 5)}, 1000, 2000)
    value = encode_value(meta)
    expected = struct.pack(">hqhib", 0, 42, 3, 60000, 1) + struct.pack(">i", 2)
    expected += struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 1)
    expected += struct.pack(">h", 1) + b"u" + struct.pack(">ii", 1, 5)
    expected += struct.pack(">qq", 2000, 1000)
    assert value == expected
    assert decode_value("tx", value) == meta


def test_transitions_follow_kafkas_table() -> None:
    meta = TransactionMetadata("tx", 1, 0, 1000)
    meta.transition(S.ONGOING, 10)
    assert meta.start_ms == 10
    meta.transition(S.ONGOING, 20)  # adding more partitions keeps the start
    assert meta.start_ms == 10
    with pytest.raises(IllegalTransitionError):
        meta.transition(S.COMPLETE_COMMIT, 30)
    meta.transition(S.PREPARE_COMMIT, 30)
    meta.transition(S.COMPLETE_COMMIT, 40)
    assert S.COMPLETE_COMMIT in VALID_PREVIOUS[S.EMPTY] and S.ONGOING not in VALID_PREVIOUS[S.EMPTY]


def test_partition_of_a_transactional_id_is_javas() -> None:
    # Java: "hello".hashCode() == 99162322
    assert partition_for("hello", 50) == 99162322 % 50
    assert 0 <= partition_for("", 50) < 50
