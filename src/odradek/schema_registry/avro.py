"""Avro schemas: parsing (fastavro), identity, and the schema resolution rules of the Avro
specification ("Schema Resolution") as a compatibility check.

:func:`check` answers whether data written with ``writer`` can be read with ``reader``: Confluent's
BACKWARD is ``check(new, old)``, FORWARD ``check(old, new)``. It returns the reasons it cannot
(an empty list when it can), each phrased after Confluent's ``AvroCompatibilityChecker`` messages.
Rules: same primitive or a promotion (int to long/float/double, long to float/double, float to
double, string and bytes both ways); records match by full name, unqualified name or a reader
alias; a reader field takes the writer field of its name or of one of its aliases, or needs a
default; writer fields the reader lacks are ignored; enums need every writer symbol in the
reader's symbols unless the reader has a default symbol; fixed needs the same name and size;
arrays and maps by their items and values; a writer union needs each branch readable, a reader
union needs one branch that reads the writer. Recursive types are handled by assuming a pair
being checked is compatible (the co-inductive reading the specification implies).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from odradek.schema_registry.errors import InvalidSchema

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}
"""(writer, reader) pairs the specification lets the reader promote."""


@dataclass(slots=True)
class AvroSchema:
    """A parsed Avro schema: fastavro's parsed form and the named types it can see (its own and its references')."""

    parsed: Any
    named: dict[str, Any]
    identity: str
    """The schema as sorted, space-free JSON with ``{"type": "int"}`` written ``"int"``: equal for
    schemas that differ only in formatting; defaults, aliases, docs and properties are kept."""


def _normalize(node: Any) -> Any:
    if isinstance(node, dict):
        if set(node) == {"type"} and node["type"] in PRIMITIVES:
            return node["type"]
        return {k: _normalize(v) for k, v in sorted(node.items())}
    if isinstance(node, list):
        return [_normalize(x) for x in node]
    return node


def parse(text: str, references: list[str]) -> AvroSchema:
    """Parse ``text`` seeing the named types of ``references`` (schema texts, dependencies first).

    Raises InvalidSchema (42201) for anything fastavro refuses or that is not JSON.
    """
    named: dict[str, Any] = {}
    try:
        for ref in references:
            fastavro.parse_schema(json.loads(ref), named_schemas=named, _write_hint=False)
        raw = json.loads(text)
        parsed = fastavro.parse_schema(raw, named_schemas=named, _write_hint=False)
    except (ValueError, TypeError, KeyError, AttributeError, SchemaParseException, UnknownType) as e:
        raise InvalidSchema(f"Invalid schema {text[:200]!r}: {e}") from None
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None
    identity = json.dumps(_normalize(raw), sort_keys=True, separators=(",", ":"))
    return AvroSchema(parsed, named, identity)


def _type_of(node: Any) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, dict):
        t = node.get("type")
        return t if isinstance(t, str) else "union"
    return str(node)


class _Checker:
    def __init__(self, reader: AvroSchema, writer: AvroSchema) -> None:
        self.reader_named = reader.named
        self.writer_named = writer.named
        self.seen: set[tuple[int, int]] = set()
        self.messages: list[str] = []

    def resolve(self, node: Any, named: dict[str, Any]) -> Any:
        if isinstance(node, str) and node not in PRIMITIVES:
            return named.get(node, node)
        if isinstance(node, dict) and node.get("type") in PRIMITIVES:
            return node["type"]
        if isinstance(node, dict) and isinstance(node.get("type"), (list, dict)):
            return self.resolve(node["type"], named)
        return node

    def fail(self, path: str, message: str) -> bool:
        self.messages.append(f"{message} at '{path or '/'}'")
        return False

    def check(self, reader: Any, writer: Any, path: str) -> bool:
        reader = self.resolve(reader, self.reader_named)
        writer = self.resolve(writer, self.writer_named)
        rt, wt = _type_of(reader), _type_of(writer)
        if wt == "union":
            ok = True
            for i, branch in enumerate(writer):
                if not self._reads(reader, branch):
                    ok = self.fail(
                        f"{path}/{i}",
                        f"reader type {rt} not compatible with writer union branch "
                        f"{_type_of(self.resolve(branch, self.writer_named))}",
                    )
            return ok
        if rt == "union":
            if any(self._reads(branch, writer) for branch in reader):
                return True
            return self.fail(path, f"reader union lacking writer type: {wt}")
        if rt != wt:
            if (wt, rt) in PROMOTIONS:
                return True
            return self.fail(path, f"reader type: {rt} not compatible with writer type: {wt}")
        if rt in PRIMITIVES:
            return True
        key = (id(reader), id(writer))
        if key in self.seen:
            return True
        self.seen.add(key)
        if rt in ("record", "error", "enum", "fixed") and not _names_match(reader, writer):
            return self.fail(
                f"{path}/name", f"expected: {writer.get('name')} (name mismatch, reader {reader.get('name')})"
            )
        if rt == "array":
            return self.check(reader.get("items"), writer.get("items"), f"{path}/items")
        if rt == "map":
            return self.check(reader.get("values"), writer.get("values"), f"{path}/values")
        if rt == "fixed":
            if reader.get("size") != writer.get("size"):
                return self.fail(
                    f"{path}/size", f"expected: {writer.get('size')}, found: {reader.get('size')} (fixed size mismatch)"
                )
            return True
        if rt == "enum":
            missing = [s for s in writer.get("symbols", []) if s not in reader.get("symbols", [])]
            if missing and reader.get("default") is None:
                return self.fail(f"{path}/symbols", f"reader enum lacks symbols {missing} (missing enum symbols)")
            return True
        return self._record(reader, writer, path)

    def _reads(self, reader: Any, writer: Any) -> bool:
        saved = len(self.messages)
        ok = self.check(reader, writer, "")
        del self.messages[saved:]
        return ok

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        writer_fields = {f["name"]: f for f in writer.get("fields", [])}
        ok = True
        for i, field in enumerate(reader.get("fields", [])):
            names = [field["name"], *field.get("aliases", [])]
            match = next((writer_fields[n] for n in names if n in writer_fields), None)
            if match is None:
                if "default" not in field:
                    ok = self.fail(
                        f"{path}/fields/{i}",
                        f"reader field {field['name']!r} has no default value and is missing in the writer "
                        "(READER_FIELD_MISSING_DEFAULT_VALUE)",
                    )
                continue
            ok = self.check(field["type"], match["type"], f"{path}/fields/{i}/type") and ok
        return ok


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    r, w = str(reader.get("name", "")), str(writer.get("name", ""))
    if r == w or _short(r) == _short(w):
        return True
    return any(a == w or _short(a) == _short(w) for a in reader.get("aliases", []))


def check(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can)."""
    checker = _Checker(reader, writer)
    try:
        checker.check(reader.parsed, writer.parsed, "")
    except RecursionError:
        return ["schemas nested too deeply to compare"]
    return checker.messages
