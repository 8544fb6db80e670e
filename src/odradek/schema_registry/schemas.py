"""One entry point for the three schema types: parse a schema with its references, give its
identity and its normalized text, and check compatibility under a Confluent compatibility level.

``schemaType`` is ``AVRO`` (the default when absent), ``JSON`` or ``PROTOBUF``; anything else is
InvalidSchema (42201), as Confluent answers an unknown type. Parsing is CPU-bound, and Protobuf
text waits for protoc in a child process; callers on an event loop run it in a worker thread
(which blocks until the child has exited, see ``protobuf``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.schema_registry import avro, json_schema, protobuf
from odradek.schema_registry.errors import InvalidSchema

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


@dataclass(frozen=True, slots=True)
class Reference:
    """A resolved reference: its name (the import path, Avro full name or JSON ``$ref`` URL), and
    the text and type of the schema it points at."""

    name: str
    schema: str


@dataclass(slots=True)
class ParsedSchema:
    schema_type: str
    parsed: Any
    identity: str
    """Equal for two schemas of this type that differ only in formatting."""


def parse(schema_type: str, text: str, references: Sequence[Reference] = ()) -> ParsedSchema:
    """Parse ``text`` as ``schema_type``; raises InvalidSchema (42201) with the parser's reason."""
    if schema_type == "AVRO":
        a = avro.parse(text, [r.schema for r in references])
        return ParsedSchema("AVRO", a, a.identity)
    if schema_type == "JSON":
        j = json_schema.parse(text, {r.name: r.schema for r in references})
        return ParsedSchema("JSON", j, j.identity)
    if schema_type == "PROTOBUF":
        p = protobuf.parse(text, {r.name: r.schema for r in references})
        return ParsedSchema("PROTOBUF", p, p.identity)
    raise InvalidSchema(f"Invalid schema type {schema_type}")


def normalized(schema_type: str, text: str, references: Sequence[Reference] = ()) -> tuple[str, ParsedSchema]:
    """The normalized text of a schema and that text parsed (Confluent's ``normalize=true``).

    AVRO and JSON: the schema's identity, its JSON with sorted keys and no whitespace. PROTOBUF:
    the ``.proto`` text rendered from the compiled descriptor (``protobuf_text``), compiled again
    so that its identity is that of what is stored. Raises InvalidSchema (42201)."""
    parsed = parse(schema_type, text, references)
    if schema_type != "PROTOBUF":
        return parsed.identity, parsed
    new_text = protobuf.normalize(parsed.parsed, {r.name: r.schema for r in references})
    if new_text == text:
        return text, parsed
    return new_text, parse(schema_type, new_text, references)


def _reads(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    if reader.schema_type != writer.schema_type:
        return [f"Incompatible because of different schema type: {writer.schema_type} and {reader.schema_type}"]
    if reader.schema_type == "AVRO":
        return avro.check(reader.parsed, writer.parsed)
    if reader.schema_type == "JSON":
        return json_schema.check(reader.parsed, writer.parsed)
    return protobuf.check(reader.parsed, writer.parsed)


def check_compatibility(level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` is not compatible with ``previous`` (oldest first) under ``level`` (empty: it is).

    Non-transitive levels compare with the latest previous schema only; ``*_TRANSITIVE`` with all.
    BACKWARD: the new schema reads data written with the old; FORWARD: the old reads the new's data;
    FULL: both.
    """
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    messages: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            messages += _reads(new, old)
        if base in ("FORWARD", "FULL"):
            messages += _reads(old, new)
        if messages:
            break
    return messages
