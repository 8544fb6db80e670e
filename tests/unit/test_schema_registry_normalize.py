"""``normalize=true`` for Protobuf: the canonical ``.proto`` text rendered from the compiled
descriptor (options sorted, fully qualified type names, fields by number, imports sorted, map
entries as ``map<K, V>``), the same for differently written equivalent schemas, for base64
descriptors as confluent-kafka sends them, and stable when normalized again."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from odradek.schema_registry import protobuf
from odradek.schema_registry.errors import InvalidSchema
from odradek.schema_registry.protobuf_text import json_name, quote, render
from odradek.schema_registry.schemas import Reference, normalized, parse

T = descriptor_pb2.FieldDescriptorProto

MONEY = 'syntax = "proto3";\npackage d;\nmessage Money { int64 cents = 1; }\n'
OPTS = (
    'syntax = "proto3";\npackage o;\nimport "google/protobuf/descriptor.proto";\n'
    "message Rule { int32 min = 1; string tag = 2; }\n"
    "extend google.protobuf.FieldOptions { Rule rule = 50001; string label = 50002; repeated int32 nums = 50003; }\n"
    "extend google.protobuf.MessageOptions { bool flag = 50010; }\n"
)

WRITTEN = """
// a comment that goes away
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import "d/money.proto";
option java_package = "com.shop";
option go_package = "shop/v1";
message Order {
  option deprecated = true;
  map<string, Line> lines = 4;
  reserved "old", "legacy";
  reserved 20 to max, 9, 11 to 12;
  google.protobuf.Timestamp at = 3;
  oneof payment { d.Money cash = 8; string card = 7; }
  oneof channel { string web = 6; }
  string id = 1 [json_name = "orderId", deprecated = true];
  optional Status status = 2;
  message Line { int32 qty = 2; d.Money price = 1; }
  enum Status { OPEN = 0; CLOSED = 2; PAID = 1; }
}
enum Kind { option allow_alias = true; ZERO = 0; LEGACY = -1; NIL = 0; }
"""

EXPECTED = """syntax = "proto3";
package shop.v1;

import "d/money.proto";
import "google/protobuf/timestamp.proto";

option go_package = "shop/v1";
option java_package = "com.shop";

message Order {
  reserved 9;
  reserved 11 to 12;
  reserved 20 to max;
  reserved "legacy";
  reserved "old";
  option deprecated = true;
  string id = 1 [deprecated = true, json_name = "orderId"];
  optional .shop.v1.Order.Status status = 2;
  .google.protobuf.Timestamp at = 3;
  map<string, .shop.v1.Order.Line> lines = 4;
  oneof channel {
    string web = 6;
  }
  oneof payment {
    string card = 7;
    .d.Money cash = 8;
  }
  message Line {
    .d.Money price = 1;
    int32 qty = 2;
  }
  enum Status {
    OPEN = 0;
    PAID = 1;
    CLOSED = 2;
  }
}
enum Kind {
  option allow_alias = true;
  NIL = 0;
  ZERO = 0;
  LEGACY = -1;
}
"""


def _refs(**named: str) -> list[Reference]:
    return [Reference(name, text) for name, text in named.items()]


MONEY_REF = _refs(**{"d/money.proto": MONEY})


def test_renders_confluents_normal_form() -> None:
    text, parsed = normalized("PROTOBUF", WRITTEN, MONEY_REF)
    assert text == EXPECTED
    assert parsed.parsed.file.message_type[0].field[0].name == "id"  # the stored text, compiled again


def test_equivalent_schemas_normalize_to_one_text_and_identity() -> None:
    shuffled = (
        'syntax="proto3"; package shop.v1; import "d/money.proto"; import "google/protobuf/timestamp.proto";\n'
        'option go_package="shop/v1"; option java_package="com.shop";\n'
        'message Order { string id = 1 [deprecated=true, json_name="orderId"]; option deprecated=true;\n'
        '  reserved 11 to 12, 9; reserved 20 to max; reserved "legacy", "old";\n'
        "  optional .shop.v1.Order.Status status = 2; .google.protobuf.Timestamp at = 3;\n"
        "  oneof channel { string web = 6; } oneof payment { string card = 7; .d.Money cash = 8; }\n"
        "  map<string, Line> lines = 4;\n"
        "  message Line { .d.Money price = 1; int32 qty = 2; }\n"
        "  enum Status { OPEN = 0; PAID = 1; CLOSED = 2; } }\n"
        "enum Kind { NIL = 0; option allow_alias = true; LEGACY = -1; ZERO = 0; }\n"
    )
    a_text, a = normalized("PROTOBUF", WRITTEN, MONEY_REF)
    b_text, b = normalized("PROTOBUF", shuffled, MONEY_REF)
    assert a_text == b_text and a.identity == b.identity
    # without normalize the two stay different schemas (field order is part of the descriptor)
    assert parse("PROTOBUF", WRITTEN, MONEY_REF).identity != parse("PROTOBUF", shuffled, MONEY_REF).identity


def test_normalizing_twice_changes_nothing() -> None:
    text, _ = normalized("PROTOBUF", WRITTEN, MONEY_REF)
    again, _ = normalized("PROTOBUF", text, MONEY_REF)
    assert again == text


def test_message_order_is_kept_for_message_indexes() -> None:
    text, _ = normalized("PROTOBUF", 'syntax = "proto3";\nmessage Z { }\nmessage A { }\nenum E { X = 0; }\n')
    assert text.index("message Z") < text.index("message A") < text.index("enum E")


def test_a_base64_descriptor_normalizes_like_its_text() -> None:
    serialized = parse("PROTOBUF", WRITTEN, MONEY_REF).parsed.serialized()
    refs = [Reference("d/money.proto", parse("PROTOBUF", MONEY).parsed.serialized())]
    text, parsed = normalized("PROTOBUF", serialized, refs)
    assert text == EXPECTED
    assert parsed.identity == normalized("PROTOBUF", WRITTEN, MONEY_REF)[1].identity


def test_custom_options_are_named_by_their_extension_and_sorted() -> None:
    main = (
        'syntax = "proto3";\npackage m;\nimport "opts.proto";\n'
        "message A { option (o.flag) = true; option deprecated = true;\n"
        '  int32 x = 1 [(o.rule) = {tag: "t", min: 3}, (o.label) = "L", deprecated = true, (o.nums) = 4,'
        " (o.nums) = 5]; }\n"
    )
    refs = _refs(**{"opts.proto": OPTS})
    text, _ = normalized("PROTOBUF", main, refs)
    assert "  option deprecated = true;\n  option (.o.flag) = true;\n" in text
    assert (
        '  int32 x = 1 [deprecated = true, (.o.label) = "L", (.o.nums) = 4, (.o.nums) = 5,'
        ' (.o.rule) = { min: 3 tag: "t" }];\n' in text
    )
    assert normalized("PROTOBUF", text, refs)[0] == text
    # a base64 descriptor's imports are compiled to name its custom options
    serialized = parse("PROTOBUF", main, refs).parsed.serialized()
    assert normalized("PROTOBUF", serialized, refs)[0] == text


def test_custom_options_without_their_definitions_are_refused() -> None:
    fdp = parse(
        "PROTOBUF",
        'syntax = "proto3";\nimport "opts.proto";\nmessage A { option (o.flag) = true; }\n',
        _refs(**{"opts.proto": OPTS}),
    ).parsed.file
    with pytest.raises(InvalidSchema, match="custom options"):
        render(fdp)


def test_proto2_labels_defaults_groups_and_extensions() -> None:
    text, _ = normalized(
        "PROTOBUF",
        'syntax = "proto2"; package q;\n'
        "message G { extensions 1000 to max, 100 to 199; optional E e = 6 [default = TWO];\n"
        '  required string id = 2 [default = "a\\"b"]; optional bytes raw = 3 [default = "\\001x"];\n'
        "  optional group Inner = 5 { optional int32 v = 1; } optional double d = 4 [default = inf];\n"
        "  enum E { TWO = 2; ONE = 1; } }\n"
        "extend G { repeated string names = 101; optional int32 ext = 100; }\n",
    )
    assert text == (
        'syntax = "proto2";\npackage q;\n\nmessage G {\n'
        '  required string id = 2 [default = "a\\"b"];\n'
        '  optional bytes raw = 3 [default = "\\001x"];\n'
        "  optional double d = 4 [default = inf];\n"
        "  optional group Inner = 5 {\n    optional int32 v = 1;\n  }\n"
        "  optional .q.G.E e = 6 [default = TWO];\n"
        "  extensions 100 to 199;\n  extensions 1000 to max;\n"
        "  enum E {\n    ONE = 1;\n    TWO = 2;\n  }\n}\n"
        "extend .q.G {\n  optional int32 ext = 100;\n  repeated string names = 101;\n}\n"
    )


def test_services_keep_their_order_with_qualified_types() -> None:
    text, _ = normalized(
        "PROTOBUF",
        'syntax = "proto3"; package s; message M { }\n'
        "service B { rpc Put (stream M) returns (M) {\n"
        "  option idempotency_level = IDEMPOTENT; option deprecated = true; }\n"
        "  rpc Get (M) returns (stream M); }\nservice A { }\n",
    )
    assert text.endswith(
        "service B {\n  rpc Put (stream .s.M) returns (.s.M) {\n    option deprecated = true;\n"
        "    option idempotency_level = IDEMPOTENT;\n  }\n  rpc Get (.s.M) returns (stream .s.M);\n}\n"
        "service A {\n}\n"
    )


def test_duplicate_and_public_imports_are_sorted() -> None:
    fdp = parse("PROTOBUF", 'syntax = "proto3";\nmessage M { }\n').parsed.file
    fdp.dependency.extend(["b.proto", "a.proto", "b.proto", "c.proto"])
    fdp.public_dependency.append(3)
    assert 'import "a.proto";\nimport "b.proto";\nimport public "c.proto";\n' in render(fdp)


def test_a_descriptor_with_names_that_are_not_identifiers_is_refused() -> None:
    fdp = descriptor_pb2.FileDescriptorProto(syntax="proto3")
    fdp.message_type.add(name="A { } message B")
    text = base64.b64encode(fdp.SerializeToString()).decode()
    with pytest.raises(InvalidSchema, match="not an identifier"):
        normalized("PROTOBUF", text)
    with pytest.raises(InvalidSchema, match="syntax"):
        render(descriptor_pb2.FileDescriptorProto(syntax="editions"))


def test_avro_and_json_normalize_to_their_identity() -> None:
    assert normalized("AVRO", '{ "type": "string" }')[0] == '"string"'
    assert normalized("JSON", '{"type": "object", "additionalProperties": false}')[0] == (
        '{"additionalProperties":false,"type":"object"}'
    )


def test_helpers() -> None:
    assert quote('a"b\\c\n\x01é') == '"a\\"b\\\\c\\n\\001é"'
    assert json_name("order_id_2x") == "orderId2x" and json_name("a__b") == "aB"
    assert protobuf.normalize(parse("PROTOBUF", 'syntax = "proto3";').parsed, {}) == 'syntax = "proto3";\n'


def test_malformed_descriptors_get_a_precise_error() -> None:
    fdp = descriptor_pb2.FileDescriptorProto(syntax="proto3")
    m = fdp.message_type.add(name="M")
    entry = m.nested_type.add(name="XEntry")
    entry.options.map_entry = True
    m.field.add(name="x", number=1, type=T.TYPE_MESSAGE, type_name=".M.XEntry", label=T.LABEL_REPEATED)
    with pytest.raises(InvalidSchema, match="map entry"):
        render(fdp)
    m.field[0].type_name = ""
    with pytest.raises(InvalidSchema, match="has no type"):
        render(fdp)
    unknown = descriptor_pb2.FileDescriptorProto(syntax="proto3", dependency=["opts.proto"])
    unknown.options.MergeFromString(b"\x88\xb5\x18\x01")  # field 50001, varint: an unknown custom option
    serialized = base64.b64encode(unknown.SerializeToString()).decode()
    with pytest.raises(InvalidSchema, match="without google/protobuf/descriptor"):
        normalized("PROTOBUF", serialized, _refs(**{"opts.proto": 'syntax = "proto3";\n'}))
    empty = 'syntax = "proto3";\nimport "google/protobuf/descriptor.proto";\n'
    with pytest.raises(InvalidSchema, match="not defined"):
        normalized("PROTOBUF", serialized, _refs(**{"opts.proto": empty}))
