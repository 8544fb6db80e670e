"""The hand-framed Fetch response decodes, with kio, to exactly what kio would encode."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol.codec import decode_response
from odradek.protocol.fetch_response import FetchedPartition, NodeEndpoint, encode_fetch_response

ALPHA_ID, B_ID = uuid.uuid4(), uuid.uuid4()


@pytest.mark.parametrize("version", range(4, 18))
def test_every_version_decodes_with_kio(version: int) -> None:
    records_a = b"\x00" * 70 + b"batch-bytes"
    by_id = version >= 13
    topics: list[tuple[str | uuid.UUID, list[FetchedPartition]]] = [
        (
            ALPHA_ID if by_id else "alpha",
            [
                FetchedPartition(0, 0, 100, 90, 5, records_a, None, -1),
                FetchedPartition(1, 1, -1, -1, -1, b"", [], -1),
                FetchedPartition(2, 0, 7, 7, 0, b"", [(42, 3), (43, 9)], 2),
            ],
        ),
        (B_ID if by_id else "b" * 300, [FetchedPartition(7, 3, -1, -1, -1, None)]),
    ]
    frame = b"".join(encode_fetch_response(version, 1234, topics, throttle_time_ms=5, session_id=0))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    corr, resp = decode_response(1, version, frame[4:])
    assert corr == 1234
    assert int(resp.throttle_time.total_seconds() * 1000) == 5
    if by_id:
        assert [t.topic_id for t in resp.responses] == [ALPHA_ID, B_ID]
    else:
        assert [t.topic for t in resp.responses] == ["alpha", "b" * 300]
    parts = resp.responses[0].partitions
    assert [p.partition_index for p in parts] == [0, 1, 2]
    assert parts[0].records == records_a and parts[0].high_watermark == 100
    assert parts[0].last_stable_offset == 90
    if version >= 5:
        assert parts[0].log_start_offset == 5
    assert parts[0].aborted_transactions is None
    assert [(a.producer_id, a.first_offset) for a in parts[2].aborted_transactions] == [(42, 3), (43, 9)]
    if version >= 11:
        assert parts[2].preferred_read_replica == 2
    assert int(parts[1].error_code) == 1
    assert resp.responses[1].partitions[0].records is None


@pytest.mark.parametrize("version", range(12, 18))
def test_leader_hints_decode_with_kio(version: int) -> None:
    """KIP-951: ``current_leader`` (partition tag 1, beside tag 0 diverging_epoch) and, from v16,
    the response's ``node_endpoints`` (tag 0)."""
    key: str | uuid.UUID = ALPHA_ID if version >= 13 else "alpha"
    partitions = [
        FetchedPartition(0, 6, -1, -1, -1, b"", None, current_leader=(3, 17)),
        FetchedPartition(1, 0, 9, 9, 0, b"", None, diverging_epoch=(4, 8), current_leader=(2, 5)),
        FetchedPartition(2, 0, 9, 9, 0, b"", None),
    ]
    endpoints = [NodeEndpoint(2, "127.0.0.1", 9093, None), NodeEndpoint(3, "host-3", 9094, "rack-b")]
    frame = b"".join(encode_fetch_response(version, 9, [(key, partitions)], node_endpoints=endpoints))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    _corr, resp = decode_response(1, version, frame[4:])
    parts = resp.responses[0].partitions
    assert (parts[0].current_leader.leader_id, parts[0].current_leader.leader_epoch) == (3, 17)
    assert (parts[1].current_leader.leader_id, parts[1].current_leader.leader_epoch) == (2, 5)
    assert (parts[1].diverging_epoch.epoch, parts[1].diverging_epoch.end_offset) == (4, 8)
    assert parts[2].current_leader.leader_id == -1
    if version >= 16:
        assert [(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints] == [
            (2, "127.0.0.1", 9093, None),
            (3, "host-3", 9094, "rack-b"),
        ]
