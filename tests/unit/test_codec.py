"""Request/response codec: header parsing per version, round trips, malformed input."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.errors import ErrorCode, InvalidRequestError, UnsupportedVersionError
from odradek.protocol.codec import (
    api_schema,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)
from odradek.protocol.messages import build, nested


@pytest.mark.parametrize("version", [0, 4, 9, 12])
def test_metadata_request_round_trip(version: int) -> None:
    schema = api_schema(3, version)
    topic_cls = nested(schema.request_type, "MetadataRequestTopic")
    req = build(
        schema.request_type,
        topics=(build(topic_cls, name="t1", topic_id=None),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )
    wire = encode_request(schema, 99, "client-x", req)
    frame = wire[4:]
    header = parse_request_header(frame, schema.flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        3,
        version,
        99,
        "client-x",
    )
    assert decode_request(schema, frame, header.size) == req


def test_response_header_versions() -> None:
    produce = api_schema(0, 9)
    assert produce.flexible and produce.response_header_version == 1
    assert api_schema(18, 3).response_header_version == 0  # ApiVersions: always v0
    assert api_schema(0, 8).response_header_version == 0


def test_response_round_trip() -> None:
    schema = api_schema(18, 3)
    resp = build(
        schema.response_type,
        error_code=ErrorCode.none,
        api_keys=(),
        throttle_time=datetime.timedelta(0),
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
    wire = encode_response(schema, 5, resp)
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4
    corr, decoded = decode_response(18, 3, wire[4:])
    assert corr == 5 and decoded == resp


def test_unknown_versions() -> None:
    with pytest.raises(UnsupportedVersionError):
        api_schema(0, 99)
    with pytest.raises(UnsupportedVersionError):
        api_schema(4242, 0)


@settings(max_examples=500)
@given(st.binary(max_size=80))
def test_garbage_bodies_raise_invalid_request(body: bytes) -> None:
    schema = api_schema(3, 12)
    frame = b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff" + body
    try:
        header = parse_request_header(frame, True)
        decode_request(schema, frame, header.size)
    except InvalidRequestError:
        pass
