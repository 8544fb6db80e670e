"""Fetch responses framed by hand around stored record bytes (the fetch hot path).

kio would copy every partition's records into one encoded body; here the response is a list of
byte strings — headers built with ``struct`` and the log's stored batch bytes untouched — that the
connection writes with ``writelines`` (one ``sendmsg``), so records are never copied into a
second Python buffer.

Wire format, Fetch v4..v17 (Kafka's FetchResponse.json; flexible from v12; topics by id from v13):

    ResponseHeader    correlation_id i32 [+ tagged fields (v12)]
    throttle_time_ms  i32
    error_code        i16                           (v7+)
    session_id        i32                           (v7+)
    responses         [topic string (v4-v12) | topic_id uuid (v13+), partitions [
        partition_index i32, error_code i16, high_watermark i64,
        last_stable_offset i64, log_start_offset i64 (v5+),
        aborted_transactions nullable [producer_id i64, first_offset i64],
        preferred_read_replica i32 (v11+),
        records nullable bytes,
        tagged fields (v12): 0 diverging_epoch [epoch i32, end_offset i64],
                             1 current_leader [leader_id i32, leader_epoch i32] (KIP-951)]
      tagged fields (v12)]
    tagged fields (v12): 0 node_endpoints [node_id i32, host string, port i32, rack nullable string] (v16+)

Non-flexible versions use i32 array counts, i16 string lengths and i32 byte lengths (-1 = null);
v12 uses compact forms (unsigned varint of length + 1, 0 = null). A unit test checks every
version against kio's decoder. Pure functions: any thread.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.protocol.bounded import write_uvarint as _uvarint


class SizedSlice(Protocol):
    """A byte range of a file the connection will ``sendfile`` (``odradek.storage.FileSlice``)."""

    size: int


_I32 = struct.Struct(">i")
_HEAD_V7 = struct.Struct(">iihi")  # correlation_id, throttle, error_code, session_id
_HEAD_V4 = struct.Struct(">ii")  # correlation_id, throttle
_PART = struct.Struct(">ihqq")  # partition, error, hw, lso
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")
_EPOCH_END = struct.Struct(">iq")  # DivergingEpoch: epoch, end_offset (13 bytes with its empty tag section)
_LEADER = struct.Struct(">ii")  # LeaderIdAndEpoch: leader_id, leader_epoch (9 bytes with its empty tag section)


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | memoryview | SizedSlice | None
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    diverging_epoch: tuple[int, int] | None = None
    """(epoch, end offset) when the fetcher's log diverged from the leader's (v12+, tagged field 0)."""
    current_leader: tuple[int, int] | None = None
    """(leader id, leader epoch) hinted with NOT_LEADER_OR_FOLLOWER (v12+, tagged field 1, KIP-951)."""


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A leader's address in the response's ``node_endpoints`` (v16+, tagged field 0, KIP-951)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


def _partition_tags(p: FetchedPartition) -> bytes:
    tags = []
    if p.diverging_epoch is not None:
        tags.append(b"\x00\x0d" + _EPOCH_END.pack(*p.diverging_epoch) + b"\x00")
    if p.current_leader is not None:
        tags.append(b"\x01\x09" + _LEADER.pack(*p.current_leader) + b"\x00")
    return _uvarint(len(tags)) + b"".join(tags)


def _node_endpoints_tag(endpoints: Sequence[NodeEndpoint]) -> bytes:
    body = bytearray(_uvarint(len(endpoints) + 1))
    for e in endpoints:
        body += _I32.pack(e.node_id) + _compact_string(e.host) + _I32.pack(e.port) + _compact_string(e.rack) + b"\x00"
    return b"\x01\x00" + _uvarint(len(body)) + body


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchedPartition]]],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> list[Any]:
    """The whole response frame (size prefix included) as a list of parts: byte strings, and,
    where a partition's records are a file slice, that slice object itself (the connection sends
    it with ``sendfile``). Each topic is named by its name up to v12 and by its id from v13."""
    flexible = version >= 12
    parts: list[Any] = []
    head = bytearray(b"\x00\x00\x00\x00")
    if version >= 7:
        if flexible:
            head += _I32.pack(correlation_id) + b"\x00" + _I32.pack(throttle_time_ms)
            head += struct.pack(">hi", error_code, session_id)
        else:
            head += _HEAD_V7.pack(correlation_id, throttle_time_ms, error_code, session_id)
    else:
        head += _HEAD_V4.pack(correlation_id, throttle_time_ms)
    head += _uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    buf = head
    total = 0
    for key, partitions in topics:
        if isinstance(key, uuid.UUID):
            buf += key.bytes
        else:
            raw = key.encode()
            buf += (_uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw
        buf += _uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            buf += _PART.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                buf += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                buf += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                buf += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    buf += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        buf += b"\x00"
            if version >= 11:
                buf += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                buf += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                size = len(records) if isinstance(records, (bytes, memoryview)) else records.size
                buf += _uvarint(size + 1) if flexible else _I32.pack(size)
                if size:
                    parts.append(bytes(buf))
                    total += len(buf)
                    parts.append(records)
                    total += size
                    buf = bytearray()
            if flexible:
                if p.diverging_epoch is None and p.current_leader is None:
                    buf += b"\x00"  # no partition tagged fields
                else:
                    buf += _partition_tags(p)
        if flexible:
            buf += b"\x00"  # topic tagged fields
    if flexible:
        buf += _node_endpoints_tag(node_endpoints) if version >= 16 and node_endpoints else b"\x00"
    parts.append(bytes(buf))
    total += len(buf)
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, total - 4)
    parts[0] = bytes(first)
    return parts
