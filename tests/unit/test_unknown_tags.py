"""Tagged fields a message version does not declare are skipped, as Kafka skips them (KIP-482),
at the top level and nested; known tags beside them keep their values."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12 import request as fetch_v12

from odradek.errors import InvalidRequestError
from odradek.protocol.codec import api_schema, decode_request, encode_request, parse_request_header

MARK = 0x12345678  # partition_max_bytes, to find the partition's tag section in the encoded bytes


def _body(api_key: int, version: int, request: object) -> bytes:
    return encode_request(api_schema(api_key, version), 7, "client", request)[4:]


def _decode(api_key: int, version: int, frame: bytes) -> object:
    header = parse_request_header(frame, True)
    return decode_request(api_schema(api_key, version), frame, header.size)


def test_an_unknown_top_level_tag_is_skipped() -> None:
    frame = _body(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    assert frame[-1] == 0  # empty tag section
    extended = frame[:-1] + bytes([1, 9, 2, 0xAB, 0xCD])
    assert _decode(18, 3, extended) == ApiVersionsRequest(client_software_name="x", client_software_version="1")


def _fetch(cluster_id: str | None) -> fetch_v12.FetchRequest:
    partition = fetch_v12.FetchPartition(
        partition=3, current_leader_epoch=1, fetch_offset=10, last_fetched_epoch=-1, partition_max_bytes=MARK
    )
    return fetch_v12.FetchRequest(
        cluster_id=cluster_id,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        topics=(fetch_v12.FetchTopic(topic="t", partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def test_unknown_tags_nested_and_beside_a_known_one_are_skipped() -> None:
    original = _fetch("cluster-1")
    frame = _body(1, 12, original)
    at = frame.index(struct.pack(">i", MARK)) + 4
    assert frame[at] == 0  # the partition's empty tag section
    frame = frame[:at] + bytes([2, 5, 1, 0x01, 30, 0]) + frame[at + 1 :]  # tags 5 (1 byte) and 30 (empty)
    # top level: tag 0 (cluster_id) is known; add tag 4 after it
    count_at = frame.rindex(b"cluster-1") - 4  # count, tag 0, size, compact string length
    assert frame[count_at : count_at + 2] == bytes([1, 0])
    frame = frame[:count_at] + bytes([2]) + frame[count_at + 1 :] + bytes([4, 3, 1, 2, 3])
    decoded = _decode(1, 12, frame)
    assert decoded == original


def test_an_unknown_tag_longer_than_the_message_is_refused() -> None:
    frame = _body(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    broken = frame[:-1] + bytes([1, 9, 50, 0xAB])
    with pytest.raises(InvalidRequestError):
        _decode(18, 3, broken)
