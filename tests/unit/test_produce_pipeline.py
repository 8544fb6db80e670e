"""Which frames a connection may pipeline (:func:`odradek.server.produce_pipeline.produce_acks`),
and the read-ahead count of queued request bytes (:class:`odradek.protocol.frames.FrameBuffer`)."""

from __future__ import annotations

import datetime

import pytest

from odradek.client.connection import RequestBuilder
from odradek.protocol.codec import api_schema, encode_request
from odradek.protocol.frames import FrameBuffer
from odradek.protocol.records import Record, build_batch
from odradek.server.produce_pipeline import produce_acks


def _produce_frame(version: int, acks: int, transactional_id: str | None, client_id: str | None = "c") -> bytes:
    rb = RequestBuilder(0, version)
    part = rb.make("PartitionProduceData", index=0, records=build_batch([Record(b"k", b"v")]))
    request = rb(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(rb.make("TopicProduceData", name="t", partition_data=(part,)),),
    )
    return encode_request(api_schema(0, version), 7, client_id, request)[4:]


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("acks", [-1, 0, 1])
@pytest.mark.parametrize("transactional_id", [None, "", "txn-éü"])
def test_produce_acks_reads_acks_of_every_version(version: int, acks: int, transactional_id: str | None) -> None:
    assert produce_acks(_produce_frame(version, acks, transactional_id)) == acks


@pytest.mark.parametrize("version", [3, 9, 11])
def test_produce_acks_with_a_null_or_long_client_id(version: int) -> None:
    assert produce_acks(_produce_frame(version, -1, "t", client_id=None)) == -1
    assert produce_acks(_produce_frame(version, -1, "t", client_id="x" * 300)) == -1


def test_a_flexible_header_with_tagged_fields_is_skipped() -> None:
    frame = bytearray(_produce_frame(11, -1, None))
    at = 10 + 1  # api key .. correlation id, client id "c"; then the header's tag count (0)
    assert frame[at] == 0
    frame[at : at + 1] = bytes([2, 0, 3, 1, 2, 3, 5, 0])  # 2 tags: (0, 3 bytes), (5, 0 bytes)
    assert produce_acks(bytes(frame)) == -1


def test_other_requests_and_broken_frames_are_not_pipelined() -> None:
    metadata = encode_request(
        api_schema(3, 12),
        1,
        "c",
        RequestBuilder(3, 12)(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
    )[4:]
    assert produce_acks(metadata) is None
    frame = _produce_frame(11, -1, "abc")
    for cut in (0, 3, 9, 10, 12, 14, 15):  # header, client id, transactional id or acks cut short
        assert produce_acks(frame[:cut]) is None, cut
    assert produce_acks(b"\x00\x00\x00\x0b\x00\x00\x00\x01\x00\x01c" + b"\xff" * 6) is None  # endless varint
    assert produce_acks(b"\x00\x00\x00\x03\x00\x00\x00\x01\x7f\xff") is None  # client id longer than the frame


def test_queued_bytes_count_complete_frames_until_taken() -> None:
    buf = FrameBuffer(scratch=bytearray(64))
    small, large = b"a" * 10, b"b" * 200
    data = len(small).to_bytes(4, "big") + small + len(large).to_bytes(4, "big") + large
    buf.receive_data(data[:30])
    assert buf.queued_bytes == 10  # the large frame is incomplete: not queued yet
    buf.receive_data(data[30:])
    assert buf.queued_bytes == 210 and buf.frame_count == 2
    assert buf.next_frame() == small and buf.queued_bytes == 200
    assert buf.next_frame() == large and buf.queued_bytes == 0
    buf.receive_data(data[:20])
    buf.release()
    assert buf.queued_bytes == 0
