"""The client's sans-IO parts: partitioner hash, bootstrap parsing, error mapping, request
building and conversion between versions, fetched-batch decoding, and the CLI formatters."""

from __future__ import annotations

import datetime
import uuid

import pytest

from odradek.cli.common import CommandError
from odradek.cli.console_consumer import Formatter
from odradek.cli.console_producer import LineParser
from odradek.cli.topics import kafka_uuid, parse_replica_assignment
from odradek.client.cluster import TopicPartition, parse_bootstrap_servers
from odradek.client.connection import RequestBuilder, convert, request_type
from odradek.client.consumer import ConsumerRecord, decode_fetched
from odradek.client.errors import ResponseError, error_for, error_name
from odradek.client.producer import compression_codec, murmur2, partition_for_key
from odradek.errors import (
    ErrorCode,
    OffsetOutOfRangeError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from odradek.protocol.records import Record, build_batch


@pytest.mark.parametrize(
    ("data", "expected"),
    [  # Kafka's UtilsTest.testMurmur2
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_partition_for_key_is_stable_and_in_range() -> None:
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    assert all(0 <= partition_for_key(bytes([i]), 5) < 5 for i in range(256))


def test_parse_bootstrap_servers() -> None:
    assert parse_bootstrap_servers("a:1, b:2,") == [("a", 1), ("b", 2)]
    assert parse_bootstrap_servers(["[::1]:9092"]) == [("::1", 9092)]
    for bad in ("", "host", "host:0", "host:x", ":9092", "h:70000"):
        with pytest.raises(ValueError):
            parse_bootstrap_servers(bad)


def test_error_for_maps_codes_to_exceptions() -> None:
    exists = error_for(ErrorCode.topic_already_exists, "Topic 't' already exists.", "t")
    assert isinstance(exists, TopicExistsError)
    assert str(exists) == "TOPIC_ALREADY_EXISTS (t): Topic 't' already exists."
    assert isinstance(error_for(3), UnknownTopicOrPartitionError)
    assert isinstance(error_for(1), OffsetOutOfRangeError)
    other = error_for(ErrorCode.not_controller)
    assert isinstance(other, ResponseError) and other.error_code == ErrorCode.not_controller
    assert error_for(31000).error_code == ErrorCode.unknown_server_error
    assert error_name(31000) == "ERROR_31000"


def test_request_builder_keeps_only_fields_of_the_version() -> None:
    v1 = RequestBuilder(20, 1)
    request = v1(topic_names=("a",), timeout=datetime.timedelta(seconds=1), topics=None)
    assert request.topic_names == ("a",) and not v1.has("topics")
    rb = RequestBuilder(19, 2)
    topic = rb.make("CreatableTopic", name="t", num_partitions=1, replication_factor=1, assignments=(), configs=())
    assert type(topic).__name__ == "CreatableTopic"


def test_convert_between_versions() -> None:
    rb = RequestBuilder(19, 7)
    topic = rb.make(
        "CreatableTopic",
        name="t",
        num_partitions=3,
        replication_factor=1,
        assignments=(),
        configs=(rb.make("CreatableTopicConfig", name="retention.ms", value="1"),),
    )
    request = rb(topics=(topic,), timeout=datetime.timedelta(seconds=5), validate_only=True)
    old = convert(request, request_type(19, 2))
    assert type(old).__version__ == 2
    assert old.topics[0].configs[0].name == "retention.ms" and old.validate_only
    assert type(old.topics[0]).__version__ == 2
    # DeleteTopics v6 has no topic_names: v1 cannot be expressed from it
    v6 = RequestBuilder(20, 6)
    deletion = v6(
        topics=(v6.make("DeleteTopicState", name="t", topic_id=uuid.UUID(int=0)),),
        timeout=datetime.timedelta(seconds=1),
    )
    with pytest.raises(UnsupportedVersionError):
        convert(deletion, request_type(20, 1))


def test_decode_fetched_skips_before_position_and_control_batches() -> None:
    first = bytearray(build_batch([Record(b"k", b"a"), Record(None, b"b")], base_offset=10))
    control = build_batch([Record(b"\x00\x00\x00\x00", b"")], base_offset=12, is_control=True)
    third = build_batch([Record(None, b"c")], base_offset=13, compression=1)
    data = bytes(first) + control + third + third[:20]  # a truncated tail is ignored
    tp = TopicPartition("t", 0)
    records, next_offset = decode_fetched(tp, data, 11)
    assert [(r.offset, r.value) for r in records] == [(11, b"b"), (13, b"c")]
    assert next_offset == 14
    assert decode_fetched(tp, b"", 5) == ([], 5)
    assert decode_fetched(tp, None, 5) == ([], 5)


def test_compression_codec_names() -> None:
    assert [compression_codec(n) for n in ("none", "uncompressed", "GZIP", "snappy", "lz4", "zstd")] == [
        0,
        0,
        1,
        2,
        3,
        4,
    ]
    with pytest.raises(ValueError):
        compression_codec("brotli")


def test_line_parser() -> None:
    plain = LineParser({})
    assert plain.parse("a:b", 1) == Record(None, b"a:b", [])
    keyed = LineParser({"parse.key": "true", "key.separator": ":", "null.marker": "-"})
    assert keyed.parse("k:v:w", 1) == Record(b"k", b"v:w", [])
    assert keyed.parse("-:v", 1) == Record(None, b"v", [])
    with pytest.raises(CommandError, match="No key separator found on line number 3: 'x'"):
        keyed.parse("x", 3)
    lenient = LineParser({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse("x", 1) == Record(None, b"x", [])
    headers = LineParser({"parse.headers": "true"})
    assert headers.parse("a:1,b:2\tvalue", 1) == Record(None, b"value", [("a", b"1"), ("b", b"2")])


def test_formatter() -> None:
    record = ConsumerRecord("t", 2, 7, 1700000000000, None, b"v", (("h", b"x"),), 1)
    assert Formatter({}).format(record) == b"v\n"
    everything = Formatter(
        {p: "true" for p in ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key")}
    )
    assert everything.format(record) == b"LogAppendTime:1700000000000\tPartition:2\tOffset:7\th:x\tnull\tv\n"
    custom = Formatter({"print.key": "true", "print.value": "false", "key.separator": ",", "null.literal": "~"})
    assert custom.format(record) == b"~\n"


def test_topics_helpers() -> None:
    assert parse_replica_assignment("0:1,1:2") == {0: [0, 1], 1: [1, 2]}
    with pytest.raises(CommandError):
        parse_replica_assignment("0:0")
    with pytest.raises(CommandError):
        parse_replica_assignment("0:1,2")
    with pytest.raises(CommandError):
        parse_replica_assignment("a")
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
