"""Malformed and hostile input over real sockets: the broker answers or closes that one
connection, keeps serving everyone else, and never corrupts a log."""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.protocol.codec import api_schema, decode_response, encode_request
from odradek.protocol.messages import build, nested
from odradek.testing import BrokerRunner

from .limits_support import recv_frame as _recv_frame


def _connect(broker: BrokerRunner) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.settimeout(5)
    return s


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def _api_versions_ok(broker: BrokerRunner) -> None:
    s = _connect(broker)
    schema = api_schema(18, 3)
    req = build(schema.request_type, client_software_name="t", client_software_version="1")
    s.sendall(encode_request(schema, 7, "probe", req))
    frame = _recv_frame(s)
    assert frame is not None
    corr, resp = decode_response(18, 3, frame)
    assert corr == 7 and resp.error_code == 0
    s.close()


def _produce_some(broker: BrokerRunner, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(n):
        p.produce(topic, value=b"good-%d" % i, partition=0)
    assert p.flush(10) == 0


def _read_all(broker: BrokerRunner, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.time() + 10
    while time.time() < deadline:
        msgs = c.consume(500, 0.3)
        if not msgs and out:
            break
        out += [m.value() for m in msgs if m.error() is None]
    c.close()
    return out


def test_unknown_api_key_and_version(odradek_broker: BrokerRunner) -> None:
    s = _connect(odradek_broker)
    frame = struct.pack(">hhih", 999, 0, 1, -1)
    s.sendall(struct.pack(">i", len(frame)) + frame)
    assert _closed(s)
    s = _connect(odradek_broker)
    frame = struct.pack(">hhih", 0, 99, 2, -1)  # Produce v99
    s.sendall(struct.pack(">i", len(frame)) + frame)
    assert _closed(s)
    _api_versions_ok(odradek_broker)


def test_api_versions_fallback_for_unknown_version(odradek_broker: BrokerRunner) -> None:
    s = _connect(odradek_broker)
    frame = struct.pack(">hhih", 18, 77, 42, 1) + b"x" + b"\x00garbage"
    s.sendall(struct.pack(">i", len(frame)) + frame)
    body = _recv_frame(s)
    assert body is not None
    corr, error, count = struct.unpack_from(">ihi", body, 0)
    assert corr == 42 and error == 35 and count > 5  # UNSUPPORTED_VERSION with the table
    keys = {struct.unpack_from(">hhh", body, 10 + 6 * i)[0] for i in range(count)}
    assert {0, 1, 2, 3, 18} <= keys


def test_oversized_and_invalid_frames(odradek_broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = odradek_broker_factory(overrides={"socket.request.max.bytes": "10000"})
    for head in (
        struct.pack(">i", 10**9),
        struct.pack(">i", 10001),
        struct.pack(">i", -5),
        struct.pack(">i", 0),
    ):
        s = _connect(broker)
        s.sendall(head)
        assert _closed(s), head
    _api_versions_ok(broker)


def test_garbage_in_record_batch_rejected_and_log_intact(odradek_broker: BrokerRunner) -> None:
    topic = "fuzzed"
    _produce_some(odradek_broker, topic, 5)
    schema = api_schema(0, 9)
    rng = random.Random(1)
    from odradek.protocol.records import Record, build_batch

    good = build_batch([Record(b"k", b"v" * 50)])
    codes = set()
    s = _connect(odradek_broker)
    for i in range(300):
        data = bytearray(good)
        mode = i % 4
        if mode == 0:
            data[rng.randrange(21, len(data))] ^= 0xFF  # CRC-covered byte
        elif mode == 1:
            data = data[: rng.randrange(1, len(data))]  # truncated batch
        elif mode == 2:
            data[16] = rng.choice([0, 1, 3, 99])  # magic
        else:
            data = bytearray(rng.randbytes(rng.randrange(1, 200)))
        pd = nested(schema.request_type, "PartitionProduceData")
        td = nested(schema.request_type, "TopicProduceData")
        req = build(
            schema.request_type,
            transactional_id=None,
            acks=1,
            timeout=__import__("datetime").timedelta(seconds=5),
            topic_data=(build(td, name=topic, partition_data=(build(pd, index=0, records=bytes(data)),)),),
        )
        s.sendall(encode_request(schema, i, "fuzz", req))
        frame = _recv_frame(s)
        assert frame is not None, f"connection closed on case {i}"
        _, resp = decode_response(0, 9, frame)
        code = resp.responses[0].partition_responses[0].error_code
        assert code != 0, f"garbage accepted in case {i}"
        codes.add(int(code))
    assert codes <= {2, 87}  # CORRUPT_MESSAGE, INVALID_RECORD
    _produce_some(odradek_broker, topic, 5)
    assert _read_all(odradek_broker, topic) == [b"good-%d" % i for i in range(5)] * 2


def test_random_bytes_fuzz_loop(odradek_broker: BrokerRunner) -> None:
    """Thousands of random and mutated frames; the broker survives every one."""
    rng = random.Random(20261122)
    schema = api_schema(3, 12)
    valid = encode_request(
        schema,
        1,
        "c",
        build(
            schema.request_type,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    cases = 0
    s = _connect(odradek_broker)
    for i in range(3000):
        kind = i % 3
        if kind == 0:
            body = rng.randbytes(rng.randrange(0, 64))
        elif kind == 1:
            body = bytearray(valid[4:])
            for _ in range(rng.randrange(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
            body = bytes(body)
        else:
            body = valid[4 : rng.randrange(4, len(valid))]
        if not body:
            continue
        try:
            s.sendall(struct.pack(">i", len(body)) + body)
            s.settimeout(1)
            frame = _recv_frame(s)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            frame = None
        if frame is None:
            s.close()
            s = _connect(odradek_broker)
        cases += 1
    s.close()
    assert cases > 2500
    _api_versions_ok(odradek_broker)
    _produce_some(odradek_broker, "after-fuzz", 3)
    assert _read_all(odradek_broker, "after-fuzz") == [b"good-0", b"good-1", b"good-2"]


def test_clients_cannot_write_to_internal_topics(odradek_broker: BrokerRunner) -> None:
    from confluent_kafka import KafkaError

    consumer = Consumer({"bootstrap.servers": odradek_broker.bootstrap_servers, "group.id": "makes-offsets-topic"})
    consumer.subscribe(["anything"])
    consumer.poll(2)  # joining the group creates __consumer_offsets
    consumer.close()
    errors: list = []
    p = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers, "message.timeout.ms": 3000})
    p.produce("__consumer_offsets", value=b"forged", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_EXCEPTION


def test_metadata_topics_named_by_id(odradek_broker: BrokerRunner) -> None:
    """Metadata v10-11 with a null topic name (a topic id instead) is answered INVALID_REQUEST
    under the name "" (its response cannot hold null); v12 looks the id up: the topic's metadata
    for a known id, UNKNOWN_TOPIC_ID for an unknown one. None of it closes the connection."""
    import uuid

    _produce_some(odradek_broker, "by-id", 1)

    def ask(version: int, topic_id: uuid.UUID) -> Any:
        schema = api_schema(3, version)
        topic = build(nested(schema.request_type, "MetadataRequestTopic"), topic_id=topic_id, name=None)
        names = ("allow_auto_topic_creation", "include_cluster_authorized_operations")
        flags = dict.fromkeys((*names, "include_topic_authorized_operations"), False)
        req = build(schema.request_type, topics=(topic,), **flags)
        s = _connect(odradek_broker)
        try:
            s.sendall(encode_request(schema, 5, "by-id", req))
            frame = _recv_frame(s)
            assert frame is not None, f"Metadata v{version} closed the connection"
            return decode_response(3, version, frame)[1].topics[0]
        finally:
            s.close()

    known = ask(12, uuid.UUID(int=0))  # a zero id and no name: nothing to look up
    assert known.error_code == 42 and known.name is None  # INVALID_REQUEST
    real_id = next(t.topic_id for t in _metadata_topics(odradek_broker) if t.name == "by-id")
    found = ask(12, real_id)
    assert found.error_code == 0 and found.name == "by-id" and len(found.partitions) == 1
    assert ask(12, uuid.uuid4()).error_code == 100  # UNKNOWN_TOPIC_ID
    for version in (10, 11):
        answer = ask(version, real_id)
        assert answer.error_code == 42 and answer.name == ""
    _api_versions_ok(odradek_broker)


def _metadata_topics(broker: BrokerRunner) -> Any:
    schema = api_schema(3, 12)
    req = build(schema.request_type, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)  # fmt: skip
    s = _connect(broker)
    try:
        s.sendall(encode_request(schema, 6, "all", req))
        frame = _recv_frame(s)
        assert frame is not None
        return decode_response(3, 12, frame)[1].topics
    finally:
        s.close()
