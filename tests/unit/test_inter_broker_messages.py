"""LeaderAndIsr, StopReplica, UpdateMetadata and ControlledShutdown (absent from kio) as Kafka 3.9 defines them."""

from __future__ import annotations

import io
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from odradek.client import write_txn_markers as markers
from odradek.controller.channel import response_errors
from odradek.controller.messages import controlled_shutdown, leader_and_isr, stop_replica, update_metadata
from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.errors import ErrorCode
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol import inter_broker_messages as ib
from odradek.protocol.bounded import body_checker
from odradek.protocol.codec import (
    api_schema,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)
from odradek.protocol.messages import nested
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

ALL = [(key, version) for key, versions in sorted(ib.VERSIONS.items()) for version in versions]
_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _body(cls: type, entity: object) -> bytes:
    out = io.BytesIO()
    entity_writer(cls)(out, entity)
    return out.getvalue()


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _compact(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def test_every_version_of_kafka_39_is_defined() -> None:
    assert {k: (v.start, v.stop - 1) for k, v in ib.VERSIONS.items()} == {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3)}
    flexible = {(k, v) for k, v in ALL if api_schema(k, v).flexible}
    assert flexible == {(4, v) for v in range(4, 8)} | {(5, v) for v in range(2, 5)} | {(6, 6), (6, 7), (6, 8), (7, 3)}


@pytest.mark.parametrize(("api_key", "version"), ALL)
def test_requests_round_trip_and_are_walked_exactly(api_key: int, version: int) -> None:
    schema = api_schema(api_key, version)
    check = body_checker(schema.request_type)

    @_SETTINGS
    @given(st.from_type(schema.request_type))
    def run(request: object) -> None:
        frame = encode_request(schema, 11, "controller-1", request)[4:]
        header = parse_request_header(frame, schema.flexible)
        assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, 11)
        assert decode_request(schema, frame, header.size) == request
        body = _body(schema.request_type, request)
        assert check(memoryview(body), 0, len(body)) in (len(body), -1)  # -1: rest left to the native reader

    run()


@pytest.mark.parametrize(("api_key", "version"), ALL)
def test_responses_round_trip_and_are_walked_exactly(api_key: int, version: int) -> None:
    schema = api_schema(api_key, version)
    check = body_checker(schema.response_type)

    @_SETTINGS
    @given(st.from_type(schema.response_type))
    def run(response: object) -> None:
        frame = encode_response(schema, 12, response)[4:]
        assert decode_response(api_key, version, frame) == (12, response)
        body = _body(schema.response_type, response)
        assert check(memoryview(body), 0, len(body)) in (len(body), -1)  # -1: rest left to the native reader

    run()


def test_leader_and_isr_v0_bytes() -> None:
    cls = ib.request_class(4, 0)
    state = nested(cls, "LeaderAndIsrPartitionState")
    leader = nested(cls, "LeaderAndIsrLiveLeader")
    request = cls(
        controller_id=1,
        controller_epoch=3,
        ungrouped_partition_states=(
            state(
                topic_name="t",
                partition_index=2,
                controller_epoch=3,
                leader=1,
                leader_epoch=4,
                isr=(1, 2),
                partition_epoch=5,
                replicas=(1, 2),
            ),
        ),
        live_leaders=(leader(broker_id=1, host_name="h", port=9092),),
    )
    body = struct.pack(">ii", 1, 3) + struct.pack(">i", 1) + _string("t") + struct.pack(">iiii", 2, 3, 1, 4)
    body += struct.pack(">iii", 2, 1, 2) + struct.pack(">i", 5) + struct.pack(">iii", 2, 1, 2)
    body += struct.pack(">ii", 1, 1) + _string("h") + struct.pack(">i", 9092)
    frame = encode_request(api_schema(4, 0), 7, "c", request)[4:]
    assert frame == struct.pack(">hhi", 4, 0, 7) + _string("c") + body
    assert decode_request(api_schema(4, 0), frame, 10 + 1) == request


def test_update_metadata_v8_flexible_bytes_with_tagged_type() -> None:
    cls = ib.request_class(6, 8)
    topic_id = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
    request = cls(
        controller_id=2,
        is_k_raft_controller=False,
        type=2,
        controller_epoch=9,
        broker_epoch=-1,
        topic_states=(
            nested(cls, "UpdateMetadataTopicState")(
                topic_name="t",
                topic_id=topic_id,
                partition_states=(
                    nested(cls, "UpdateMetadataPartitionState")(
                        partition_index=0,
                        controller_epoch=9,
                        leader=2,
                        leader_epoch=1,
                        isr=(2,),
                        zk_version=0,
                        replicas=(2,),
                        offline_replicas=(),
                    ),
                ),
            ),
        ),
        live_brokers=(
            nested(cls, "UpdateMetadataBroker")(
                id=2,
                endpoints=(
                    nested(cls, "UpdateMetadataEndpoint")(
                        port=9092, host="h", listener="PLAINTEXT", security_protocol=0
                    ),
                ),
                rack=None,
            ),
        ),
    )
    partition = struct.pack(">iiii", 0, 9, 2, 1) + b"\x02" + struct.pack(">i", 2) + struct.pack(">i", 0)
    partition += b"\x02" + struct.pack(">i", 2) + b"\x01" + b"\x00"  # replicas, offline (empty), tags
    topic = _compact("t") + topic_id.bytes + b"\x02" + partition + b"\x00"
    endpoint = struct.pack(">i", 9092) + _compact("h") + _compact("PLAINTEXT") + struct.pack(">h", 0) + b"\x00"
    broker = struct.pack(">i", 2) + b"\x02" + endpoint + b"\x00" + b"\x00"  # rack null, tags
    body = struct.pack(">i", 2) + b"\x00" + struct.pack(">iq", 9, -1) + b"\x02" + topic + b"\x02" + broker
    body += b"\x01" + b"\x00\x01\x02"  # one tagged field: tag 0 (type), size 1, value 2
    frame = encode_request(api_schema(6, 8), 7, "c", request)[4:]
    assert frame == struct.pack(">hhi", 6, 8, 7) + _string("c") + b"\x00" + body
    assert decode_request(api_schema(6, 8), frame, 12) == request


def test_controlled_shutdown_v0_uses_request_header_v0() -> None:
    schema = api_schema(7, 0)
    frame = encode_request(schema, 5, "ignored", ib.request_class(7, 0)(broker_id=3))[4:]
    assert frame == struct.pack(">hhii", 7, 0, 5, 3)
    header = parse_request_header(frame, schema.flexible)
    assert (header.client_id, header.size) == (None, 8)
    assert decode_request(schema, frame, header.size).broker_id == 3


# --- the controller's conversions and the broker's, for every version ---------------------------

TID = uuid.UUID(int=7)
STATES = {
    TopicPartition("a", 0): PartitionState(1, 4, [1, 2], [1, 2, 3], 5, 6),
    TopicPartition("a", 1): PartitionState(2, 0, [2], [2, 3], 5, 0),
    TopicPartition("b", 0): PartitionState(3, 1, [3], [3], 4, 2),
}
BROKERS = [
    BrokerInfo(1, "h1", 9091, endpoints=["PLAINTEXT://h1:9091"], rack="r1"),
    BrokerInfo(2, "h2", 9092, endpoints=["PLAINTEXT://h2:9092"]),
]


@pytest.mark.parametrize("version", range(8))
def test_leader_and_isr_survives_the_wire(version: int) -> None:
    request = LeaderAndIsrRequest(1, 5, dict(STATES), {"a": TID, "b": TID})
    message = leader_and_isr.encode(request, version, {b.id: b for b in BROKERS}, "PLAINTEXT")
    schema = api_schema(4, version)
    frame = encode_request(schema, 1, "c", message)[4:]
    decoded = decode_request(schema, frame, parse_request_header(frame, schema.flexible).size)
    back = leader_and_isr.decode(decoded, version)
    assert back.partition_states == STATES
    assert back.controller_epoch == 5
    assert back.topic_ids == ({"a": TID, "b": TID} if version >= 5 else {})
    assert [(x.broker_id, x.host_name, x.port) for x in decoded.live_leaders] == [(1, "h1", 9091), (2, "h2", 9092)]


@pytest.mark.parametrize("version", range(9))
def test_update_metadata_survives_the_wire(version: int) -> None:
    states = dict(STATES)
    request = UpdateMetadataRequest(1, 5, BROKERS, states, {"a": TID, "b": TID}, {"b"})
    message = update_metadata.encode(request, version, "PLAINTEXT")
    schema = api_schema(6, version)
    frame = encode_request(schema, 1, "c", message)[4:]
    decoded = decode_request(schema, frame, parse_request_header(frame, schema.flexible).size)
    back = update_metadata.decode(decoded, version)
    assert back.deleted_topics == {"b"}
    assert back.partition_states == {tp: s for tp, s in STATES.items() if tp.topic == "a"}
    assert [(b.id, b.host, b.port, tuple(b.endpoints)) for b in back.live_brokers] == [
        (1, "h1", 9091, ("PLAINTEXT://h1:9091",)),
        (2, "h2", 9092, ("PLAINTEXT://h2:9092",)),
    ]
    assert [b.rack for b in back.live_brokers] == (["r1", None] if version >= 2 else [None, None])
    if version >= 7:
        assert back.topic_ids == {"a": TID, "b": TID}


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("delete", [False, True])
def test_stop_replica_survives_the_wire(version: int, delete: bool) -> None:
    tps = sorted(STATES, key=lambda tp: (tp.topic, tp.partition))
    request = StopReplicaRequest(1, 5, tps, delete, {tps[0]: 4})
    message = stop_replica.encode(request, version)
    schema = api_schema(5, version)
    frame = encode_request(schema, 1, "c", message)[4:]
    decoded = decode_request(schema, frame, parse_request_header(frame, schema.flexible).size)
    (back,) = stop_replica.decode(decoded, version)
    assert (back.partitions, back.delete_partitions, back.controller_epoch) == (tuple(tps), delete, 5)
    if version >= 3:
        assert back.leader_epochs[tps[0]] == (stop_replica.EPOCH_DURING_DELETE if delete else 4)


def test_response_errors_are_read_per_partition() -> None:
    cls = ib.response_class(4, 5)
    response = cls(
        error_code=ErrorCode.none,
        topics=(
            nested(cls, "LeaderAndIsrTopicError")(
                topic_id=TID,
                partition_errors=(
                    nested(cls, "LeaderAndIsrPartitionError")(
                        partition_index=0, error_code=ErrorCode.stale_controller_epoch
                    ),
                    nested(cls, "LeaderAndIsrPartitionError")(partition_index=1, error_code=ErrorCode.none),
                ),
            ),
        ),
    )
    assert response_errors(4, response) == (ErrorCode.none, {f"{TID}-0": ErrorCode.stale_controller_epoch})


@pytest.mark.parametrize("version", range(4))
def test_controlled_shutdown_survives_the_wire(version: int) -> None:
    schema = api_schema(7, version)
    frame = encode_request(schema, 1, "c", controlled_shutdown.encode(3, version))[4:]
    decoded = decode_request(schema, frame, parse_request_header(frame, schema.flexible).size)
    assert controlled_shutdown.decode(decoded) == 3
    remaining = [TopicPartition("b", 0), TopicPartition("a", 2)]
    response = controlled_shutdown.encode_response(version, ErrorCode.none, remaining)
    _, back = decode_response(7, version, encode_response(schema, 1, response)[4:])
    assert controlled_shutdown.decode_response(back) == (ErrorCode.none, sorted(remaining))


def test_write_txn_markers_survive_the_wire() -> None:
    entries = [
        markers.TxnMarkerEntry(5, 1, 2, True, (TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 3))),
        markers.TxnMarkerEntry(6, 0, 2, False, (TopicPartition("c", 0),)),
    ]
    schema = api_schema(27, 1)
    frame = encode_request(schema, 1, "c", markers.encode(entries, 1))[4:]
    decoded = decode_request(schema, frame, parse_request_header(frame, schema.flexible).size)
    assert markers.decode(decoded) == entries
    results = [
        (5, [(tp, ErrorCode.none) for tp in entries[0].partitions]),
        (6, [(TopicPartition("c", 0), ErrorCode.not_leader_or_follower)]),
    ]
    _, back = decode_response(27, 1, encode_response(schema, 1, markers.encode_response(1, results))[4:])
    assert markers.decode_response(back) == [errors for _, errors in results]
    assert [len(m.topics) for m in back.markers] == [2, 1]  # a topic's adjacent partitions share one entry
