"""Bounded reading: every length and count in a message body checked against the bytes left.

The codec's native reader (kio) sizes an array's storage from the count it reads off the wire
before it reads any element, so a 53-byte request declaring two billion elements would ask for
16 GB. This module walks a body first, with nothing allocated, and proves that every length fits
in what actually arrived; only a body that passes reaches the native reader. These are the checks
of Kafka's generated readers and ``ByteBufferAccessor``, with Kafka's words:

- array / compact array count ``n`` (``-1`` / ``0`` = null): ``n`` must not exceed the bytes left
  after the count, else ``Tried to allocate a collection of size n, but there are only m bytes
  remaining.`` (an element takes at least one byte); arrays of fixed-size elements are checked
  against ``n * size`` and skipped without a per-element walk;
- string (i16 length, or uvarint length+1 when flexible), bytes and records (i32 length, or
  uvarint length+1): the length must fit in the bytes left; a negative length other than the
  null marker is refused;
- null (-1, or 0 when compact) only where the field is nullable in that version, else
  ``non-nullable field X was serialized as null`` (kio's array reader would hand a handler None);
- nullable structs (KIP-893): the i8 marker must be -1 or 1;
- tagged fields (flexible versions): the uvarint count, each field's tag and size, and the size
  must fit; a known tag's value is walked inside its own size and must fill it exactly;
- varints are at most 5 bytes (32 bits), as Kafka's ``ByteUtils.readUnsignedVarint``.

The walk neither decodes nor copies: strings are not checked for UTF-8 here (the decoder does
that) and unknown tags are skipped. Its cost grows with the fields walked, not with the payload:
a record set is one length check.

How: ``body_checker(cls)`` generates, once per message class, one flat Python function
``check(buf, pos, end) -> pos`` from the class's fields (nested structs and array elements
inlined, fixed-size runs merged into one bounds check, the common single-byte varint and empty
tag section read inline); ``checker_source(cls)`` returns its text for reading. It returns where
the body ends or raises :class:`~odradek.errors.InvalidRequestError`. Generated functions and
caches are immutable once built: safe from any thread.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

from odradek.errors import InvalidRequestError

Check = Callable[[Any, int, int], int]
"""``check(buf, pos, end) -> new_pos``: ``buf`` supports indexing and ``struct.unpack_from``."""

_FIXED_SIZES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE_TYPES = {"string", "bytes", "records"}


# --- errors and the slow paths the generated code calls ----------------------------------------


def collection_error(size: int, remaining: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"Tried to allocate a collection of size {size}, but there are only {remaining} bytes remaining."
    )


def _short(what: str, need: int, remaining: int) -> InvalidRequestError:
    return InvalidRequestError(f"{what} needs {need} bytes, but there are only {remaining} bytes remaining.")


def _length_error(kind: str, length: int, remaining: int) -> InvalidRequestError:
    if length < 0:
        return InvalidRequestError(f"invalid {kind} length {length}")
    return InvalidRequestError(f"Error reading {kind} of length {length}, only {remaining} bytes available")


def _null_error(name: str) -> InvalidRequestError:
    return InvalidRequestError(f"non-nullable field {name} was serialized as null")


def read_uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes at ``pos`` (before ``end``): (value, new pos)."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise InvalidRequestError("varint runs past the end of the message")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise InvalidRequestError("varint is longer than 5 bytes")


def _tag_section(known: dict[int, Check], buf: Any, pos: int, end: int) -> int:
    """A tagged-field section that is not the single 0 byte (the generated code inlines that)."""
    count, pos = read_uvarint(buf, pos, end)
    if count > end - pos:
        raise collection_error(count, end - pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise InvalidRequestError(
                f"tagged field {tag} of size {size}, but there are only {end - pos} bytes remaining"
            )
        field_end = pos + size
        inner = known.get(tag)
        if inner is not None and inner(buf, pos, field_end) != field_end:
            raise InvalidRequestError(f"tagged field {tag} does not fill its declared size {size}")
        pos = field_end
    return pos


_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


# --- code generation --------------------------------------------------------------------------


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


class _Writer:
    """Accumulates the generated function's lines and the objects it refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "_short": _short,
            "_length_error": _length_error,
            "_null_error": _null_error,
            "_collection_error": collection_error,
            "_uvarint": read_uvarint,
            "_tag_section": _tag_section,
            "_I16": _I16,
            "_I32": _I32,
        }
        self._names = itertools.count()
        self.byte_available = False
        """The last line emitted proved ``pos < end`` (a fixed run followed by a field)."""

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)
        self.byte_available = False

    def need_byte(self, indent: int, what: str) -> None:
        """Ensure ``pos < end``, unless the previous check already proved it."""
        if not self.byte_available:
            self.emit(indent, f"if pos >= end: raise _short({what!r}, 1, 0)")

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    def bind(self, prefix: str, value: Any) -> str:
        name = self.fresh(prefix)
        self.env[name] = value
        return name

    def fixed(self, indent: int, size: int, what: str, more: bool = False) -> None:
        """Skip ``size`` bytes; with ``more``, also prove one byte follows (the next field's)."""
        self.emit(indent, f"pos += {size}")
        if more:
            self.emit(indent, f"if pos >= end: raise _short({what!r}, {size + 1}, end - pos + {size})")
            self.byte_available = True
        else:
            self.emit(indent, f"if pos > end: raise _short({what!r}, {size}, end - pos + {size})")

    def uvarint(self, indent: int, target: str) -> None:
        """``target = uvarint at pos``; one- and two-byte values (below 16384) read inline."""
        self.need_byte(indent, "varint")
        self.emit(indent, f"{target} = buf[pos]")
        self.emit(indent, f"if {target} < 128: pos += 1")
        self.emit(indent, "elif pos + 1 < end and buf[pos + 1] < 128:")
        self.emit(indent + 1, f"{target} = ({target} & 127) | (buf[pos + 1] << 7)")
        self.emit(indent + 1, "pos += 2")
        self.emit(indent, f"else: {target}, pos = _uvarint(buf, pos, end)")


def _fixed_size(cls: type, flexible: bool) -> int | None:
    """The struct's size when every field has a fixed size and there is no tag section."""
    if flexible:
        return None
    total = 0
    for field in dataclasses.fields(cls):
        tp, _ = _strip_optional(field.type)
        if typing.get_origin(tp) is tuple:
            return None
        if dataclasses.is_dataclass(tp):
            inner = _fixed_size(tp, flexible)  # type: ignore[arg-type]
            if inner is None or _strip_optional(field.type)[1]:
                return None
            total += inner
            continue
        size = _FIXED_SIZES.get(field.metadata.get("kafka_type", ""))
        if size is None:
            return None
        total += size
    return total


def _gen_struct(w: _Writer, cls: type, flexible: bool, indent: int) -> None:
    """Lines that walk one struct at ``pos``; fixed-size runs become one bounds check."""
    pending = 0
    tagged: dict[int, Check] = {}
    for field in dataclasses.fields(cls):
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = _compile_field(field, flexible)
            continue
        size = _field_fixed_size(field, flexible)
        if size is not None:
            pending += size
            continue
        if pending:
            w.fixed(indent, pending, f"{cls.__name__} fields", more=True)
            pending = 0
        _gen_field(w, field, flexible, indent, is_tag=False)
    if pending:
        w.fixed(indent, pending, f"{cls.__name__} fields", more=flexible)
    if flexible:
        known = w.bind("known", tagged)
        w.need_byte(indent, "tagged fields")
        w.emit(indent, "if buf[pos] == 0: pos += 1")
        w.emit(indent, f"else: pos = _tag_section({known}, buf, pos, end)")


def _field_fixed_size(field: dataclasses.Field[Any], flexible: bool) -> int | None:
    tp, optional = _strip_optional(field.type)
    if typing.get_origin(tp) is tuple:
        return None
    if dataclasses.is_dataclass(tp):
        return None if optional else _fixed_size(tp, flexible)  # type: ignore[arg-type]
    return _FIXED_SIZES.get(field.metadata.get("kafka_type", ""))


def _gen_field(w: _Writer, field: dataclasses.Field[Any], flexible: bool, indent: int, is_tag: bool) -> None:
    tp, optional = _strip_optional(field.type)
    if typing.get_origin(tp) is tuple:
        element, _ = _strip_optional(typing.get_args(tp)[0])
        _gen_array(w, field, element, flexible, indent, optional)
    elif dataclasses.is_dataclass(tp):
        if optional and not is_tag:  # KIP-893 marker: -1 null, 1 present
            marker = w.fresh("m")
            w.emit(indent, "if pos >= end: raise _short('struct marker', 1, 0)")
            w.emit(indent, f"{marker} = buf[pos]")
            w.emit(indent, "pos += 1")
            w.emit(indent, f"if {marker} == 1:")
            w.emit(indent + 1, "pass")
            _gen_struct(w, tp, flexible, indent + 1)  # type: ignore[arg-type]
            w.emit(indent, f"elif {marker} != 255: raise _length_error('struct marker', -{marker}, 0)")
        else:
            _gen_struct(w, tp, flexible, indent)  # type: ignore[arg-type]
    else:
        _gen_primitive(w, field.metadata.get("kafka_type", ""), flexible, indent, field.name, optional)


def _gen_primitive(w: _Writer, kafka_type: str, flexible: bool, indent: int, name: str, nullable: bool) -> None:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        w.fixed(indent, size, name)
        return
    if kafka_type not in _VARIABLE_TYPES:
        raise TypeError(f"no bounded reader for field {name} of kafka type {kafka_type!r}")
    n = w.fresh("n")
    kind = "string" if kafka_type == "string" else "bytes"
    if flexible:
        w.uvarint(indent, n)
        w.emit(indent, f"if {n} > 1:")
        w.emit(indent + 1, f"if {n} - 1 > end - pos: raise _length_error({kind!r}, {n} - 1, end - pos)")
        w.emit(indent + 1, f"pos += {n} - 1")
        if not nullable:
            w.emit(indent, f"elif {n} == 0: raise _null_error({name!r})")
        return
    width, reader = (2, "_I16") if kind == "string" else (4, "_I32")
    w.emit(indent, f"if pos + {width} > end: raise _short({name + ' length'!r}, {width}, end - pos)")
    w.emit(indent, f"({n},) = {reader}(buf, pos)")
    w.emit(indent, f"pos += {width}")
    w.emit(indent, f"if {n} > 0:")
    w.emit(indent + 1, f"if {n} > end - pos: raise _length_error({kind!r}, {n}, end - pos)")
    w.emit(indent + 1, f"pos += {n}")
    if nullable:
        w.emit(indent, f"elif {n} < -1: raise _length_error({kind!r}, {n}, 0)")
    else:
        w.emit(indent, f"elif {n} == -1: raise _null_error({name!r})")
        w.emit(indent, f"elif {n} < -1: raise _length_error({kind!r}, {n}, 0)")


def _gen_array(
    w: _Writer, field: dataclasses.Field[Any], element: Any, flexible: bool, indent: int, nullable: bool
) -> None:
    count = w.fresh("c")
    if flexible:
        w.uvarint(indent, count)
        w.emit(indent, f"{count} -= 1")
    else:
        w.emit(indent, f"if pos + 4 > end: raise _short({field.name + ' length'!r}, 4, end - pos)")
        w.emit(indent, f"({count},) = _I32(buf, pos)")
        w.emit(indent, "pos += 4")
        w.emit(indent, f"if {count} < -1: raise _length_error('array', {count}, 0)")
    if not nullable:
        w.emit(indent, f"if {count} == -1: raise _null_error({field.name!r})")
    if dataclasses.is_dataclass(element):
        element_size = _fixed_size(element, flexible)  # type: ignore[arg-type]
    else:
        element_size = _FIXED_SIZES.get(field.metadata.get("kafka_type", ""))
    w.emit(indent, f"if {count} > 0:")
    w.emit(indent + 1, f"if {count} > end - pos: raise _collection_error({count}, end - pos)")
    if element_size is not None:
        w.emit(indent + 1, f"if {count} * {element_size} > end - pos: raise _collection_error({count}, end - pos)")
        w.emit(indent + 1, f"pos += {count} * {element_size}")
        return
    w.emit(indent + 1, f"for _ in range({count}):")
    if dataclasses.is_dataclass(element):
        _gen_struct(w, element, flexible, indent + 2)  # type: ignore[arg-type]
    else:
        _gen_primitive(w, field.metadata.get("kafka_type", ""), flexible, indent + 2, field.name, False)


def _finish(w: _Writer, name: str) -> Check:
    source = f"def {name}(buf, pos, end):\n" + "\n".join(w.lines) + "\n    return pos\n"
    namespace = dict(w.env)
    exec(compile(source, f"<bounded {name}>", "exec"), namespace)
    check: Check = namespace[name]
    check.__source__ = source  # type: ignore[attr-defined]
    return check


def _compile_field(field: dataclasses.Field[Any], flexible: bool) -> Check:
    """A standalone check for one tagged field's value."""
    w = _Writer()
    _gen_field(w, field, flexible, 1, is_tag=True)
    return _finish(w, f"check_tag_{field.name}")


@functools.cache
def body_checker(cls: type) -> Check:
    """The bounded walk of a kio message class (request, response or our own additions)."""
    w = _Writer()
    _gen_struct(w, cls, bool(getattr(cls, "__flexible__", False)), 1)
    return _finish(w, f"check_{cls.__name__}")


def checker_source(cls: type) -> str:
    """The generated source of ``body_checker(cls)`` (for reading and debugging)."""
    return str(body_checker(cls).__source__)  # type: ignore[attr-defined]
