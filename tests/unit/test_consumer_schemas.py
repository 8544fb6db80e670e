"""The consumer-group records of ``__consumer_offsets``: round trips, golden bytes, malformed input."""

from __future__ import annotations

import random
import uuid

import pytest

from odradek.coordinator.group.consumer_schemas import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE,
    CONSUMER_GROUP_MEMBER_METADATA_TYPE,
    CONSUMER_GROUP_METADATA_TYPE,
    CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE,
    MEMBER_STATE_UNKNOWN,
    MEMBER_STATE_UNREVOKED_PARTITIONS,
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerKey,
    ConsumerValue,
    SchemaError,
    TopicPartitions,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)

T1 = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")
T2 = uuid.UUID("f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f")

SAMPLES: list[tuple[ConsumerKey, ConsumerValue]] = [
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(0)),
    (ConsumerGroupMetadataKey("grüppe-😀"), ConsumerGroupMetadataValue(2**31 - 1, -(2**63), 1_700_000_000_000)),
    (ConsumerGroupMetadataKey(""), ConsumerGroupMetadataValue(-1, metadata_hash=12345)),
    (
        ConsumerGroupMemberMetadataKey("g", "m-1"),
        ConsumerGroupMemberMetadataValue(None, None, "", "", (), None, -1, None, None),
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "член"),
        ConsumerGroupMemberMetadataValue(
            "instance-ü", "rack-a", "client", "/10.0.0.1", ("topic-a", "тема", ""), "topic-.*", 300000, "uniform"
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "classic"),
        ConsumerGroupMemberMetadataValue(
            None,
            "r",
            "c",
            "h",
            ("t",),
            None,
            60000,
            None,
            ClassicMemberMetadata(45000, (ClassicProtocol("range", b"\x00\x01"), ClassicProtocol("rr", b""))),
        ),
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "classic-empty"),
        ConsumerGroupMemberMetadataValue(None, None, "c", "h", classic_member_metadata=ClassicMemberMetadata(10)),
    ),
    (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(7)),
    (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(7, 1_700_000_000_123)),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m"), ConsumerGroupTargetAssignmentMemberValue()),
    (
        ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(T1, (0, 1, 2)), TopicPartitions(T2, ()))),
    ),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"), ConsumerGroupCurrentMemberAssignmentValue(0, 0)),
    (
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        ConsumerGroupCurrentMemberAssignmentValue(
            12,
            11,
            MEMBER_STATE_UNREVOKED_PARTITIONS,
            (TopicPartitions(T1, (3, 5), (10, 12)), TopicPartitions(T2, (0,))),
            (TopicPartitions(T2, (1, 2, 2**31 - 1)),),
        ),
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        ConsumerGroupCurrentMemberAssignmentValue(-1, -2, MEMBER_STATE_UNKNOWN, (TopicPartitions(T1, (), ()),), ()),
    ),
    (ConsumerGroupRegularExpressionKey("g", ""), ConsumerGroupRegularExpressionValue()),
    (
        ConsumerGroupRegularExpressionKey("grüppe", "^(orders|платежи)-.*$"),
        ConsumerGroupRegularExpressionValue(("orders-eu", "платежи-1", ""), 2**63 - 1, -(2**63)),
    ),
]


@pytest.mark.parametrize(("key", "value"), SAMPLES)
def test_round_trip(key: ConsumerKey, value: ConsumerValue) -> None:
    raw_key = encode_consumer_key(key)
    raw_value = encode_consumer_value(value)
    assert decode_consumer_key(raw_key) == key
    assert decode_consumer_key(memoryview(raw_key)) == key
    assert decode_consumer_value(key, raw_value) == value
    assert raw_key[:2] == key.RECORD_TYPE.to_bytes(2, "big")
    assert raw_value[:2] == b"\x00\x00"


def test_record_types() -> None:
    assert [
        CONSUMER_GROUP_METADATA_TYPE,
        CONSUMER_GROUP_MEMBER_METADATA_TYPE,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE,
        CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE,
    ] == [3, 5, 6, 7, 8, 16]


# --- golden bytes -----------------------------------------------------------------------------------


def test_golden_group_metadata() -> None:
    key = ConsumerGroupMetadataKey("g1")
    # type 3 | group_id int16 length 2, "g1"
    assert encode_consumer_key(key) == bytes.fromhex("00030002 6731")
    # version 0 | epoch 5 | no tagged fields (hash 0 and creation time -1 are the defaults)
    assert encode_consumer_value(ConsumerGroupMetadataValue(5)) == bytes.fromhex("00000000000500")
    # ... | 1 tagged field: tag 0, size 8, int64 hash | tag 1, size 8, int64 creation time 1000
    golden = bytes.fromhex("0000 00000005 0200 08 010203040506070801 08 00000000000003e8")
    value = ConsumerGroupMetadataValue(5, 0x0102030405060708, 1000)
    assert encode_consumer_value(value) == golden
    assert decode_consumer_value(key, golden) == value


def test_golden_current_member_assignment() -> None:
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    # type 8 | group_id "g" | member_id "m"
    assert encode_consumer_key(key) == bytes.fromhex("00080001 670001 6d")
    value = ConsumerGroupCurrentMemberAssignmentValue(10, 9, 1, (TopicPartitions(T1, (0, 2)),), ())
    golden = bytes.fromhex(
        "0000"  # value version 0
        "0000000a"  # member epoch 10
        "00000009"  # previous member epoch 9
        "01"  # state int8 1 (unrevoked partitions)
        "02"  # assigned partitions: compact array of 1
        "000102030405060708090a0b0c0d0e0f"  # topic id
        "03 00000000 00000002"  # partitions: compact array of 2
        "00"  # topic's tagged fields: none
        "01"  # partitions pending revocation: empty compact array
        "00"  # value's tagged fields: none
    )
    assert encode_consumer_value(value) == golden
    assert decode_consumer_value(key, golden) == value
    # with assignment epochs: the topic's tag buffer holds tag 0, size 9, compact [int32] of 2
    with_epochs = ConsumerGroupCurrentMemberAssignmentValue(10, 9, 1, (TopicPartitions(T1, (0, 2), (4, 5)),), ())
    expected = golden.replace(
        bytes.fromhex("00000002 00 01 00"), bytes.fromhex("00000002 01 00 09 03 00000004 00000005 01 00")
    )
    assert encode_consumer_value(with_epochs) == expected
    assert decode_consumer_value(key, expected) == with_epochs


def test_golden_member_metadata() -> None:
    key = ConsumerGroupMemberMetadataKey("g", "m")
    assert encode_consumer_key(key) == bytes.fromhex("00050001 670001 6d")
    value = ConsumerGroupMemberMetadataValue(None, "r", "c", "/h", ("t",), None, 3000, "uniform")
    golden = bytes.fromhex(
        "0000"  # value version 0
        "00"  # instance id null
        "02 72"  # rack id "r"
        "02 63"  # client id "c"
        "03 2f68"  # client host "/h"
        "02 02 74"  # subscribed topic names ["t"]
        "00"  # subscribed topic regex null
        "00000bb8"  # rebalance timeout 3000
        "08 756e69666f726d"  # server assignor "uniform"
        "00"  # no tagged fields (no classic metadata)
    )
    assert encode_consumer_value(value) == golden
    classic = ConsumerGroupMemberMetadataValue(
        None,
        "r",
        "c",
        "/h",
        ("t",),
        None,
        3000,
        "uniform",
        ClassicMemberMetadata(45000, (ClassicProtocol("range", b"\x01"),)),
    )
    tagged = golden[:-1] + bytes.fromhex(
        "01 00 10"  # 1 tagged field: tag 0, size 16
        "01"  # present (nullable struct marker)
        "0000afc8"  # session timeout 45000
        "02 06 72616e6765 02 01 00"  # [(name "range", metadata 0x01, no tags)]
        "00"  # the struct's tagged fields: none
    )
    assert encode_consumer_value(classic) == tagged
    assert decode_consumer_value(key, tagged) == classic


def test_golden_target_assignment() -> None:
    key = ConsumerGroupTargetAssignmentMetadataKey("g")
    assert encode_consumer_key(key) == bytes.fromhex("0006 0001 67")
    assert encode_consumer_value(ConsumerGroupTargetAssignmentMetadataValue(3)) == bytes.fromhex("0000 00000003 00")
    member = ConsumerGroupTargetAssignmentMemberKey("g", "m")
    assert encode_consumer_key(member) == bytes.fromhex("0007 0001 67 0001 6d")
    value = ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(T2, (7,)),))
    assert encode_consumer_value(value) == bytes.fromhex("0000 02" + T2.hex + "02 00000007 0000")


def test_golden_regular_expression() -> None:
    key = ConsumerGroupRegularExpressionKey("g", "t-.*")
    # type 16 | group_id "g" | regular_expression "t-.*"
    assert encode_consumer_key(key) == bytes.fromhex("0010 0001 67 0004 742d2e2a")
    # version 0 | topics: 2 ("t-a", "t-b") | version int64 5 | timestamp int64 1000 | no tagged fields
    golden = bytes.fromhex("0000 03 04742d61 04742d62 0000000000000005 00000000000003e8 00")
    value = ConsumerGroupRegularExpressionValue(("t-a", "t-b"), 5, 1000)
    assert encode_consumer_value(value) == golden
    assert decode_consumer_value(key, golden) == value
    assert decode_consumer_value(key, golden[:-1] + bytes.fromhex("01 03 01 ff")) == value  # unknown tag skipped


# --- tagged fields ----------------------------------------------------------------------------------


def test_unknown_tagged_fields_are_skipped() -> None:
    key = ConsumerGroupMetadataKey("g")
    # tag 0 (hash 1), unknown tag 5 of 3 bytes, unknown tag 200 (2-byte varint) of 0 bytes
    raw = bytes.fromhex("0000 00000004 0300 08 000000000000000105 03 aabbccc801 00")
    assert decode_consumer_value(key, raw) == ConsumerGroupMetadataValue(4, 1)

    member_key = ConsumerGroupMemberMetadataKey("g", "m")
    value = ConsumerGroupMemberMetadataValue(None, None, "c", "h", ("t",))
    raw = encode_consumer_value(value)
    assert decode_consumer_value(member_key, raw[:-1] + bytes.fromhex("01 09 02 ffff")) == value

    target_key = ConsumerGroupTargetAssignmentMemberKey("g", "m")
    target = ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(T1, (1,)),))
    raw = encode_consumer_value(target)
    # the topic struct's tag buffer (before the value's last byte) gets tag 0 and tag 1
    mutated = raw[:-2] + bytes.fromhex("02 00 01 ff 01 02 aaaa") + raw[-1:]
    assert decode_consumer_value(target_key, mutated) == target

    assignment_key = ConsumerGroupTargetAssignmentMetadataKey("g")
    raw = bytes.fromhex("0000 00000001 02 00 08 0000000000000009 07 01 00")
    assert decode_consumer_value(assignment_key, raw) == ConsumerGroupTargetAssignmentMetadataValue(1, 9)


def test_null_classic_metadata_in_tag_reads_as_none() -> None:
    key = ConsumerGroupMemberMetadataKey("g", "m")
    value = ConsumerGroupMemberMetadataValue(None, None, "c", "h")
    raw = encode_consumer_value(value)
    assert decode_consumer_value(key, raw[:-1] + bytes.fromhex("01 00 01 ff")) == value  # Kafka's null marker


# --- malformed input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00",
        bytes.fromhex("0000 0001 67"),  # classic type 0
        bytes.fromhex("0002 0001 67"),  # classic group metadata
        bytes.fromhex("0004 0001 67"),  # partition metadata: not decoded
        bytes.fromhex("0009 0001 67"),
        bytes.fromhex("ffff 0001 67"),
        bytes.fromhex("0003 0002 67"),  # length past the end
        bytes.fromhex("0003 ffff"),  # null group id
        bytes.fromhex("0003 fffe"),
        bytes.fromhex("0003 0001 67 00"),  # trailing byte
        bytes.fromhex("0005 0001 67"),  # member id missing
        bytes.fromhex("0003 0001 ff"),  # not UTF-8
        bytes.fromhex("0010 0001 67"),  # regular expression missing
        bytes.fromhex("0010 0001 67 ffff"),  # null regular expression
    ],
)
def test_bad_keys(raw: bytes) -> None:
    with pytest.raises(SchemaError):
        decode_consumer_key(raw)


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0001 00000001 00")),  # value version 1
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001")),  # no tag buffer
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001 00 00")),  # trailing
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001 01 00 04 00000001")),  # hash of 4 bytes
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001 01 00 09 000000000000000100")),
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001 02 05 00 05 00")),  # tag twice
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001 01 05 7f 00")),  # size past end
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001 ffffffff1f")),  # varint > 32 bits
        (ConsumerGroupMetadataKey("g"), bytes.fromhex("0000 00000001 808080808000")),  # varint > 5 bytes
        (ConsumerGroupMemberMetadataKey("g", "m"), bytes.fromhex("0000 00 00 00")),  # null client id
        (ConsumerGroupMemberMetadataKey("g", "m"), bytes.fromhex("0000 00 00 02 63 02 68 00")),  # null topics
        (ConsumerGroupMemberMetadataKey("g", "m"), bytes.fromhex("0000 00 00 02 63 02 68 ffffffff07")),
        (ConsumerGroupMemberMetadataKey("g", "m"), bytes.fromhex("0000 05 61")),  # string past the end
        (ConsumerGroupTargetAssignmentMemberKey("g", "m"), bytes.fromhex("0000 00 00")),  # null array
        (ConsumerGroupRegularExpressionKey("g", "r"), bytes.fromhex("0000 00" + "00" * 16 + "00")),  # null topics
        (ConsumerGroupRegularExpressionKey("g", "r"), bytes.fromhex("0000 02 00" + "00" * 16 + "00")),  # null topic
        (ConsumerGroupRegularExpressionKey("g", "r"), bytes.fromhex("0000 01 00000000")),  # truncated version
        (ConsumerGroupTargetAssignmentMemberKey("g", "m"), bytes.fromhex("0000 0a 00")),  # 9 topics, no bytes
        (
            ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
            bytes.fromhex("0000 00000001 00000000 00 02" + T1.hex + "02 00000001 01 00 09 03 00000001 00000002 01 00"),
        ),  # two epochs for one partition
    ],
)
def test_bad_values(key: ConsumerKey, raw: bytes) -> None:
    with pytest.raises(SchemaError):
        decode_consumer_value(key, raw)


@pytest.mark.parametrize(("key", "value"), SAMPLES)
def test_truncations_raise(key: ConsumerKey, value: ConsumerValue) -> None:
    raw_key = encode_consumer_key(key)
    raw_value = encode_consumer_value(value)
    for n in range(len(raw_key)):
        with pytest.raises(SchemaError):
            decode_consumer_key(raw_key[:n])
    for n in range(len(raw_value)):
        with pytest.raises(SchemaError):
            decode_consumer_value(key, raw_value[:n])


def _mutate(rng: random.Random, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and pos < len(data):
            data[pos] = rng.randrange(256)
        elif op == 1:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
        elif op == 2 and data:
            del data[pos : pos + rng.randint(1, 3)]
        else:
            data[pos:pos] = bytes.fromhex(rng.choice(["ff", "80", "ffffffff0f", "7f", "00"]))
    return bytes(data)


def test_random_mutations_raise_only_schema_error() -> None:
    rng = random.Random(848)
    decoded = failed = 0
    for _ in range(20000):
        key, value = rng.choice(SAMPLES)
        raw_key = _mutate(rng, encode_consumer_key(key))
        raw_value = _mutate(rng, encode_consumer_value(value))
        try:
            decode_consumer_key(raw_key)
            decoded += 1
        except SchemaError:
            failed += 1
        try:
            result = decode_consumer_value(key, raw_value)
        except SchemaError:
            failed += 1
        else:
            decoded += 1
            # what decodes is a legal value of its schema: it encodes again, to the same bytes
            # unless an unknown tagged field was dropped
            encode_consumer_value(result)
    assert failed > 0 and decoded > 0


# --- encoding errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        ConsumerGroupMetadataValue(2**31),
        ConsumerGroupMetadataValue(1, metadata_hash=2**63),
        ConsumerGroupCurrentMemberAssignmentValue(1, 0, 128),
        ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, (TopicPartitions(T1, (1, 2), (3,)),)),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(T1, (1,), (3,)),)),
        ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(T1, (2**31,)),)),
    ],
)
def test_unencodable_values(value: ConsumerValue) -> None:
    with pytest.raises(SchemaError):
        encode_consumer_value(value)


def test_unencodable_key() -> None:
    with pytest.raises(SchemaError):
        encode_consumer_key(ConsumerGroupMetadataKey("x" * 32768))
    assert decode_consumer_key(encode_consumer_key(ConsumerGroupMetadataKey("x" * 32767))).group_id == "x" * 32767
