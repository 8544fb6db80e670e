"""JSON Schemas: parsing (``jsonschema``'s meta-schema check) and the compatibility rules
Confluent documents for JSON Schema, as a "does the reader accept everything the writer accepts"
check over the keywords that constrain instances.

:func:`check` (reader, writer) returns Confluent's difference names that break compatibility, such
as ``TYPE_CHANGED``, ``TYPE_NARROWED``, ``REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL``,
``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``, ``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``,
``ADDITIONAL_PROPERTIES_REMOVED``, ``REQUIRED_ATTRIBUTE_ADDED``, ``ENUM_ARRAY_NARROWED``,
``MAXIMUM_ADDED``/``MAXIMUM_DECREASED`` (and the other bounds), ``PATTERN_ADDED``/``PATTERN_CHANGED``,
``MULTIPLE_OF_CHANGED``, ``ITEMS_REMOVED``, ``SUM_TYPE_NARROWED``, each with the JSON path.
A property the reader adds is fine when the writer's content model is closed (the writer's data
cannot have it) or when the writer's ``additionalProperties`` schema is accepted by the new
property's schema; a property the reader removes is fine while the reader's model stays open.
Local ``$ref`` (``#/...``) and references by name are followed; recursion stops at a pair already
being compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import jsonschema.exceptions  # type: ignore[import-untyped]
import jsonschema.validators  # type: ignore[import-untyped]

from odradek.schema_registry.errors import InvalidSchema

UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
ALL_TYPES = {"null", "boolean", "object", "array", "number", "integer", "string"}


@dataclass(slots=True)
class JsonSchema:
    root: Any
    references: dict[str, Any]
    identity: str


def parse(text: str, references: dict[str, str]) -> JsonSchema:
    """Parse and check ``text`` against its meta-schema; raises InvalidSchema (42201)."""
    try:
        root = json.loads(text)
        refs = {name: json.loads(ref) for name, ref in references.items()}
        if not isinstance(root, (dict, bool)):
            raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
        jsonschema.validators.validator_for(root).check_schema(root)
    except (ValueError, jsonschema.exceptions.SchemaError) as e:
        message = getattr(e, "message", None) or str(e)
        raise InvalidSchema(f"Invalid schema {text[:200]!r}: {message}") from None
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None
    return JsonSchema(root, refs, json.dumps(root, sort_keys=True, separators=(",", ":")))


def _types(node: dict[str, Any]) -> set[str]:
    t = node.get("type")
    if t is None:
        return set(ALL_TYPES)
    types = {t} if isinstance(t, str) else set(t)
    if "number" in types:
        types.add("integer")
    return types


class _Checker:
    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.reader, self.writer = reader, writer
        self.messages: list[str] = []
        self.seen: set[tuple[int, int]] = set()

    def resolve(self, node: Any, doc: JsonSchema, depth: int = 0) -> Any:
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and depth < 32:
            ref = node["$ref"]
            depth += 1
            if ref.startswith("#"):
                target: Any = doc.root
                for part in [p for p in ref[1:].split("/") if p]:
                    part = part.replace("~1", "/").replace("~0", "~")
                    target = target.get(part) if isinstance(target, dict) else None
                node = target if target is not None else {}
            elif ref in doc.references:
                node = doc.references[ref]
            else:
                return {}
        return node

    def fail(self, kind: str, path: str) -> None:
        self.messages.append(f"{{errorType:'{kind}', description:'at path #/{path}'}}")

    def check(self, reader: Any, writer: Any, path: str) -> None:
        reader = self.resolve(reader, self.reader)
        writer = self.resolve(writer, self.writer)
        if reader is True or reader == {} or writer is False:
            return
        if reader is False:
            self.fail("SCHEMA_REMOVED" if writer is not False else "TYPE_CHANGED", path)
            return
        if writer is True:
            writer = {}
        if not isinstance(reader, dict) or not isinstance(writer, dict):
            return
        key = (id(reader), id(writer))
        if key in self.seen:
            return
        self.seen.add(key)
        for combiner in ("oneOf", "anyOf"):
            if combiner in writer:
                for i, branch in enumerate(writer[combiner]):
                    self.check(reader, branch, f"{path}{combiner}/{i}/")
                return
        for combiner in ("oneOf", "anyOf"):
            if combiner in reader:
                if not any(self._accepts(branch, writer) for branch in reader[combiner]):
                    self.fail("SUM_TYPE_NARROWED", path)
                return
        rt, wt = _types(reader), _types(writer)
        if not wt <= rt:
            self.fail("TYPE_NARROWED" if rt & wt else "TYPE_CHANGED", path)
            return
        self._bounds(reader, writer, path)
        if "enum" in reader and ("enum" not in writer or any(v not in reader["enum"] for v in writer["enum"])):
            self.fail("ENUM_ARRAY_NARROWED" if "enum" in writer else "ENUM_ARRAY_CHANGED", path)
        if "const" in reader and reader.get("const") != writer.get("const", object()):
            self.fail("CONST_CHANGED", path)
        if "object" in wt:
            self._object(reader, writer, path)
        if "array" in wt:
            self._array(reader, writer, path)

    def _accepts(self, reader: Any, writer: Any) -> bool:
        saved = len(self.messages)
        self.check(reader, writer, "")
        ok = len(self.messages) == saved
        del self.messages[saved:]
        return ok

    def _bounds(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        for name in UPPER_BOUNDS:
            r, w = reader.get(name), writer.get(name)
            if isinstance(r, (int, float)) and not isinstance(r, bool):
                if w is None:
                    self.fail(f"{_snake(name)}_ADDED", path)
                elif isinstance(w, (int, float)) and r < w:
                    self.fail(f"{_snake(name)}_DECREASED", path)
        for name in LOWER_BOUNDS:
            r, w = reader.get(name), writer.get(name)
            if isinstance(r, (int, float)) and not isinstance(r, bool):
                if w is None:
                    self.fail(f"{_snake(name)}_ADDED", path)
                elif isinstance(w, (int, float)) and r > w:
                    self.fail(f"{_snake(name)}_INCREASED", path)
        if "pattern" in reader and reader["pattern"] != writer.get("pattern"):
            self.fail("PATTERN_ADDED" if "pattern" not in writer else "PATTERN_CHANGED", path)
        rm, wm = reader.get("multipleOf"), writer.get("multipleOf")
        if isinstance(rm, (int, float)) and rm and (not isinstance(wm, (int, float)) or (wm / rm) != int(wm / rm)):
            self.fail("MULTIPLE_OF_ADDED" if wm is None else "MULTIPLE_OF_CHANGED", path)

    def _object(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        rprops, wprops = reader.get("properties", {}), writer.get("properties", {})
        radd = reader.get("additionalProperties", True)
        wadd = writer.get("additionalProperties", True)
        for name, rschema in rprops.items():
            if name in wprops:
                self.check(rschema, wprops[name], f"{path}properties/{name}/")
            elif wadd is False:
                continue
            elif name in reader.get("required", []) and "default" not in (self.resolve(rschema, self.reader) or {}):
                self.fail("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", f"{path}properties/{name}")
            elif not self._accepts(rschema, wadd):
                self.fail("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", f"{path}properties/{name}")
        for name, wschema in wprops.items():
            if name in rprops:
                continue
            if radd is False:
                self.fail("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", f"{path}properties/{name}")
            elif radd is not True and not self._accepts(radd, wschema):
                self.fail("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", f"{path}properties/{name}")
        if wadd is not False and radd is not True:
            if radd is False:
                self.fail("ADDITIONAL_PROPERTIES_REMOVED", f"{path}additionalProperties")
            else:
                self.check(radd, wadd, f"{path}additionalProperties/")
        for name in reader.get("required", []):
            newly = name not in writer.get("required", []) and name in wprops
            if newly and "default" not in (self.resolve(rprops.get(name, {}), self.reader) or {}):
                self.fail("REQUIRED_ATTRIBUTE_ADDED", f"{path}required/{name}")
        if reader.get("dependencies", {}) != writer.get("dependencies", {}) and reader.get("dependencies"):
            self.fail("DEPENDENCY_ADDED", path)

    def _array(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        ritems, witems = reader.get("items", {}), writer.get("items", {})
        if isinstance(ritems, list) or isinstance(witems, list):
            rl = ritems if isinstance(ritems, list) else []
            wl = witems if isinstance(witems, list) else []
            if len(rl) < len(wl) and reader.get("additionalItems", True) is False:
                self.fail("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", f"{path}items")
            for i, (r, w) in enumerate(zip(rl, wl, strict=False)):
                self.check(r, w, f"{path}items/{i}/")
            return
        self.check(ritems, witems, f"{path}items/")
        if reader.get("uniqueItems") and not writer.get("uniqueItems"):
            self.fail("UNIQUE_ITEMS_ADDED", path)


def _snake(name: str) -> str:
    out = "".join("_" + c if c.isupper() else c.upper() for c in name)
    return out


def check(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """Why ``reader`` does not accept every instance ``writer`` accepts (empty: it does)."""
    checker = _Checker(reader, writer)
    try:
        checker.check(reader.root, writer.root, "")
    except RecursionError:
        return ["schemas nested too deeply to compare"]
    return checker.messages
