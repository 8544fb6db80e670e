"""ListOffsets v0 (absent from kio, removed by Kafka 4.0): its bytes as Kafka 3.9 defines them, and
Kafka 3.9's ``legacyFetchOffsetsBefore`` over a log's segments."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, cast

import pytest

from odradek.errors import ErrorCode
from odradek.protocol import legacy_messages as legacy
from odradek.protocol.codec import (
    api_schema,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)
from odradek.storage.log_segments import legacy_offsets_before


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_list_offsets_v0_request_bytes_carry_max_num_offsets() -> None:
    schema = api_schema(2, 0)
    request = legacy.ListOffsetsRequestV0(
        replica_id=-1,
        topics=(
            legacy.ListOffsetsTopicV0(
                name="t",
                partitions=(legacy.ListOffsetsPartitionV0(partition_index=3, timestamp=-1, max_num_offsets=5),),
            ),
        ),
    )
    frame = encode_request(schema, 7, "c", request)[4:]
    body = struct.pack(">ii", -1, 1) + _string("t") + struct.pack(">iiqi", 1, 3, -1, 5)
    assert frame == struct.pack(">hhi", 2, 0, 7) + _string("c") + body
    header = parse_request_header(frame, schema.flexible)
    assert decode_request(schema, frame, header.size) == request


def test_list_offsets_v0_response_has_old_style_offsets_and_no_throttle_time() -> None:
    response = legacy.ListOffsetsResponseV0(
        topics=(
            legacy.ListOffsetsTopicResponseV0(
                name="t",
                partitions=(
                    legacy.ListOffsetsPartitionResponseV0(
                        partition_index=0, error_code=ErrorCode.none, old_style_offsets=(40, 20, 0)
                    ),
                    legacy.ListOffsetsPartitionResponseV0(
                        partition_index=1, error_code=ErrorCode.not_leader_or_follower
                    ),
                ),
            ),
        )
    )
    raw = encode_response(api_schema(2, 0), 4, response)[4:]
    expected = struct.pack(">ii", 4, 1) + _string("t") + struct.pack(">i", 2)
    expected += struct.pack(">ihiqqq", 0, 0, 3, 40, 20, 0) + struct.pack(">ihi", 1, 6, 0)
    assert raw == expected
    assert decode_response(2, 0, raw) == (4, response)


@dataclass
class FakeSegment:
    base_offset: int
    last_modified_ms: int
    size: int = 100


def offsets(segments: list[FakeSegment], timestamp: int, max_num: int, log_start: int = 0, leo: int = 90) -> list[int]:
    return legacy_offsets_before(cast(Any, segments), log_start, leo, timestamp, max_num, now_ms=10_000)


SEGMENTS = [FakeSegment(0, 1000), FakeSegment(30, 2000), FakeSegment(60, 3000)]


def test_latest_is_the_log_end_then_segment_starts_latest_first() -> None:
    assert offsets(SEGMENTS, -1, 1) == [90]
    assert offsets(SEGMENTS, -1, 3) == [90, 60, 30]
    assert offsets(SEGMENTS, -1, 10) == [90, 60, 30, 0]
    assert offsets(SEGMENTS, -1, 0) == []


def test_earliest_is_one_offset_the_log_start_or_the_first_segments_base() -> None:
    assert offsets(SEGMENTS, -2, 10) == [0]
    assert offsets(SEGMENTS, -2, 10, log_start=12) == [12]  # max(base offset, log start offset)
    assert offsets(SEGMENTS, -4, 10) == [0]


def test_a_timestamp_gives_the_starts_of_segments_modified_at_or_before_it() -> None:
    assert offsets(SEGMENTS, 2500, 10) == [30, 0]
    assert offsets(SEGMENTS, 2000, 1) == [30]
    assert offsets(SEGMENTS, 999, 10) == []  # every segment is younger
    assert offsets(SEGMENTS, 20_000, 2) == [90, 60]  # the log end counts as modified now


def test_an_empty_active_segment_adds_no_log_end_candidate() -> None:
    segments = [FakeSegment(0, 1000), FakeSegment(30, 2000, size=0)]
    assert offsets(segments, -1, 5, leo=30) == [30, 0]
    assert offsets([FakeSegment(0, 1000, size=0)], -1, 5, leo=0) == [0]


def test_a_negative_max_num_offsets_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        offsets(SEGMENTS, -1, -1)
