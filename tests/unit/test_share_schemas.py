"""The share groups' ``__consumer_offsets`` records (types 10..15) byte for byte: golden bytes
written by hand from Kafka 4.2's specs, round trips, and malformed bytes refused."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.group.schemas import SchemaError
from odradek.coordinator.group.share_schemas import (
    SHARE_RECORD_TYPES,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareKey,
    ShareTopicInfo,
    ShareTopicPartitions,
    ShareTopicPartitionsInfo,
    ShareValue,
    decode_share_key,
    decode_share_value,
    encode_share_key,
    encode_share_value,
)

U1 = uuid.UUID(int=1)
U2 = uuid.UUID(int=2)
UUID1 = "00" * 15 + "01"
UUID2 = "00" * 15 + "02"

GOLDEN: list[tuple[ShareKey, str, ShareValue, str]] = [
    (
        ShareGroupMemberMetadataKey("g", "m"),
        "000a 0001 67 0001 6d",
        ShareGroupMemberMetadataValue(None, "c", "/h", ("t",)),
        "0000 00 02 63 03 2f68 02 02 74 00",  # null rack, "c", "/h", ["t"], no tags
    ),
    (
        ShareGroupMetadataKey("g"),
        "000b 0001 67",
        ShareGroupMetadataValue(5, -2),
        "0000 00000005 fffffffffffffffe 00",
    ),
    (
        ShareGroupTargetAssignmentMetadataKey("g"),
        "000c 0001 67",
        ShareGroupTargetAssignmentMetadataValue(3),
        "0000 00000003 00",
    ),
    (
        ShareGroupTargetAssignmentMemberKey("g", "m"),
        "000d 0001 67 0001 6d",
        ShareGroupTargetAssignmentMemberValue((ShareTopicPartitions(U1, (0, 2)),)),
        f"0000 02 {UUID1} 03 00000000 00000002 00 00",
    ),
    (
        ShareGroupCurrentMemberAssignmentKey("g", "m"),
        "000e 0001 67 0001 6d",
        ShareGroupCurrentMemberAssignmentValue(4, 3, 0, (ShareTopicPartitions(U1, (1,)),)),
        f"0000 00000004 00000003 00 02 {UUID1} 02 00000001 00 00",
    ),
    (
        ShareGroupStatePartitionMetadataKey("g"),
        "000f 0001 67",
        ShareGroupStatePartitionMetadataValue(
            (ShareTopicPartitionsInfo(U1, "t", (2,)),),
            (ShareTopicPartitionsInfo(U1, "t", (0, 1)),),
            (ShareTopicInfo(U2, "u"),),
        ),
        f"0000 02 {UUID1} 0274 02 00000002 00 02 {UUID1} 0274 03 00000000 00000001 00 02 {UUID2} 0275 00 00",
    ),
]


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


@pytest.mark.parametrize(("key", "key_hex", "value", "value_hex"), GOLDEN)
def test_records_are_written_and_read_as_kafka_writes_them(
    key: ShareKey, key_hex: str, value: ShareValue, value_hex: str
) -> None:
    assert encode_share_key(key) == _hex(key_hex)
    assert encode_share_value(value) == _hex(value_hex)
    assert decode_share_key(_hex(key_hex)) == key
    assert decode_share_value(key, _hex(value_hex)) == value


def test_the_record_types_are_kafkas() -> None:
    assert {type(k).RECORD_TYPE for k, _, _, _ in GOLDEN} == set(SHARE_RECORD_TYPES) == set(range(10, 16))


def test_unknown_tagged_fields_are_skipped() -> None:
    key = ShareGroupMetadataKey("g")
    tagged = _hex("0000 00000005 0000000000000000 01 07 02 abcd")  # tag 7, two bytes
    assert decode_share_value(key, tagged) == ShareGroupMetadataValue(5, 0)


@pytest.mark.parametrize(
    ("key", "data"),
    [
        (ShareGroupMetadataKey("g"), "0001 00000005 0000000000000000 00"),  # value version 1
        (ShareGroupMetadataKey("g"), "0000 000000"),  # truncated
        (ShareGroupMetadataKey("g"), "0000 00000005 0000000000000000 00 ff"),  # bytes left over
        (ShareGroupMemberMetadataKey("g", "m"), "0000 00 00 01 01 00"),  # a null client id
        (ShareGroupTargetAssignmentMemberKey("g", "m"), "0000 ffffffff0f"),  # an array past the end
    ],
)
def test_malformed_values_are_refused(key: ShareKey, data: str) -> None:
    with pytest.raises(SchemaError):
        decode_share_value(key, _hex(data))


@pytest.mark.parametrize("data", ["0010 0001 67", "0003 0001 67", "000b ffff", "000b 0001 67 00", "000a 0001 67"])
def test_malformed_keys_are_refused(data: str) -> None:
    with pytest.raises(SchemaError):
        decode_share_key(_hex(data))


def test_values_the_schema_cannot_carry_are_refused() -> None:
    with pytest.raises(SchemaError):
        encode_share_value(ShareGroupMetadataValue(2**31, 0))
    with pytest.raises(SchemaError):
        encode_share_key(ShareGroupMetadataKey("x" * 40000))


names = st.text(max_size=8)
ids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
i32 = st.integers(-(2**31), 2**31 - 1)
partitions = st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.builds(
            ShareGroupMemberMetadataValue, st.none() | names, names, names, st.lists(names, max_size=4).map(tuple)
        ),
        st.builds(ShareGroupMetadataValue, i32, st.integers(-(2**63), 2**63 - 1)),
        st.builds(
            ShareGroupCurrentMemberAssignmentValue,
            i32,
            i32,
            st.integers(-128, 127),
            st.lists(st.builds(ShareTopicPartitions, ids, partitions), max_size=3).map(tuple),
        ),
        st.builds(
            ShareGroupStatePartitionMetadataValue,
            st.lists(st.builds(ShareTopicPartitionsInfo, ids, names, partitions), max_size=3).map(tuple),
            st.lists(st.builds(ShareTopicPartitionsInfo, ids, names, partitions), max_size=3).map(tuple),
            st.lists(st.builds(ShareTopicInfo, ids, names), max_size=3).map(tuple),
        ),
    )
)
def test_values_round_trip(value: ShareValue) -> None:
    key: ShareKey
    if isinstance(value, ShareGroupMemberMetadataValue):
        key = ShareGroupMemberMetadataKey("g", "m")
    elif isinstance(value, ShareGroupMetadataValue):
        key = ShareGroupMetadataKey("g")
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        key = ShareGroupCurrentMemberAssignmentKey("g", "m")
    else:
        key = ShareGroupStatePartitionMetadataKey("g")
    assert decode_share_value(key, encode_share_value(value)) == value
