"""Compatibility rules of the schema registry, case by case after the tables Confluent documents
for Avro, JSON Schema and Protobuf (reader = new schema for BACKWARD)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from odradek.schema_registry.errors import InvalidSchema
from odradek.schema_registry.schemas import Reference, check_compatibility, parse


def avro(fields: list[dict[str, Any]], name: str = "R", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": fields, **extra})


def backward(new: str, old: str, kind: str = "AVRO") -> bool:
    return not check_compatibility("BACKWARD", parse(kind, new), [parse(kind, old)])


INT_A = [{"name": "a", "type": "int"}]

AVRO_CASES = [
    # (new, old, backward compatible)
    (avro(INT_A), avro(INT_A), True),
    (avro([*INT_A, {"name": "b", "type": "string", "default": ""}]), avro(INT_A), True),
    (avro([*INT_A, {"name": "b", "type": "string"}]), avro(INT_A), False),
    (avro([]), avro(INT_A), True),  # removing a field: the reader ignores it
    (avro([{"name": "a", "type": "long"}]), avro(INT_A), True),  # int -> long promotion
    (avro([{"name": "a", "type": "double"}]), avro(INT_A), True),
    (avro([{"name": "a", "type": "float"}]), avro([{"name": "a", "type": "long"}]), True),
    (avro(INT_A), avro([{"name": "a", "type": "long"}]), False),  # no narrowing
    (avro([{"name": "a", "type": "bytes"}]), avro([{"name": "a", "type": "string"}]), True),
    (avro([{"name": "a", "type": "string"}]), avro([{"name": "a", "type": "bytes"}]), True),
    (avro([{"name": "a", "type": "string"}]), avro(INT_A), False),
    (avro([{"name": "a", "type": ["null", "int"]}]), avro(INT_A), True),  # reader union has the type
    (avro(INT_A), avro([{"name": "a", "type": ["null", "int"]}]), False),  # writer null unreadable
    (avro([{"name": "a", "type": ["null", "long"]}]), avro([{"name": "a", "type": ["null", "int"]}]), True),
    (avro([{"name": "z", "type": "int", "aliases": ["a"]}]), avro(INT_A), True),  # field alias
    (avro(INT_A, name="S"), avro(INT_A), False),  # record renamed
    (avro(INT_A, name="S", aliases=["R"]), avro(INT_A), True),  # renamed with an alias
    (avro(INT_A, name="ns.R"), avro(INT_A), True),  # unqualified names match
]


def _enum(symbols: list[str], **extra: Any) -> str:
    return avro([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": symbols, **extra}}])


def _fixed(size: int) -> str:
    return avro([{"name": "f", "type": {"type": "fixed", "name": "F", "size": size}}])


AVRO_CASES += [
    (_enum(["A", "B", "C"]), _enum(["A", "B"]), True),  # symbol added
    (_enum(["A"]), _enum(["A", "B"]), False),  # symbol removed
    (_enum(["A", "U"], default="U"), _enum(["A", "B"]), True),  # removed, but a default symbol
    (_fixed(16), _fixed(16), True),
    (_fixed(8), _fixed(16), False),
    (
        avro([{"name": "m", "type": {"type": "map", "values": "long"}}]),
        avro([{"name": "m", "type": {"type": "map", "values": "int"}}]),
        True,
    ),
    (
        avro([{"name": "l", "type": {"type": "array", "items": "int"}}]),
        avro([{"name": "l", "type": {"type": "array", "items": "string"}}]),
        False,
    ),
    (  # nested records resolve field by field
        avro(
            [{"name": "n", "type": json.loads(avro([{"name": "x", "type": "int"}, {"name": "y", "type": "int"}], "N"))}]
        ),
        avro([{"name": "n", "type": json.loads(avro([{"name": "x", "type": "int"}], name="N"))}]),
        False,
    ),
    (  # recursion: a linked list gains a defaulted field
        avro(
            [
                {"name": "v", "type": "int"},
                {"name": "next", "type": ["null", "R"]},
                {"name": "w", "type": "int", "default": 0},
            ]
        ),
        avro([{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "R"]}]),
        True,
    ),
]


@pytest.mark.parametrize(("new", "old", "expected"), AVRO_CASES)
def test_avro_backward(new: str, old: str, expected: bool) -> None:
    assert backward(new, old) is expected


def test_levels_and_transitivity() -> None:
    v1 = parse("AVRO", avro(INT_A))
    v2 = parse("AVRO", avro([*INT_A, {"name": "b", "type": "int", "default": 0}]))
    v3 = parse("AVRO", avro([*INT_A, {"name": "b", "type": "int"}]))
    assert check_compatibility("BACKWARD", v3, [v1, v2]) == []  # reads v2's data
    assert check_compatibility("BACKWARD_TRANSITIVE", v3, [v1, v2])  # not v1's
    assert check_compatibility("FORWARD", v3, [v1]) == []  # v1 reads v3's data
    assert check_compatibility("FULL", v3, [v1])
    assert check_compatibility("FULL", v2, [v1]) == []
    assert check_compatibility("NONE", parse("AVRO", '"string"'), [v1]) == []
    assert check_compatibility("FORWARD", v1, [v3, v2]) == []  # v2 reads v1's data
    assert check_compatibility("FORWARD_TRANSITIVE", v1, [v3, v2])  # v3 does not
    assert check_compatibility("BACKWARD", parse("JSON", "{}"), [v1])  # another schema type


def test_avro_identity_keeps_defaults_and_aliases() -> None:
    plain = parse("AVRO", avro(INT_A))
    assert parse("AVRO", json.dumps(json.loads(avro(INT_A)), indent=2)).identity == plain.identity
    assert parse("AVRO", avro([{"name": "a", "type": {"type": "int"}}])).identity == plain.identity
    assert parse("AVRO", avro([{"name": "a", "type": "int", "default": 1}])).identity != plain.identity
    assert parse("AVRO", avro(INT_A, aliases=["Q"])).identity != plain.identity


def test_avro_references_and_errors() -> None:
    address = json.dumps({"type": "record", "name": "Address", "fields": [{"name": "c", "type": "string"}]})
    person = avro([{"name": "home", "type": "Address"}], name="Person")
    parse("AVRO", person, [Reference("Address", address)])
    for bad in ("not json", '{"type": "recrod"}', avro([{"name": "a", "type": "Nope"}]), "[]x"):
        with pytest.raises(InvalidSchema):
            parse("AVRO", bad)
    with pytest.raises(InvalidSchema):
        parse("AVRO", person)


def obj(props: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": "object", "properties": props, **extra})


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
CLOSED = {"additionalProperties": False}

JSON_CASES = [
    (obj({"a": STR}), obj({"a": STR}), True),
    (obj({"a": STR, "b": INT}), obj({"a": STR}), False),  # added to an open content model
    (obj({"a": STR, "b": INT}), obj({"a": STR}, **CLOSED), True),  # added to a closed model
    (obj({"a": STR, "b": {}}), obj({"a": STR}), True),  # added, accepting anything
    (obj({}), obj({"a": STR}), True),  # removed from an open model
    (obj({}, **CLOSED), obj({"a": STR}, **CLOSED), False),  # removed from a closed model
    (obj({"a": STR}, **CLOSED), obj({"a": STR}), False),  # additionalProperties removed
    (obj({"a": STR}), obj({"a": STR}, **CLOSED), True),
    (obj({"a": NUM}), obj({"a": INT}), True),  # integer widened to number
    (obj({"a": INT}), obj({"a": NUM}), False),  # narrowed
    (obj({"a": STR}), obj({"a": INT}), False),
    (obj({"a": STR}, required=["a"]), obj({"a": STR}), False),  # required attribute added
    (obj({"a": {"type": "string", "default": ""}}, required=["a"]), obj({"a": STR}), True),  # with a default
    (obj({"a": STR}), obj({"a": STR}, required=["a"]), True),
    (obj({"a": {"type": "string", "maxLength": 5}}), obj({"a": {"type": "string", "maxLength": 9}}), False),
    (obj({"a": {"type": "string", "maxLength": 9}}), obj({"a": {"type": "string", "maxLength": 5}}), True),
    (obj({"a": {"type": "string", "maxLength": 9}}), obj({"a": STR}), False),  # bound added
    (obj({"a": {"type": "integer", "minimum": 2}}), obj({"a": {"type": "integer", "minimum": 0}}), False),
    (obj({"a": {"type": "integer", "minimum": 0}}), obj({"a": {"type": "integer", "minimum": 2}}), True),
    (obj({"a": {"enum": ["x", "y", "z"]}}), obj({"a": {"enum": ["x", "y"]}}), True),
    (obj({"a": {"enum": ["x"]}}), obj({"a": {"enum": ["x", "y"]}}), False),
    (obj({"a": {"type": "string", "pattern": "^a"}}), obj({"a": STR}), False),
    (obj({"a": {"type": "array", "items": NUM}}), obj({"a": {"type": "array", "items": INT}}), True),
    (obj({"a": {"type": "array", "items": STR}}), obj({"a": {"type": "array", "items": INT}}), False),
    (obj({"a": {"oneOf": [STR, INT]}}), obj({"a": STR}), True),  # sum type extended
    (obj({"a": STR}), obj({"a": {"oneOf": [STR, INT]}}), False),  # sum type narrowed
    (obj({"a": {"type": "integer", "multipleOf": 2}}), obj({"a": {"type": "integer", "multipleOf": 4}}), True),
    (obj({"a": {"type": "integer", "multipleOf": 4}}), obj({"a": {"type": "integer", "multipleOf": 2}}), False),
    (  # local $ref followed
        json.dumps({"$defs": {"n": NUM}, "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}),
        obj({"a": INT}),
        True,
    ),
]


@pytest.mark.parametrize(("new", "old", "expected"), JSON_CASES)
def test_json_schema_backward(new: str, old: str, expected: bool) -> None:
    assert backward(new, old, "JSON") is expected


def test_json_schema_parse_errors() -> None:
    for bad in ('{"type": 12}', "[1]", "nope", '{"minimum": "x"}'):
        with pytest.raises(InvalidSchema):
            parse("JSON", bad)
    assert parse("JSON", '{"a":1, "type":"object"}').identity == parse("JSON", '{"type": "object", "a": 1}').identity


def proto(body: str, package: str = "p", syntax: str = "proto3") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{body}\n'


PROTO_CASES = [
    (proto("message M { int32 a = 1; }"), proto("message M { int32 a = 1; }"), True),
    (proto("message M { int32 a = 1; string b = 2; }"), proto("message M { int32 a = 1; }"), True),  # field added
    (proto("message M { int32 a = 1; }"), proto("message M { int32 a = 1; string b = 2; }"), True),  # removed
    (proto("message M { int32 renamed = 1; }"), proto("message M { int32 a = 1; }"), True),
    (proto("message M { int64 a = 1; }"), proto("message M { int32 a = 1; }"), True),  # same wire group
    (proto("message M { bool a = 1; }"), proto("message M { uint64 a = 1; }"), True),
    (proto("message M { sint64 a = 1; }"), proto("message M { sint32 a = 1; }"), True),
    (proto("message M { sfixed32 a = 1; }"), proto("message M { fixed32 a = 1; }"), True),
    (proto("message M { bytes a = 1; }"), proto("message M { string a = 1; }"), True),
    (proto("message M { sint32 a = 1; }"), proto("message M { int32 a = 1; }"), False),  # zigzag vs varint
    (proto("message M { fixed64 a = 1; }"), proto("message M { int64 a = 1; }"), False),
    (proto("message M { string a = 1; }"), proto("message M { int32 a = 1; }"), False),
    (proto("message N {} message M { N a = 1; }"), proto("message M { string a = 1; }"), False),  # kind changed
    (
        proto("message N {} message O {} message M { O a = 1; }"),
        proto("message N {} message O {} message M { N a = 1; }"),
        False,
    ),  # named type changed
    (proto("message M { repeated string a = 1; }"), proto("message M { string a = 1; }"), True),  # label
    (proto("enum E { A = 0; } message M { E a = 1; }"), proto("message M { int32 a = 1; }"), True),  # enum ~ int
    (proto("enum E { A = 0; } message M { E a = 1; }"), proto("message M { string a = 1; }"), False),
    (proto("message M { map<string, int64> m = 1; }"), proto("message M { map<string, int32> m = 1; }"), True),
    (proto("message M { map<string, string> m = 1; }"), proto("message M { map<string, int32> m = 1; }"), False),
    (proto("message N {} message M { N m = 1; }"), proto("message M { map<string, int32> m = 1; }"), False),
    (proto("message M { double a = 1; }"), proto("message M { float a = 1; }"), False),
    (proto("message M {}"), proto("message M {} message Gone {}"), False),  # message removed
    (proto("message M {} message New {}"), proto("message M {}"), True),  # message added
    (proto("message M {}", package="q"), proto("message M {}"), False),  # package changed
    (proto("message M { optional int32 a = 1; }", syntax="proto2"), proto("message M { int32 a = 1; }"), False),
    (proto("enum E { A = 0; B = 1; C = 2; }"), proto("enum E { A = 0; B = 1; }"), True),  # constant added
    (proto("enum E { A = 0; }"), proto("enum E { A = 0; B = 1; }"), True),  # constant removed: kept on the wire
    (proto("message M {}"), proto("message M {} enum E { A = 0; }"), True),  # enum removed
    (
        proto("message M { oneof o { int32 a = 1; } }"),
        proto("message M { oneof o { int32 a = 1; int32 b = 2; } }"),
        False,
    ),  # oneof field removed
    (
        proto("message M { oneof o { int32 a = 1; } int32 b = 2; }"),
        proto("message M { oneof o { int32 a = 1; int32 b = 2; } }"),
        True,
    ),  # moved out of the oneof: nothing lost
    (
        proto("message M { oneof o { int32 a = 1; int32 b = 2; } }"),
        proto("message M { int32 a = 1; int32 b = 2; }"),
        False,
    ),  # several fields moved into a oneof
    (
        proto("message M { oneof o { int32 a = 1; int32 b = 2; } }"),
        proto("message M { oneof o { int32 a = 1; } int32 b = 2; }"),
        False,
    ),  # field moved into an existing oneof
    (proto("message M { oneof o { int32 a = 1; } }"), proto("message M { int32 a = 1; }"), True),  # one field
    (
        proto("message M { required int32 a = 1; optional int32 b = 2; }", syntax="proto2"),
        proto("message M { required int32 a = 1; }", syntax="proto2"),
        True,
    ),
    (
        proto("message M { required int32 a = 1; required int32 b = 2; }", syntax="proto2"),
        proto("message M { required int32 a = 1; }", syntax="proto2"),
        False,
    ),  # required field added
    (
        proto("message M { optional int32 b = 2; }", syntax="proto2"),
        proto("message M { required int32 a = 1; optional int32 b = 2; }", syntax="proto2"),
        False,
    ),  # required field removed
]


@pytest.mark.parametrize(("new", "old", "expected"), PROTO_CASES)
def test_protobuf_backward(new: str, old: str, expected: bool) -> None:
    assert backward(new, old, "PROTOBUF") is expected


def test_protobuf_text_and_descriptor_are_the_same_schema() -> None:
    text = proto("message M { int32 a = 1; } // a comment")
    parsed = parse("PROTOBUF", text)
    assert parse("PROTOBUF", parsed.parsed.serialized()).identity == parsed.identity
    assert parse("PROTOBUF", proto("message  M {\n  int32 a = 1;\n}")).identity == parsed.identity
    assert parse("PROTOBUF", proto("message M { int32 a = 2; }")).identity != parsed.identity


def test_protobuf_references_and_errors() -> None:
    dep = proto("message Money { int64 cents = 1; }", package="d")
    main = proto('import "d/money.proto";\nmessage Order { d.Money total = 1; }')
    parsed = parse("PROTOBUF", main, [Reference("d/money.proto", dep)])
    assert [m.name for m in parsed.parsed.file.message_type] == ["Order"]
    binary = parse("PROTOBUF", dep).parsed.serialized()
    assert parse("PROTOBUF", main, [Reference("d/money.proto", binary)]).identity == parsed.identity
    for bad in ("message {", proto("message M { Unknown a = 1; }"), proto('import "missing.proto";')):
        with pytest.raises(InvalidSchema):
            parse("PROTOBUF", bad)
    with pytest.raises(InvalidSchema):
        parse("PROTOBUF", main, [Reference("../../escape.proto", dep)])
