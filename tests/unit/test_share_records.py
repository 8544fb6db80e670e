"""``__share_group_state`` records byte for byte (Kafka 4.2's ShareSnapshot/ShareUpdate specs),
the coordinator key string and its partition."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.share.records import (
    SHARE_SNAPSHOT_TYPE,
    SHARE_UPDATE_TYPE,
    SchemaError,
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    parse_share_coordinator_key,
    partition_for,
    share_coordinator_key,
)
from odradek.protocol.java_hash import key_partition
from odradek.share.state import DeliveryState, SharePartitionKey, StateBatch

TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))
KEY = SharePartitionKey("g", TOPIC_ID, 3)
BATCH = StateBatch(5, 9, DeliveryState.ACKNOWLEDGED, 1)


def test_keys_are_the_record_type_then_group_topic_id_and_partition() -> None:
    body = b"\x00\x01g" + bytes(range(16)) + b"\x00\x00\x00\x03"
    assert encode_key(SHARE_SNAPSHOT_TYPE, KEY) == b"\x00\x00" + body
    assert encode_key(SHARE_UPDATE_TYPE, KEY) == b"\x00\x01" + body
    assert decode_key(b"\x00\x01" + body) == (SHARE_UPDATE_TYPE, KEY)


def test_update_value_golden_bytes() -> None:
    value = ShareUpdateValue(snapshot_epoch=1, leader_epoch=2, start_offset=5, state_batches=(BATCH,))
    batch = bytes.fromhex("0000000000000005000000000000000902000100")
    expected = bytes.fromhex("000000000001000000020000000000000005") + b"\x02" + batch + b"\x00"
    assert encode_value(value) == expected
    assert decode_value(SHARE_UPDATE_TYPE, expected) == value


def test_snapshot_value_golden_bytes_with_the_delivery_complete_count_tag() -> None:
    value = ShareSnapshotValue(
        snapshot_epoch=4,
        state_epoch=1,
        leader_epoch=-1,
        start_offset=-1,
        create_timestamp=1000,
        write_timestamp=2000,
        delivery_complete_count=7,
    )
    expected = bytes.fromhex(
        "0000" "00000004" "00000001" "ffffffff" "ffffffffffffffff" "00000000000003e8" "00000000000007d0"
        "01"  # no batches
        "01" "00" "04" "00000007"  # tag 0: DeliveryCompleteCount
    )  # fmt: skip
    assert encode_value(value) == expected
    assert decode_value(SHARE_SNAPSHOT_TYPE, expected) == value


@pytest.mark.parametrize(
    "value",
    [
        ShareSnapshotValue(0, 3, 7, 100, 1, 2, (BATCH, StateBatch(10, 10, DeliveryState.ARCHIVED, 5))),
        ShareUpdateValue(2, -1, -1, (), 0),
        ShareUpdateValue(2, 9, 12, (StateBatch(12, 2**40, DeliveryState.AVAILABLE, 3),), 55),
    ],
)
def test_values_round_trip(value: ShareSnapshotValue | ShareUpdateValue) -> None:
    record_type = SHARE_SNAPSHOT_TYPE if isinstance(value, ShareSnapshotValue) else SHARE_UPDATE_TYPE
    assert decode_value(record_type, encode_value(value)) == value


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x02\x00\x01g" + bytes(16) + b"\x00\x00\x00\x00",  # unknown record type
        b"\x00\x00\x00\x01g" + bytes(10),  # truncated uuid
        b"\x00\x00\x00\x01g" + bytes(20) + b"\x00",  # bytes left over
    ],
)
def test_bad_keys_are_schema_errors(data: bytes) -> None:
    with pytest.raises(SchemaError):
        decode_key(data)


def test_bad_values_are_schema_errors() -> None:
    good = encode_value(ShareUpdateValue(0, 0, 0, (BATCH,)))
    with pytest.raises(SchemaError):
        decode_value(SHARE_UPDATE_TYPE, b"\x00\x01" + good[2:])  # unknown value version
    with pytest.raises(SchemaError):
        decode_value(SHARE_UPDATE_TYPE, good[:-3])  # truncated
    bad_state = bytearray(good)
    bad_state[2 + 16 + 1 + 16] = 3  # DeliveryState 3 (ARCHIVING) is not Kafka's to persist
    with pytest.raises(SchemaError, match="delivery state"):
        decode_value(SHARE_UPDATE_TYPE, bytes(bad_state))
    with pytest.raises(SchemaError):
        decode_value(SHARE_UPDATE_TYPE, good + b"\x00")


def test_coordinator_key_is_kafkas_string_and_picks_the_partition_as_groups_do() -> None:
    text = share_coordinator_key(KEY)
    assert text == "g:AAECAwQFBgcICQoLDA0ODw:3"
    assert parse_share_coordinator_key(text) == KEY
    assert partition_for(KEY, 50) == key_partition(text, 50)
    assert 0 <= partition_for(KEY, 50) < 50


@pytest.mark.parametrize(
    "text",
    [
        "",
        "g:AAECAwQFBgcICQoLDA0ODw",
        "g:short:1",
        "g:AAECAwQFBgcICQoLDA0ODw:x",
        "a:b:c:d",
        "g:AAECAwQFBgcICQoLDA0ODw:99999999999",
    ],
)
def test_malformed_coordinator_keys_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_share_coordinator_key(text)
