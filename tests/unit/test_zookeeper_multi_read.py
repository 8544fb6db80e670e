"""The multiRead request's encoding and the checks on its answer (the answer is parsed from
bytes built here the way ZooKeeper's ``MultiResponse`` writes them)."""

from __future__ import annotations

import struct

import pytest
from kazoo.exceptions import NoAuthError, NoNodeError

from odradek.metadata.zookeeper_multi_read import MalformedMultiReadError, MultiRead

HEADER = struct.Struct("!i?i")
STAT = struct.Struct("!qqqqiiiqiiq")
CLOSING = HEADER.pack(-1, True, -1)


def data_entry(data: bytes | None, version: int) -> bytes:
    length = -1 if data is None else len(data)
    stat = STAT.pack(1, 2, 3, 4, version, 0, 0, 0, length if length > 0 else 0, 0, 1)
    return HEADER.pack(4, False, 0) + struct.pack("!i", length) + (data or b"") + stat


def error_entry(code: int) -> bytes:
    return HEADER.pack(-1, False, code) + struct.pack("!i", code)


def test_the_request_is_one_get_data_per_path_then_the_closing_header() -> None:
    body = MultiRead(["/a", "/brokers/ids/1"]).serialize()
    expected = (
        HEADER.pack(4, False, -1)
        + b"\0\0\0\x02/a\0"
        + HEADER.pack(4, False, -1)
        + b"\0\0\0\x0e/brokers/ids/1\0"
        + CLOSING
    )
    assert body == expected
    assert MultiRead.type == 22


def test_an_answer_gives_each_read_its_data_or_its_own_error() -> None:
    answer = (
        b"junk" + data_entry(b'{"leader":1}', 3) + error_entry(-101) + data_entry(None, 0) + error_entry(-102) + CLOSING
    )
    results = MultiRead(["/a", "/b", "/c", "/d"]).deserialize(answer, 4)
    first, missing, empty, denied = results
    assert isinstance(first, tuple) and first[0] == b'{"leader":1}' and first[1].version == 3
    assert isinstance(missing, NoNodeError)
    assert isinstance(empty, tuple) and empty[0] == b""
    assert isinstance(denied, NoAuthError)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (data_entry(b"x", 0) + CLOSING, "1 entries for 2 reads"),
        (data_entry(b"x", 0) * 3 + CLOSING, "more than the 2 entries"),
        (HEADER.pack(8, False, 0) + b"\0" * 8 + CLOSING, "unexpected type 8"),
        (
            data_entry(b"x", 0) + HEADER.pack(4, False, 0) + struct.pack("!i", 10_000) + b"short",
            "past the answer's end",
        ),
        (data_entry(b"x", 0) + HEADER.pack(4, False, 0) + struct.pack("!i", -5) + b"\0" * 80, "data length -5"),
        (data_entry(b"x", 0)[:-10], "past the answer's end"),
        (data_entry(b"x", 0) + HEADER.pack(-1, False, -101), "inside entry 1"),
        (data_entry(b"x", 0), "inside an entry header"),
    ],
)
def test_an_answer_that_does_not_match_the_reads_is_refused(answer: bytes, reason: str) -> None:
    with pytest.raises(MalformedMultiReadError, match=reason):
        MultiRead(["/a", "/b"]).deserialize(answer, 0)
