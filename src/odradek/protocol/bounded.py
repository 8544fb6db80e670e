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
- varints are at most 5 bytes (32 bits), as Kafka's ``ByteUtils.readUnsignedVarint``;
- optionally, the array entries of the whole body (every count read, nested arrays included):
  more than the caller's ``limit`` raise :class:`TooManyEntries` before anything is built (the
  broker passes ``odradek.request.max.entries``; the walk may stop early where the native reader
  reads the rest, so the decoded request is counted again).

The walk neither decodes nor copies: strings are not checked for UTF-8 here (the decoder does
that) and unknown tags are skipped. Its cost grows with the fields walked, not with the payload:
a record set is one length check.

How: ``body_checker(cls)`` generates, once per message class, one flat Python function
``check(buf, pos, end) -> pos`` from the class's fields (nested structs and array elements
inlined). Fixed-size fields cost no line: they grow a constant offset folded into the next read
(``buf[pos + 6]``). Reads past the buffer raise IndexError/``struct.error``, turned into
InvalidRequestError, so only lengths and counts are compared with the bytes left, explicitly and
with Kafka's messages. Varints below 2**21 and empty tag sections are read inline; an array of
fixed-size flexible elements whose tag sections are all empty (Fetch partitions) is one strided
check at C speed. ``checker_source(cls)`` returns the text for reading. The function returns
where the body ends or raises :class:`~odradek.errors.InvalidRequestError`; ``end`` below
``len(buf)`` is honoured through a view. Generated functions and caches are immutable once
built: safe from any thread.
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

Check = Callable[..., int]
"""``check(buf, pos, end, limit=NO_LIMIT) -> new_pos``: ``buf`` supports indexing and
``struct.unpack_from``; more than ``limit`` array entries walked in all (nested ones included,
counted as their counts are read) raise :class:`TooManyEntries`."""

NO_LIMIT = 1 << 62

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


def _truncated(pos: int, end: int) -> InvalidRequestError:
    return InvalidRequestError(f"the message ends at byte {end}, before its fields do (walked to byte {pos})")


def _length_error(kind: str, length: int, remaining: int) -> InvalidRequestError:
    if length < 0:
        return InvalidRequestError(f"invalid {kind} length {length}")
    return InvalidRequestError(f"Error reading {kind} of length {length}, only {remaining} bytes available")


class TooManyEntries(InvalidRequestError):
    """A body whose arrays hold more entries in all than the walk's ``limit``: refused before the
    native reader builds them (a 20 MB request of a million one-byte entries would take seconds)."""


def _too_many(entries: int, limit: int) -> TooManyEntries:
    return TooManyEntries(f"more than {limit} array entries (at least {entries})")


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


def write_uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint: 7 bits a byte, low bits first."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag_section(known: dict[int, Check], buf: Any, pos: int, end: int) -> int:
    """Skip a tagged-field section at ``pos``, walking the values of the ``known`` tags; returns
    where it ends. The generated code inlines the usual single 0 byte and calls this otherwise;
    the codec uses it for request and response headers."""
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
    """Accumulates the generated function's lines and the objects it refers to.

    ``off`` is a run of fixed-size fields walked but not yet added to ``pos``: reads use
    ``buf[pos + off]`` and the next variable-size field adds it with its own size, so a fixed run
    costs no line of its own. Reads past the buffer raise ``IndexError`` or ``struct.error``,
    which the generated function turns into InvalidRequestError; lengths and counts are compared
    with the bytes left explicitly, for Kafka's messages.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "_length_error": _length_error,
            "_null_error": _null_error,
            "_collection_error": collection_error,
            "_too_many": _too_many,
            "_truncated": _truncated,
            "_uvarint": read_uvarint,
            "_tag_section": tag_section,
            "_zeros": _zeros,
            "_I16": _I16,
            "_I32": _I32,
            "_struct_error": struct.error,
            "_NO_LIMIT": NO_LIMIT,
        }
        self._names = itertools.count()
        self.off = 0
        self.loops: list[tuple[str, str]] = []
        """(index, count) of the enclosing element loops, outermost first."""

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def at(self, extra: int = 0) -> str:
        """The expression for ``pos`` plus the pending fixed run plus ``extra``."""
        total = self.off + extra
        return f"pos + {total}" if total else "pos"

    def advance(self, extra: int) -> str:
        """The statement that moves ``pos`` past the pending run and ``extra`` bytes."""
        total = self.off + extra
        self.off = 0
        return f"pos += {total}" if total else "pass"

    def flush(self, indent: int) -> None:
        if self.off:
            self.emit(indent, self.advance(0))

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    def bind(self, prefix: str, value: Any) -> str:
        name = self.fresh(prefix)
        self.env[name] = value
        return name

    def uvarint(self, indent: int, target: str) -> None:
        """``target = uvarint at pos (+ off)``; values below 2**21 (three bytes: a record set up to
        2 MiB) read inline."""
        first, second, third = self.at(), self.at(1), self.at(2)
        start = self.off
        self.emit(indent, f"{target} = buf[{first}]")
        self.emit(indent, f"if {target} < 128: pos += {start + 1}")
        self.emit(indent, f"elif buf[{second}] < 128:")
        self.emit(indent + 1, f"{target} = ({target} & 127) | (buf[{second}] << 7)")
        self.emit(indent + 1, f"pos += {start + 2}")
        self.emit(indent, f"elif buf[{third}] < 128:")
        self.emit(indent + 1, f"{target} = ({target} & 127) | ((buf[{second}] & 127) << 7) | (buf[{third}] << 14)")
        self.emit(indent + 1, f"pos += {start + 3}")
        self.emit(indent, f"else: {target}, pos = _uvarint(buf, {first}, end)")
        self.off = 0

    def tag_section(self, indent: int, known: dict[int, Check]) -> None:
        name = self.bind("known", known)
        self.emit(indent, f"if buf[{self.at()}]: pos = _tag_section({name}, buf, {self.at()}, end)")
        self.emit(indent, f"else: {self.advance(1)}")


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


def _tagged_stride(cls: type) -> int | None:
    """Bytes per element of a flexible struct of fixed-size fields whose tag section is empty."""
    total = 0
    for field in dataclasses.fields(cls):
        if field.metadata.get("tag") is not None:
            continue
        size = _field_fixed_size(field, True)
        if size is None:
            return None
        total += size
    return total + 1


def _zeros(buf: Any, first: int, count: int, stride: int) -> bool:
    """Whether the ``count`` bytes at ``first``, ``first + stride``, ... are all 0."""
    return bytes(buf[first : first + count * stride : stride]).count(0) == count


def _walk_free(field: dataclasses.Field[Any]) -> bool:
    """Whether the native reader may read this field unwalked: no array (whose storage it would
    size from the wire count) and no null where the field is not nullable, at any depth, tagged
    fields included. Fixed-size fields and nullable strings, bytes and records qualify: the
    native reader checks their lengths against the bytes left before it copies (a unit test
    holds it to that)."""
    tp, optional = _strip_optional(field.type)
    if typing.get_origin(tp) is tuple:
        return False
    if dataclasses.is_dataclass(tp):
        return not optional and all(_walk_free(f) for f in dataclasses.fields(tp))  # type: ignore[arg-type]
    kafka_type = field.metadata.get("kafka_type", "")
    return kafka_type in _FIXED_SIZES or (kafka_type in _VARIABLE_TYPES and optional)


def _gen_struct(w: _Writer, cls: type, flexible: bool, indent: int, tail_free: bool = False) -> None:
    """Lines that walk one struct at ``pos + off``; fixed-size fields only grow ``off``.

    ``tail_free``: everything after this struct is walk-free when every enclosing element loop
    is in its last iteration (see :func:`_gen_array`)."""
    tagged: dict[int, Check] = {}
    fields = dataclasses.fields(cls)
    tags_free = all(_walk_free(f) for f in fields if f.metadata.get("tag") is not None)
    for j, field in enumerate(fields):
        tag = field.metadata.get("tag")
        if tag is not None:
            tagged[int(tag)] = _compile_field(field, flexible)
            continue
        size = _field_fixed_size(field, flexible)
        if size is not None:
            w.off += size
            continue
        rest_free = tail_free and tags_free and all(_walk_free(f) for f in fields[j + 1 :])
        _gen_field(w, field, flexible, indent, is_tag=False, tail_free=rest_free)
    if flexible:
        w.tag_section(indent, tagged)


def _field_fixed_size(field: dataclasses.Field[Any], flexible: bool) -> int | None:
    tp, optional = _strip_optional(field.type)
    if typing.get_origin(tp) is tuple:
        return None
    if dataclasses.is_dataclass(tp):
        return None if optional else _fixed_size(tp, flexible)  # type: ignore[arg-type]
    return _FIXED_SIZES.get(field.metadata.get("kafka_type", ""))


def _gen_field(
    w: _Writer, field: dataclasses.Field[Any], flexible: bool, indent: int, is_tag: bool, tail_free: bool = False
) -> None:
    tp, optional = _strip_optional(field.type)
    if typing.get_origin(tp) is tuple:
        element, _ = _strip_optional(typing.get_args(tp)[0])
        _gen_array(w, field, element, flexible, indent, optional, tail_free)
    elif dataclasses.is_dataclass(tp):
        if optional and not is_tag:  # KIP-893 marker: -1 null, 1 present
            marker = w.fresh("m")
            w.emit(indent, f"{marker} = buf[{w.at()}]")
            w.emit(indent, w.advance(1))
            w.emit(indent, f"if {marker} == 1:")
            w.emit(indent + 1, "pass")
            _gen_struct(w, tp, flexible, indent + 1)  # type: ignore[arg-type]
            w.flush(indent + 1)
            w.emit(indent, f"elif {marker} != 255: raise _length_error('struct marker', -{marker}, 0)")
        else:
            _gen_struct(w, tp, flexible, indent, tail_free)  # type: ignore[arg-type]
    else:
        _gen_primitive(w, field.metadata.get("kafka_type", ""), flexible, indent, field.name, optional)


def _gen_primitive(w: _Writer, kafka_type: str, flexible: bool, indent: int, name: str, nullable: bool) -> None:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        w.off += size
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
    w.emit(indent, f"({n},) = {reader}(buf, {w.at()})")
    w.emit(indent, w.advance(width))
    w.emit(indent, f"if {n} > 0:")
    w.emit(indent + 1, f"if {n} > end - pos: raise _length_error({kind!r}, {n}, end - pos)")
    w.emit(indent + 1, f"pos += {n}")
    if nullable:
        w.emit(indent, f"elif {n} < -1: raise _length_error({kind!r}, {n}, 0)")
    else:
        w.emit(indent, f"elif {n} == -1: raise _null_error({name!r})")
        w.emit(indent, f"elif {n} < -1: raise _length_error({kind!r}, {n}, 0)")


def _gen_array(
    w: _Writer,
    field: dataclasses.Field[Any],
    element: Any,
    flexible: bool,
    indent: int,
    nullable: bool,
    tail_free: bool = False,
) -> None:
    """An array: its count checked against the bytes left, then its elements walked, unless
    they are fixed-size (one multiplication), flexible fixed-size with empty tag sections (one
    strided check), or walk-free with nothing after them that needs the walk: then, when every
    enclosing loop is in its last iteration, the walk ends there (returns -1) and the native
    reader reads the rest (a single-topic Produce request is walked up to its partition count)."""
    count = w.fresh("c")
    if flexible:
        w.uvarint(indent, count)
        w.emit(indent, f"{count} -= 1")
    else:
        w.emit(indent, f"({count},) = _I32(buf, {w.at()})")
        w.emit(indent, w.advance(4))
        w.emit(indent, f"if {count} < -1: raise _length_error('array', {count}, 0)")
    if not nullable:
        w.emit(indent, f"if {count} == -1: raise _null_error({field.name!r})")
    if dataclasses.is_dataclass(element):
        element_size = _fixed_size(element, flexible)  # type: ignore[arg-type]
    else:
        element_size = _FIXED_SIZES.get(field.metadata.get("kafka_type", ""))
    w.emit(indent, f"if {count} > 0:")
    w.emit(indent + 1, f"if {count} > end - pos: raise _collection_error({count}, end - pos)")
    w.emit(indent + 1, f"entries += {count}")
    w.emit(indent + 1, "if entries > limit: raise _too_many(entries, limit)")
    if element_size is not None:
        w.emit(indent + 1, f"if {count} * {element_size} > end - pos: raise _collection_error({count}, end - pos)")
        w.emit(indent + 1, f"pos += {count} * {element_size}")
        return
    stride = _tagged_stride(element) if flexible and dataclasses.is_dataclass(element) else None  # type: ignore[arg-type]
    body = indent + 1
    if stride is not None:  # fixed fields + tag section: all sections empty is one check at C speed
        # (from 8 elements: below that the loop costs less than the call)
        check = f"_zeros(buf, pos + {stride - 1}, {count}, {stride})"
        w.emit(body, f"if {count} >= 8 and {count} * {stride} <= end - pos and {check}:")
        w.emit(body + 1, f"pos += {count} * {stride}")
        w.emit(body, "else:")
        body += 1
    if dataclasses.is_dataclass(element):
        elements_free = all(_walk_free(f) for f in dataclasses.fields(element))  # type: ignore[arg-type]
    else:  # array elements are never null: only fixed-size ones need no walk
        elements_free = field.metadata.get("kafka_type", "") in _FIXED_SIZES
    if tail_free and elements_free:
        last = " and ".join(f"{i} == {c} - 1" for i, c in w.loops) or "True"
        w.emit(body, f"if {last}: return -1")
    index = w.fresh("i")
    w.emit(body, f"for {index} in range({count}):")
    w.loops.append((index, count))
    if dataclasses.is_dataclass(element):
        _gen_struct(w, element, flexible, body + 1, tail_free)  # type: ignore[arg-type]
    else:
        _gen_primitive(w, field.metadata.get("kafka_type", ""), flexible, body + 1, field.name, False)
    w.loops.pop()
    w.flush(body + 1)


def _finish(w: _Writer, name: str) -> Check:
    w.flush(2)
    body = "\n".join(w.lines)
    source = (
        f"def {name}(buf, pos, end, limit=_NO_LIMIT):\n"
        "    if end != len(buf): buf = memoryview(buf)[:end]\n"
        "    entries = 0\n"
        "    try:\n"
        f"{body}\n"
        "        pass\n"
        "    except (IndexError, _struct_error):\n"
        "        raise _truncated(pos, end) from None\n"
        "    if pos > end: raise _truncated(pos, end)\n"
        "    return pos\n"
    )
    namespace = dict(w.env)
    exec(compile(source, f"<bounded {name}>", "exec"), namespace)
    check: Check = namespace[name]
    check.__source__ = source  # type: ignore[attr-defined]
    return check


def _compile_field(field: dataclasses.Field[Any], flexible: bool) -> Check:
    """A standalone check for one tagged field's value."""
    w = _Writer()
    _gen_field(w, field, flexible, 2, is_tag=True)
    return _finish(w, f"check_tag_{field.name}")


@functools.cache
def body_checker(cls: type) -> Check:
    """The bounded walk of a kio message class (request, response or our own additions)."""
    w = _Writer()
    _gen_struct(w, cls, bool(getattr(cls, "__flexible__", False)), 2, tail_free=True)
    return _finish(w, f"check_{cls.__name__}")


def checker_source(cls: type) -> str:
    """The generated source of ``body_checker(cls)`` (for reading and debugging)."""
    return str(body_checker(cls).__source__)  # type: ignore[attr-defined]
