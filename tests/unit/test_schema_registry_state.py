"""The ``_schemas`` records and the state they build, and the broker's reading of value headers."""

from __future__ import annotations

import json

import pytest

from odradek.errors import CorruptRecordError
from odradek.protocol.records import Record, build_batch
from odradek.schema_registry.records import RegistryKey, SchemaValue, decode_key, encode_json
from odradek.schema_registry.state import RegistryState
from odradek.server.schema_validation import value_headers


def _schema(subject: str, version: int, schema_id: int) -> tuple[bytes, bytes]:
    return RegistryKey("SCHEMA", subject, version).encode(), SchemaValue(subject, version, schema_id, '"int"').encode()


def test_keys_are_confluents_bytes() -> None:
    assert RegistryKey("SCHEMA", "s", 2).encode() == b'{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}'
    assert RegistryKey("CONFIG", None).encode() == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert RegistryKey("NOOP").encode() == b'{"keytype":"NOOP","magic":0}'
    for raw in (
        b"x",
        b"[]",
        b'{"keytype":"CONTEXT"}',
        b'{"keytype":"SCHEMA","subject":"s"}',
        None,
        b'{"keytype":"SCHEMA","subject":1,"version":1}',
    ):
        assert decode_key(raw) is None


def test_state_follows_records() -> None:
    state = RegistryState()
    for subject, version, schema_id in (("a", 1, 1), ("a", 2, 2), ("b", 1, 1)):
        state.apply(*_schema(subject, version, schema_id))
    assert state.subjects() == ["a", "b"] and state.max_id == 2
    assert state.ids_by_subject["a"] == {1, 2}
    assert state.apply(b'{"keytype":"CONTEXT","magic":0}', b"{}") is None  # skipped
    assert state.apply(*_schema("c", 1, 3)[:1], b"not json") is not None  # key known, value ignored
    assert "c" not in state.versions
    state.apply(RegistryKey("DELETE_SUBJECT", "a").encode(), encode_json({"subject": "a", "version": 1}))
    assert [v.version for v in state.live_versions("a")] == [2] and state.ids_by_subject["a"] == {2}
    state.apply(RegistryKey("CLEAR_SUBJECT", "a").encode(), encode_json({"subject": "a"}))
    assert list(state.versions["a"]) == [2]
    state.apply(RegistryKey("SCHEMA", "a", 2).encode(), None)  # hard delete
    assert "a" not in state.versions and state.ids_by_subject["a"] == frozenset()
    assert state.is_used(1) and not state.is_used(2)
    state.apply(RegistryKey("CONFIG", None).encode(), encode_json({"compatibilityLevel": "FULL"}))
    state.apply(RegistryKey("MODE", "b").encode(), encode_json({"mode": "READONLY"}))
    assert state.effective_compatibility("b") == "FULL" and state.effective_mode("b") == "READONLY"
    state.apply(RegistryKey("MODE", "b").encode(), None)
    assert state.effective_mode("b") == "READWRITE"
    assert json.loads(SchemaValue("s", 1, 1, "x", "JSON").encode())["schemaType"] == "JSON"


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_value_headers_read_the_first_bytes_of_each_value(compression: int) -> None:
    values = [b"\x00\x00\x00\x00\x07payload", None, b"ab", b"\x00\x00\x00\x01\x00"]
    batch = build_batch([Record(b"k", v) for v in values], compression=compression)
    got = list(value_headers(batch + batch, 1 << 20))
    assert got == [(i, None if v is None else v[:5]) for i, v in enumerate(values)] * 2


def test_value_headers_refuse_malformed_records() -> None:
    batch = bytearray(build_batch([Record(b"k", b"v" * 50)]))
    batch[61] = 0x7F  # the first record's length now runs past the batch
    with pytest.raises(CorruptRecordError):
        list(value_headers(bytes(batch), 1 << 20))
