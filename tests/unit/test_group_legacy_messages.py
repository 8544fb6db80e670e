"""OffsetCommit v0/v1 and OffsetFetch v0 (absent from kio) encode and decode as Kafka 3.9 defines them."""

from __future__ import annotations

import struct

import pytest

from odradek.errors import ErrorCode, UnsupportedVersionError
from odradek.protocol import legacy_messages as legacy
from odradek.protocol.codec import (
    api_schema,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_offset_commit_v0_request_bytes() -> None:
    schema = api_schema(8, 0)
    request = legacy.OffsetCommitRequestV0(
        group_id="g",
        topics=(
            legacy.OffsetCommitRequestTopicV0(
                name="t",
                partitions=(
                    legacy.OffsetCommitRequestPartitionV0(
                        partition_index=2, committed_offset=7, committed_metadata=None
                    ),
                ),
            ),
        ),
    )
    frame = encode_request(schema, 5, "c", request)[4:]
    body = _string("g") + struct.pack(">i", 1) + _string("t") + struct.pack(">iiqh", 1, 2, 7, -1)
    assert frame == struct.pack(">hhi", 8, 0, 5) + _string("c") + body
    header = parse_request_header(frame, schema.flexible)
    assert decode_request(schema, frame, header.size) == request


def test_offset_commit_v1_request_has_generation_member_and_timestamp() -> None:
    schema = api_schema(8, 1)
    body = _string("g") + struct.pack(">i", 3) + _string("m") + struct.pack(">i", 1) + _string("t")
    body += struct.pack(">iiqq", 1, 0, 42, 1234) + _string("md")
    frame = struct.pack(">hhi", 8, 1, 9) + _string("c") + body
    header = parse_request_header(frame, False)
    req = decode_request(schema, frame, header.size)
    assert (req.group_id, req.generation_id_or_member_epoch, req.member_id) == ("g", 3, "m")
    (p,) = req.topics[0].partitions
    assert (p.partition_index, p.committed_offset, p.commit_timestamp, p.committed_metadata) == (0, 42, 1234, "md")


def test_offset_commit_and_fetch_v0_responses() -> None:
    commit = legacy.OffsetCommitResponseV0(
        topics=(
            legacy.OffsetCommitResponseTopicV0(
                name="t",
                partitions=(legacy.OffsetCommitResponsePartitionV0(partition_index=1, error_code=ErrorCode.none),),
            ),
        )
    )
    raw = encode_response(api_schema(8, 0), 4, commit)[4:]
    assert raw == struct.pack(">ii", 4, 1) + _string("t") + struct.pack(">iih", 1, 1, 0)
    assert decode_response(8, 0, raw) == (4, commit)
    fetch = legacy.OffsetFetchResponseV0(
        topics=(
            legacy.OffsetFetchResponseTopicV0(
                name="t",
                partitions=(
                    legacy.OffsetFetchResponsePartitionV0(
                        partition_index=0, committed_offset=9, metadata="", error_code=ErrorCode.none
                    ),
                ),
            ),
        )
    )
    raw = encode_response(api_schema(9, 0), 4, fetch)[4:]
    assert raw == struct.pack(">ii", 4, 1) + _string("t") + struct.pack(">iiqhh", 1, 0, 9, 0, 0)
    assert decode_response(9, 0, raw) == (4, fetch)


def test_other_missing_versions_stay_unsupported() -> None:
    assert legacy.load(9, 1) is None
    with pytest.raises(UnsupportedVersionError):
        api_schema(8, 42)
