"""__consumer_offsets key/value schemas and the consumer protocol, against Kafka's bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group.schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    SchemaError,
    decode_assignment,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_subscription,
    encode_assignment,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    encode_subscription,
    java_string_hash,
    partition_for,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("console-consumer-12345", 158455506),
        ("my-group", -1906497762),
        ("polygenelubricants", -(2**31)),
        ("\u00e9t\u00e9", 227742),
        ("\U0001f600", 1772899),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_uses_kafka_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # values from Java: Utils.abs(s.hashCode()) % 50
    assert partition_for("console-consumer-12345", 50) == 6
    assert partition_for("my-group", 50) == 12
    assert partition_for("test-group-abcdefghijklmnop", 50) == 33


def test_offset_commit_key_bytes() -> None:
    raw = encode_offset_commit_key("g", "t", 3)
    assert raw == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(raw) == OffsetCommitKey("g", "t", 3)
    assert decode_key(b"\x00\x00" + raw[2:]) == OffsetCommitKey("g", "t", 3)


def test_group_metadata_key_bytes() -> None:
    raw = encode_group_metadata_key("grp")
    assert raw == b"\x00\x02\x00\x03grp"
    assert decode_key(raw) == GroupMetadataKey("grp")
    with pytest.raises(SchemaError):
        decode_key(b"\x00\x07\x00\x00")
    with pytest.raises(SchemaError):
        decode_key(b"\x00\x01\x00\x05ab")


def test_offset_commit_value_v3_and_v1() -> None:
    v3 = OffsetAndMetadata(42, "meta", 1000, leader_epoch=7)
    raw = encode_offset_commit_value(v3)
    assert raw == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1000)
    assert decode_offset_commit_value(raw) == v3
    v1 = OffsetAndMetadata(42, "", 1000, expire_timestamp_ms=5000)
    raw1 = encode_offset_commit_value(v1)
    assert raw1 == struct.pack(">hqhqq", 1, 42, 0, 1000, 5000)
    assert decode_offset_commit_value(raw1) == v1


def test_offset_commit_value_old_versions_decode() -> None:
    v0 = struct.pack(">hqh2sq", 0, 5, 2, b"md", 123)
    assert decode_offset_commit_value(v0) == OffsetAndMetadata(5, "md", 123)
    v2 = struct.pack(">hqhq", 2, 5, -1, 123)
    assert decode_offset_commit_value(v2) == OffsetAndMetadata(5, "", 123)
    with pytest.raises(SchemaError):
        decode_offset_commit_value(struct.pack(">hq", 9, 1))
    with pytest.raises(SchemaError):
        decode_offset_commit_value(v0[:-3])


def _group_value() -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="m1",
        current_state_timestamp_ms=99,
        members=(
            MemberRecord("m1", None, "c1", "/127.0.0.1", 300000, 10000, b"sub1", b"asg1"),
            MemberRecord("m2", "inst-2", "c2", "/127.0.0.2", 60000, 6000, b"", b""),
        ),
    )


def test_group_metadata_value_v3_roundtrip_and_layout() -> None:
    value = _group_value()
    raw = encode_group_metadata_value(value)
    assert raw[:2] == b"\x00\x03"
    assert raw[2:12] == b"\x00\x08consumer"
    assert decode_group_metadata_value(raw) == value


def test_group_metadata_value_v0_decodes_with_defaults() -> None:
    raw = struct.pack(">h", 0)
    raw += struct.pack(">h8si", 8, b"consumer", 2)
    raw += struct.pack(">h5s", 5, b"range") + struct.pack(">h2s", 2, b"m1")
    raw += struct.pack(">i", 1)
    raw += struct.pack(">h2sh2sh2si", 2, b"m1", 2, b"c1", 2, b"h1", 7000)
    raw += struct.pack(">i3si1s", 3, b"sub", 1, b"a")
    value = decode_group_metadata_value(raw)
    assert value.generation == 2 and value.protocol == "range" and value.leader == "m1"
    assert value.current_state_timestamp_ms == -1
    (member,) = value.members
    assert member == MemberRecord("m1", None, "c1", "h1", 7000, 7000, b"sub", b"a")


def test_empty_group_value_has_null_protocol() -> None:
    value = GroupMetadataValue("consumer", 5, None, None, 1, ())
    raw = encode_group_metadata_value(value)
    assert decode_group_metadata_value(raw) == value


def test_consumer_protocol() -> None:
    sub = encode_subscription(["a", "bb"], b"ud")
    assert decode_subscription(sub) == ["a", "bb"]
    # a v1 subscription (owned partitions appended) still decodes: v0 is a prefix
    assert decode_subscription(sub[:0] + b"\x00\x01" + sub[2:] + b"\x00\x00\x00\x00") == ["a", "bb"]
    asg = encode_assignment({"a": [0, 2], "bb": [1]})
    assert decode_assignment(asg) == {"a": [0, 2], "bb": [1]}
    assert decode_assignment(b"") == {}
    with pytest.raises(SchemaError):
        decode_assignment(b"\x00\x00\x7f\xff\xff\xff")


@given(
    st.text(max_size=50),
    st.text(max_size=50),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 2**63 - 1),
    st.text(max_size=200),
    st.integers(-1, 2**31 - 1),
)
def test_offset_records_roundtrip(group: str, topic: str, partition: int, offset: int, meta: str, epoch: int) -> None:
    key = encode_offset_commit_key(group, topic, partition)
    assert decode_key(key) == OffsetCommitKey(group, topic, partition)
    value = OffsetAndMetadata(offset, meta, 12345, epoch)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


@given(st.binary(max_size=64))
def test_decoders_never_raise_anything_but_schema_error(data: bytes) -> None:
    for decode in (
        decode_key,
        decode_offset_commit_value,
        decode_group_metadata_value,
        decode_subscription,
        decode_assignment,
    ):
        try:
            decode(data)
        except SchemaError:
            pass
