"""The normalized ``.proto`` text of a compiled ``FileDescriptorProto``, after the rules of
Confluent's ``ProtobufSchema.normalize()``; what ``normalize=true`` stores for a Protobuf schema.

Rendered from the descriptor, so comments, whitespace and the spelling of type names are gone:

- ``syntax`` (``proto2`` when the descriptor has none), ``package``; imports, public imports and
  weak imports each sorted and without duplicates.
- Options of every element (file, message, field, oneof, enum, enum value, service, method,
  extension range) sorted by name; a custom option is written with its extension's fully
  qualified name, ``(.pkg.name)``, and a message-valued one as a ``{ ... }`` aggregate in text
  format. A repeated option is one entry per value, in order. ``json_name`` is written only when it
  differs from the name protoc derives (protoc fills it in for every field), ``default`` for
  proto2 fields that have one.
- Messages and enums keep their declaration order, top level and nested (a message's position
  is its index in the serializers' message-index header, so it must not move); map entry types
  are not written, their fields become ``map<K, V>``; group bodies are written with their field.
- In a message: reserved ranges and names one per statement, ranges by start then names by name;
  options; fields outside oneofs by number; oneofs (not proto3 ``optional``'s synthetic ones) by
  their lowest field number, their fields by number; extension ranges by start; ``extend``
  blocks; nested messages; nested enums.
- Every message or enum type is fully qualified with a leading dot (``.pkg.Outer.Inner``).
- Enum values by number then name (in proto3 a zero value stays first, as protoc requires);
  enum reserved ranges and names as for messages (Confluent's text drops them; we keep them, as
  they are part of the schema).
- Services in declaration order, their methods in declaration order, types fully qualified.

Custom options live in the descriptor's options messages as unknown fields; rendering them needs
the files that define the extensions (``pool_files``: the transitive imports). Without them a
custom option is refused with :class:`InvalidSchema`, never dropped. Editions files (``syntax =
"editions"``) are refused too. Pure CPU; any thread.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format  # type: ignore[import-untyped]
from google.protobuf.descriptor import FieldDescriptor  # type: ignore[import-untyped]

from odradek.schema_registry.errors import InvalidSchema

T = descriptor_pb2.FieldDescriptorProto
MAX_FIELD_NUMBER = 536870912  # exclusive end of message ranges, written ``max``
MAX_ENUM_NUMBER = 2147483647  # inclusive end of enum ranges, written ``max``
SCALARS = {
    T.TYPE_DOUBLE: "double",
    T.TYPE_FLOAT: "float",
    T.TYPE_INT64: "int64",
    T.TYPE_UINT64: "uint64",
    T.TYPE_INT32: "int32",
    T.TYPE_FIXED64: "fixed64",
    T.TYPE_FIXED32: "fixed32",
    T.TYPE_BOOL: "bool",
    T.TYPE_STRING: "string",
    T.TYPE_BYTES: "bytes",
    T.TYPE_UINT32: "uint32",
    T.TYPE_SFIXED32: "sfixed32",
    T.TYPE_SFIXED64: "sfixed64",
    T.TYPE_SINT32: "sint32",
    T.TYPE_SINT64: "sint64",
}
LABELS = {T.LABEL_OPTIONAL: "optional", T.LABEL_REQUIRED: "required", T.LABEL_REPEATED: "repeated"}
ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DOTTED = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _ident(name: str) -> str:
    """``name`` if it is a ``.proto`` identifier: a base64 descriptor is untrusted, and a name such
    as ``A { } message B`` would otherwise change the schema its normalized text declares."""
    if not IDENT.fullmatch(name):
        raise InvalidSchema(f"Invalid schema: {name!r} is not an identifier")
    return name


def _dotted(name: str) -> str:
    if not DOTTED.fullmatch(name):
        raise InvalidSchema(f"Invalid schema: {name!r} is not a type or package name")
    return name


def quote(text: str) -> str:
    """A double-quoted ``.proto`` string literal of ``text`` (UTF-8 kept, controls escaped)."""
    out = []
    for c in text:
        if c in ESCAPES:
            out.append(ESCAPES[c])
        elif c in "\\\"'":
            out.append("\\" + c)
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def json_name(name: str) -> str:
    """protoc's default ``json_name``: underscores dropped, the letter after one upper-cased."""
    out, upper = [], False
    for c in name:
        if c == "_":
            upper = True
        elif upper:
            out.append(c.upper())
            upper = False
        else:
            out.append(c)
    return "".join(out)


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def _scalar(fd: Any, value: Any) -> str:
    """One option value of field ``fd`` (a ``FieldDescriptor``) as ``.proto`` text."""
    if fd.type == FieldDescriptor.TYPE_ENUM:
        named = fd.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)
    if fd.type == FieldDescriptor.TYPE_STRING:
        return quote(value)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return '"' + str(text_format.CEscape(value, as_utf8=False)) + '"'
    if fd.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        body = text_format.MessageToString(value, as_one_line=True)
        return "{ " + body + " }" if body else "{}"
    return _number(value)


class Renderer:
    """Renders one file. ``pool_files`` are the transitive imports, needed for custom options."""

    def __init__(
        self, fdp: descriptor_pb2.FileDescriptorProto, pool_files: Sequence[descriptor_pb2.FileDescriptorProto]
    ) -> None:
        if fdp.syntax not in ("", "proto2", "proto3"):
            raise InvalidSchema(f"Invalid schema: normalize does not support syntax {fdp.syntax!r}")
        self.fdp = fdp
        self.proto3 = fdp.syntax == "proto3"
        self.pool_files = list(pool_files)
        self._pool: Any = None
        self.maps: dict[str, descriptor_pb2.DescriptorProto] = {}
        self.groups: set[str] = set()
        self._index(f".{fdp.package}" if fdp.package else "", list(fdp.message_type))

    def _index(self, prefix: str, msgs: list[descriptor_pb2.DescriptorProto]) -> None:
        for m in msgs:
            full = f"{prefix}.{m.name}"
            if m.options.map_entry:
                self.maps[full] = m
            for f in m.field:
                if f.type == T.TYPE_GROUP:
                    self.groups.add(f.type_name)
            self._index(full, list(m.nested_type))

    # --- options ----------------------------------------------------------------------------

    def _pool_class(self, options: Any) -> Any:
        """The options message class of a pool holding the imports, where extensions resolve."""
        if self._pool is None:
            pool = descriptor_pool.DescriptorPool()
            try:
                for f in [*self.pool_files, self.fdp]:
                    pool.Add(f)
            except (TypeError, ValueError, KeyError) as exc:
                raise InvalidSchema(f"Invalid schema: cannot resolve custom options: {exc}") from None
            self._pool = pool
        try:
            desc = self._pool.FindMessageTypeByName(options.DESCRIPTOR.full_name)
        except KeyError:
            raise InvalidSchema("Invalid schema: custom options without google/protobuf/descriptor.proto") from None
        return message_factory.GetMessageClass(desc)

    def options(self, options: Any, extra: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
        """``(name, value text)`` of every option set in ``options``, sorted by name."""
        pairs = list(extra)
        if options.ByteSize() == 0:
            return sorted(pairs)
        if _unknown(options):
            if not self.pool_files:
                raise InvalidSchema("Invalid schema: custom options need the files that define them")
            resolved = self._pool_class(options).FromString(options.SerializeToString())
            if _unknown(resolved):
                raise InvalidSchema("Invalid schema: an option's extension is not defined in the imports")
            options = resolved
        for fd, value in options.ListFields():
            if fd.name == "map_entry" or fd.name == "uninterpreted_option":
                continue
            name = f"(.{_dotted(fd.full_name)})" if fd.is_extension else fd.name
            values = list(value) if fd.is_repeated else [value]
            pairs += [(name, _scalar(fd, v)) for v in values]
        pairs.sort(key=lambda p: p[0].strip("(.)"))
        return pairs

    def statements(self, options: Any, indent: str) -> list[str]:
        return [f"{indent}option {n} = {v};" for n, v in self.options(options)]

    @staticmethod
    def brackets(pairs: list[tuple[str, str]]) -> str:
        return " [" + ", ".join(f"{n} = {v}" for n, v in pairs) + "]" if pairs else ""

    # --- file -------------------------------------------------------------------------------

    def render(self) -> str:
        f = self.fdp
        lines = [f'syntax = "{f.syntax or "proto2"}";']
        if f.package:
            lines.append(f"package {_dotted(f.package)};")
        public, weak = set(f.public_dependency), set(f.weak_dependency)
        plain = sorted({d for i, d in enumerate(f.dependency) if i not in public and i not in weak})
        pub = sorted({f.dependency[i] for i in public if 0 <= i < len(f.dependency)})
        wk = sorted({f.dependency[i] for i in weak if 0 <= i < len(f.dependency)})
        imports = [f"import {quote(d)};" for d in plain]
        imports += [f"import public {quote(d)};" for d in pub] + [f"import weak {quote(d)};" for d in wk]
        for block in (imports, self.statements(f.options, "")):
            if block:
                lines += ["", *block]
        prefix = f".{f.package}" if f.package else ""
        body: list[str] = []
        for m in f.message_type:
            body += self.message(m, f"{prefix}.{m.name}", "")
        for e in f.enum_type:
            body += self.enum(e, "")
        body += self.extends(list(f.extension), "")
        for s in f.service:
            body += self.service(s)
        if body:
            lines += ["", *body]
        return "\n".join(lines) + "\n"

    # --- messages ---------------------------------------------------------------------------

    def message(self, m: descriptor_pb2.DescriptorProto, full: str, indent: str, keyword: str = "message") -> list[str]:
        if full in self.maps or (keyword == "message" and full in self.groups):
            return []
        inner = indent + "  "
        out = [f"{indent}{keyword} {_ident(m.name)} {{"] if keyword == "message" else []
        out += self.reserved(list(m.reserved_range), list(m.reserved_name), inner, MAX_FIELD_NUMBER, exclusive=True)
        out += self.statements(m.options, inner)

        def real_oneof(fd: descriptor_pb2.FieldDescriptorProto) -> bool:
            return fd.HasField("oneof_index") and not fd.proto3_optional

        for fd in sorted((x for x in m.field if not real_oneof(x)), key=lambda x: x.number):
            out += self.field(fd, m, full, inner)
        oneofs: dict[int, list[descriptor_pb2.FieldDescriptorProto]] = {}
        for fd in m.field:
            if real_oneof(fd):
                oneofs.setdefault(fd.oneof_index, []).append(fd)
        for index, members in sorted(oneofs.items(), key=lambda kv: min(x.number for x in kv[1])):
            if not 0 <= index < len(m.oneof_decl):
                raise InvalidSchema(f"Invalid schema: oneof index {index} out of range in {full}")
            decl = m.oneof_decl[index]
            out.append(f"{inner}oneof {_ident(decl.name)} {{")
            out += self.statements(decl.options, inner + "  ")
            for fd in sorted(members, key=lambda x: x.number):
                out += self.field(fd, m, full, inner + "  ", in_oneof=True)
            out.append(f"{inner}}}")
        for r in sorted(m.extension_range, key=lambda x: x.start):
            end = "max" if r.end >= MAX_FIELD_NUMBER else str(r.end - 1)
            span = str(r.start) if r.end == r.start + 1 else f"{r.start} to {end}"
            out.append(f"{inner}extensions {span}{self.brackets(self.options(r.options))};")
        out += self.extends(list(m.extension), inner)
        for n in m.nested_type:
            out += self.message(n, f"{full}.{n.name}", inner)
        for e in m.enum_type:
            out += self.enum(e, inner)
        if keyword == "message":
            out.append(f"{indent}}}")
        return out

    def field(
        self,
        fd: descriptor_pb2.FieldDescriptorProto,
        owner: descriptor_pb2.DescriptorProto,
        full: str,
        indent: str,
        *,
        in_oneof: bool = False,
    ) -> list[str]:
        entry = self.maps.get(fd.type_name) if fd.type == T.TYPE_MESSAGE else None
        if entry is not None:
            if len(entry.field) != 2:
                raise InvalidSchema(f"Invalid schema: map entry {fd.type_name} needs a key and a value")
            key, value = sorted(entry.field, key=lambda x: x.number)
            kind, label = f"map<{self.type_of(key)}, {self.type_of(value)}>", ""
        else:
            kind = self.type_of(fd)
            if in_oneof:
                label = ""
            elif self.proto3:
                label = "repeated " if fd.label == T.LABEL_REPEATED else ("optional " if fd.proto3_optional else "")
            else:
                label = LABELS.get(fd.label, "optional") + " "
        extra: list[tuple[str, str]] = []
        if fd.HasField("default_value"):
            extra.append(("default", self.default(fd)))
        if fd.HasField("json_name") and fd.json_name != json_name(fd.name):
            extra.append(("json_name", quote(fd.json_name)))
        opts = self.brackets(self.options(fd.options, extra))
        if fd.type == T.TYPE_GROUP:
            group = next((n for n in owner.nested_type if f"{full}.{n.name}" == fd.type_name), None)
            if group is None:
                raise InvalidSchema(f"Invalid schema: group {fd.type_name} has no message")
            head = f"{indent}{label}group {_ident(group.name)} = {fd.number}{opts} {{"
            return [head, *self.message(group, fd.type_name, indent, keyword="group"), f"{indent}}}"]
        return [f"{indent}{label}{kind} {_ident(fd.name)} = {fd.number}{opts};"]

    def type_of(self, fd: descriptor_pb2.FieldDescriptorProto) -> str:
        if fd.type in SCALARS:
            return SCALARS[fd.type]
        if not fd.type_name:
            raise InvalidSchema(f"Invalid schema: field {fd.name} has no type")
        name = str(fd.type_name)
        return _dotted(name if name.startswith(".") else "." + name)

    def default(self, fd: descriptor_pb2.FieldDescriptorProto) -> str:
        if fd.type == T.TYPE_STRING:
            return quote(fd.default_value)
        if fd.type == T.TYPE_BYTES:
            return f'"{fd.default_value}"'  # already C-escaped in the descriptor
        return str(fd.default_value)

    def reserved(self, ranges: list[Any], names: list[str], indent: str, top: int, *, exclusive: bool) -> list[str]:
        out = []
        for r in sorted(ranges, key=lambda x: (x.start, x.end)):
            last = r.end - 1 if exclusive else r.end
            if last <= r.start:
                out.append(f"{indent}reserved {r.start};")
            else:
                end = "max" if (r.end >= top) else str(last)
                out.append(f"{indent}reserved {r.start} to {end};")
        out += [f"{indent}reserved {quote(n)};" for n in sorted(set(names))]
        return out

    def extends(self, fields: list[descriptor_pb2.FieldDescriptorProto], indent: str) -> list[str]:
        out: list[str] = []
        by_extendee: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
        for fd in fields:
            by_extendee.setdefault(fd.extendee, []).append(fd)
        for extendee in sorted(by_extendee):
            target = _dotted(extendee if extendee.startswith(".") else "." + extendee)
            out.append(f"{indent}extend {target} {{")
            for fd in sorted(by_extendee[extendee], key=lambda x: x.number):
                if fd.type == T.TYPE_GROUP:
                    raise InvalidSchema("Invalid schema: normalize does not support group extensions")
                out += self.field(fd, descriptor_pb2.DescriptorProto(), "", indent + "  ")
            out.append(f"{indent}}}")
        return out

    # --- enums and services -----------------------------------------------------------------

    def enum(self, e: descriptor_pb2.EnumDescriptorProto, indent: str) -> list[str]:
        inner = indent + "  "
        out = [f"{indent}enum {_ident(e.name)} {{", *self.statements(e.options, inner)]
        out += self.reserved(list(e.reserved_range), list(e.reserved_name), inner, MAX_ENUM_NUMBER, exclusive=False)
        zero_first = self.proto3  # protoc wants a proto3 enum's first value to be zero
        for v in sorted(e.value, key=lambda v: (0 if zero_first and v.number == 0 else 1, v.number, v.name)):
            out.append(f"{inner}{_ident(v.name)} = {v.number}{self.brackets(self.options(v.options))};")
        return [*out, f"{indent}}}"]

    def service(self, s: descriptor_pb2.ServiceDescriptorProto) -> list[str]:
        out = [f"service {_ident(s.name)} {{", *self.statements(s.options, "  ")]
        for rpc in s.method:
            request = ("stream " if rpc.client_streaming else "") + self._qualified(rpc.input_type)
            response = ("stream " if rpc.server_streaming else "") + self._qualified(rpc.output_type)
            head = f"  rpc {_ident(rpc.name)} ({request}) returns ({response})"
            options = self.statements(rpc.options, "    ")
            out += [f"{head} {{", *options, "  }"] if options else [f"{head};"]
        return [*out, "}"]

    @staticmethod
    def _qualified(name: str) -> str:
        return _dotted(name if name.startswith(".") else "." + name)


def _options_of(fdp: descriptor_pb2.FileDescriptorProto) -> list[Any]:
    out: list[Any] = [fdp.options]

    def enum(e: descriptor_pb2.EnumDescriptorProto) -> None:
        out.append(e.options)
        out.extend(v.options for v in e.value)

    def message(m: descriptor_pb2.DescriptorProto) -> None:
        out.append(m.options)
        out.extend(f.options for f in [*m.field, *m.extension])
        out.extend(o.options for o in m.oneof_decl)
        out.extend(r.options for r in m.extension_range)
        for n in m.nested_type:
            message(n)
        for e in m.enum_type:
            enum(e)

    for m in fdp.message_type:
        message(m)
    for e in fdp.enum_type:
        enum(e)
    out.extend(f.options for f in fdp.extension)
    for s in fdp.service:
        out.append(s.options)
        out.extend(r.options for r in s.method)
    return out


def has_unknown_options(fdp: descriptor_pb2.FileDescriptorProto) -> bool:
    """Whether any options message in ``fdp`` holds fields descriptor.proto does not define
    (custom options, whose names only the files defining them give)."""
    return any(options.ByteSize() and _unknown(options) for options in _options_of(fdp))


def _unknown(options: Any) -> bool:
    known = type(options)()
    known.CopyFrom(options)
    known.DiscardUnknownFields()
    return bool(known.ByteSize() != options.ByteSize())


def render(
    fdp: descriptor_pb2.FileDescriptorProto, pool_files: Sequence[descriptor_pb2.FileDescriptorProto] = ()
) -> str:
    """The normalized text of ``fdp`` (see the module docstring); InvalidSchema when it cannot be."""
    return Renderer(fdp, pool_files).render()
