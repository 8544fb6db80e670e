"""The bounded walk of message bodies: exact on valid bodies, refuses every length that does not fit."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import Records

from odradek.errors import InvalidRequestError
from odradek.protocol.bounded import body_checker
from odradek.protocol.codec import api_schema, decode_request, decode_response, parse_request_header, peek_api
from odradek.server.apis import API_HANDLERS

st.register_type_strategy(Records, st.binary(max_size=64))

# The OffsetFetch v0 request that made the native reader ask for 16 GB (array count 0x7a6700ff).
CRASH_FRAME = bytes.fromhex(
    "000000310009000000000008000772646b61666b61000204667a6700ffffffff0203667a0400000000000000010000000200000100"
)

SERVED = [
    (key, version)
    for key, module in sorted(API_HANDLERS.items())
    for version in range(module.MIN_VERSION, module.MAX_VERSION + 1)
]
_SETTINGS = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _encode(cls: type, entity: object) -> bytes:
    out = io.BytesIO()
    entity_writer(cls)(out, entity)
    return out.getvalue()


def test_the_53_byte_frame_is_refused_with_kafkas_message() -> None:
    frame = CRASH_FRAME[4:]
    api_key, version, _ = peek_api(frame)
    schema = api_schema(api_key, version)
    header = parse_request_header(frame, schema.flexible)
    with pytest.raises(InvalidRequestError, match=r"Tried to allocate a collection of size 2053570815, but there"):
        decode_request(schema, frame, header.size)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_walk_ends_where_kio_wrote_and_refuses_every_truncation(api_key: int, version: int) -> None:
    schema = api_schema(api_key, version)
    check = body_checker(schema.request_type)

    @_SETTINGS
    @given(st.from_type(schema.request_type), st.data())
    def run(request: object, data: st.DataObject) -> None:
        body = _encode(schema.request_type, request)
        # -1: the walk stopped where nothing after needs it (the native reader reads the rest)
        assert check(memoryview(body), 0, len(body)) in (len(body), -1)
        try:
            decoded = decode_request(schema, body, 0)
        except InvalidRequestError as exc:
            # int64 durations beyond 2^53 ms are refused by the protocol library's reader (documented)
            assume("timedelta milliseconds overflow" not in str(exc))
            raise
        assert decoded == request
        if body:
            cut = data.draw(st.integers(0, len(body) - 1))
            with pytest.raises(InvalidRequestError):
                decode_request(schema, body[:cut], 0)

    run()


@pytest.mark.parametrize(("api_key", "version"), [(0, 3), (0, 9), (1, 4), (1, 12), (3, 1), (3, 12), (11, 5)])
def test_responses_are_walked_too(api_key: int, version: int) -> None:
    schema = api_schema(api_key, version)

    @_SETTINGS
    @given(st.from_type(schema.response_type))
    def run(response: object) -> None:
        body = _encode(schema.response_type, response)
        header = struct.pack(">i", 7) + (b"\x00" if schema.response_header_version == 1 else b"")
        assert decode_response(api_key, version, header + body) == (7, response)
        with pytest.raises(InvalidRequestError):
            decode_response(api_key, version, header + body[: len(body) // 2] if len(body) > 1 else header)

    run()


def _fetch_v4(partitions: int) -> bytes:
    topic = struct.pack(">h", 1) + b"t" + struct.pack(">i", partitions)
    topic += b"".join(struct.pack(">iqi", p, 0, 1 << 20) for p in range(partitions))
    return struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + struct.pack(">i", 1) + topic


@pytest.mark.parametrize("declared", [-2, 0x7FFFFFFF, 5000, 2])
def test_declared_array_counts_are_checked_against_the_bytes_left(declared: int) -> None:
    schema = api_schema(1, 4)
    check = body_checker(schema.request_type)
    body = bytearray(_fetch_v4(1))
    count_at = 4 * 4 + 1 + 4 + 2 + 1  # replica, max_wait, min_bytes, max_bytes, isolation, topics, name
    struct.pack_into(">i", body, count_at, declared)
    with pytest.raises(InvalidRequestError) as info:
        check(memoryview(bytes(body)), 0, len(body))
    if declared > 16:
        assert f"Tried to allocate a collection of size {declared}, but there are only 16 bytes remaining." in str(
            info.value
        )


def test_fixed_size_elements_are_checked_as_a_block() -> None:
    body = _fetch_v4(1000)
    check = body_checker(api_schema(1, 4).request_type)
    assert check(memoryview(body), 0, len(body)) == len(body)
    with pytest.raises(InvalidRequestError, match="collection of size 1000"):
        check(memoryview(body[:-1]), 0, len(body) - 1)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x05", "Tried to allocate a collection of size 5"),  # tagged-field count past the end
        (b"\x01\x00\x7f", "tagged field 0 of size 127"),  # one tag, declared 127 bytes
        (b"\x01\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
    ],
)
def test_tagged_fields_are_bounded(body: bytes, message: str) -> None:
    # ApiVersions v3's body: client_software_name, client_software_version (compact strings), tags
    schema = api_schema(18, 3)
    full = b"\x02a\x02b" + body
    with pytest.raises(InvalidRequestError, match=message):
        body_checker(schema.request_type)(memoryview(full), 0, len(full))


def test_strings_and_bytes_longer_than_the_frame_are_refused() -> None:
    produce = body_checker(api_schema(0, 3).request_type)
    body = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 300) + b"t"
    with pytest.raises(InvalidRequestError, match="string of length 300"):
        produce(memoryview(body), 0, len(body))
    body = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iii", 1, 0, 1 << 30)
    # the last topic's partitions hold no array: the walk leaves them to the native reader,
    # which checks the record set's length itself
    assert produce(memoryview(body), 0, len(body)) == -1
    with pytest.raises(InvalidRequestError, match="malformed ProduceRequest v3"):
        decode_request(api_schema(0, 3), body, 0)
    body = struct.pack(">hhi", -7, 1, 1000)
    with pytest.raises(InvalidRequestError, match="invalid string length -7"):
        produce(memoryview(body), 0, len(body))


def _fetch_v12(tag_sections: list[bytes]) -> bytes:
    """Fetch v12 body, one topic, a partition per entry of ``tag_sections`` (each partition's tags)."""
    parts = b"".join(struct.pack(">iiqiqi", p, 0, 0, -1, -1, 1 << 20) + tags for p, tags in enumerate(tag_sections))
    topic = b"\x02t" + bytes([len(tag_sections) + 1]) + parts + b"\x00"
    return struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1) + b"\x02" + topic + b"\x01" + b"\x01" + b"\x00"


@pytest.mark.parametrize("tagged", [None, 0, 50, 99])
def test_fixed_flexible_elements_are_walked_exactly_with_or_without_tags(tagged: int | None) -> None:
    # The strided check covers partitions whose tag sections are all empty; one non-empty tag
    # section (an unknown tag 9 of 3 bytes) sends the walk element by element.
    sections = [b"\x00"] * 100
    if tagged is not None:
        sections[tagged] = b"\x01\x09\x03abc"
    body = _fetch_v12(sections)
    schema = api_schema(1, 12)
    check = body_checker(schema.request_type)
    assert check(body, 0, len(body)) == len(body)
    if tagged is None:  # (kio refuses tags it does not know; the walk skips them)
        request = decode_request(schema, body, 0)
        assert [p.partition for p in request.topics[0].partitions] == list(range(100))
    for cut in (len(body) - 1, len(body) - 5, 40 + 33 * 50, 40):
        with pytest.raises(InvalidRequestError):
            check(body[:cut], 0, cut)
    # a tag section declared longer than what is left is refused
    sections[99] = b"\x01\x09\x7f"
    body = _fetch_v12(sections)
    with pytest.raises(InvalidRequestError, match="tagged field 9 of size 127"):
        check(body, 0, len(body))


def test_a_walk_bounded_below_the_buffer_end_stops_there() -> None:
    body = _fetch_v4(3)
    check = body_checker(api_schema(1, 4).request_type)
    padded = body + b"\x00" * 64
    assert check(padded, 0, len(body)) == len(body)
    with pytest.raises(InvalidRequestError):
        check(padded, 0, len(body) - 1)


_NATIVE_LENGTHS = """
import resource, struct
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from odradek.protocol.codec import api_schema
cases = {
    "compact records": (0, 9, b"\\x00" + struct.pack(">hi", 1, 1000) + b"\\x02\\x02t\\x02" + bytes(4)
                        + b"\\xff\\xff\\xff\\xff\\x07" + bytes(8)),
    "records": (0, 3, struct.pack(">hhiih", -1, 1, 1000, 1, 1) + b"t"
                + struct.pack(">iii", 1, 0, 0x7FFFFFFF) + bytes(8)),
    "string": (0, 3, struct.pack(">hhiih", -1, 1, 1000, 1, 0x7FFF) + bytes(8)),
    "tag count": (0, 9, b"\\x00" + struct.pack(">hi", 1, 1000) + b"\\x02\\x02t\\x02" + bytes(4)
                  + b"\\x01" + b"\\xff\\xff\\xff\\xff\\x07" + bytes(4)),
}
for name, (key, version, body) in cases.items():
    try:
        api_schema(key, version).read_request(body, 0)
    except Exception as exc:
        print(name, type(exc).__name__)
    else:
        print(name, "read")
"""


def test_the_native_reader_checks_string_and_bytes_lengths_before_it_allocates() -> None:
    # The walk leaves fields without arrays to the native reader (returns -1); that is safe only
    # while the reader refuses a string, bytes, records or tag count longer than what is left
    # without allocating it. A process limited to 1 GB would be killed if it tried.
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _NATIVE_LENGTHS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.rsplit(" ", 1) for line in out.stdout.splitlines())
    assert set(lines) == {"compact records", "records", "string", "tag count"}
    assert all(result != "read" for result in lines.values()), lines


def test_a_limit_on_array_entries_refuses_a_body_before_it_is_decoded() -> None:
    """A ShareAcknowledge of 2,000 batches of 100 acknowledge types each (202,001 entries in all)
    is refused by the walk with a limit of 10,000, long before the native reader would build it;
    the same body within the limit decodes."""
    from kio.schema.share_acknowledge.v1 import request as ack

    from odradek.protocol.bounded import TooManyEntries

    def body(batches: int, types: int) -> bytes:
        batch = ack.AcknowledgementBatch(first_offset=0, last_offset=types - 1, acknowledge_types=(1,) * types)
        partition = ack.AcknowledgePartition(partition_index=0, acknowledgement_batches=(batch,) * batches)
        topic = ack.AcknowledgeTopic(topic_id=None, partitions=(partition,))
        request = ack.ShareAcknowledgeRequest(group_id="g", member_id="m", share_session_epoch=1, topics=(topic,))
        return _encode(ack.ShareAcknowledgeRequest, request)

    schema = api_schema(79, 1)
    big = body(2000, 100)
    with pytest.raises(TooManyEntries, match="more than 10000 array entries"):
        schema.check_request(big, 0, len(big), 10_000)
    with pytest.raises(TooManyEntries):
        decode_request(schema, big, 0, 10_000)
    assert schema.check_request(big, 0, len(big)) == len(big)  # no limit: walked to the end
    small = body(10, 100)
    assert len(decode_request(schema, small, 0, 10_000).topics[0].partitions[0].acknowledgement_batches) == 10
