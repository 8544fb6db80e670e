"""Tagged fields this version does not know are dropped, as Kafka drops them (KIP-482).

A flexible message may carry tagged fields a later Kafka version added; Kafka's readers skip tags
they do not know, so a newer client keeps working with an older broker. kio's native reader
refuses them (``Unknown tagged field tag: N``) instead. When it does, the codec calls
:func:`strip_unknown_tags` and decodes again: the message is copied field by field with each tag
section rewritten to hold only the tags the message class declares (known tags' values are copied
the same way, so an unknown tag nested in a known one goes too). Only that rare case pays for the
copy; the hot path is untouched.

Formats walked (flexible versions only, the only ones with tags): fixed-size fields, compact
strings/bytes/records (unsigned varint length + 1, 0 = null), compact arrays (varint count + 1),
KIP-893 nullable structs (marker byte -1/1), nested structs, and tag sections (varint count, then
per field varint tag, varint size, value). Every length is checked against the bytes left:
InvalidRequestError otherwise. Pure functions: any thread.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from odradek.errors import InvalidRequestError
from odradek.protocol.bounded import _FIXED_SIZES, _strip_optional, collection_error, read_uvarint
from odradek.protocol.bounded import write_uvarint as _uvarint

__all__ = ["strip_unknown_tags"]


class _Copier:
    def __init__(self, buf: Any, end: int) -> None:
        self.buf = buf
        self.end = end
        self.dropped = 0

    def take(self, pos: int, size: int, out: bytearray) -> int:
        if size < 0 or size > self.end - pos:
            raise InvalidRequestError(f"a field of {size} bytes, but there are only {self.end - pos} bytes remaining")
        out += self.buf[pos : pos + size]
        return pos + size

    def varint(self, pos: int, out: bytearray) -> tuple[int, int]:
        value, new = read_uvarint(self.buf, pos, self.end)
        out += self.buf[pos:new]
        return value, new

    def struct(self, cls: type, pos: int, out: bytearray) -> int:
        known: dict[int, dataclasses.Field[Any]] = {}
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            tag = field.metadata.get("tag")
            if tag is not None:
                known[int(tag)] = field
            else:
                pos = self.field(field, pos, out, in_tag=False)
        return self.tags(known, pos, out)

    def field(self, field: dataclasses.Field[Any], pos: int, out: bytearray, in_tag: bool) -> int:
        tp, optional = _strip_optional(field.type)
        if typing.get_origin(tp) is tuple:
            element, _ = _strip_optional(typing.get_args(tp)[0])
            count, pos = self.varint(pos, out)
            if count - 1 > self.end - pos:
                raise collection_error(count - 1, self.end - pos)
            for _ in range(max(count - 1, 0)):
                if dataclasses.is_dataclass(element):
                    pos = self.struct(element, pos, out)  # type: ignore[arg-type]
                else:
                    pos = self.primitive(field.metadata.get("kafka_type", ""), pos, out)
            return pos
        if dataclasses.is_dataclass(tp):
            if optional and not in_tag:
                marker = self.buf[pos] if pos < self.end else None
                pos = self.take(pos, 1, out)
                if marker != 1:
                    return pos
            return self.struct(tp, pos, out)  # type: ignore[arg-type]
        return self.primitive(field.metadata.get("kafka_type", ""), pos, out)

    def primitive(self, kafka_type: str, pos: int, out: bytearray) -> int:
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            return self.take(pos, size, out)
        length, pos = self.varint(pos, out)  # compact string / bytes / records: length + 1
        return self.take(pos, max(length - 1, 0), out)

    def tags(self, known: dict[int, dataclasses.Field[Any]], pos: int, out: bytearray) -> int:
        count, pos = read_uvarint(self.buf, pos, self.end)
        kept: list[bytes] = []
        for _ in range(count):
            tag, pos = read_uvarint(self.buf, pos, self.end)
            size, pos = read_uvarint(self.buf, pos, self.end)
            if size > self.end - pos:
                raise InvalidRequestError(f"tagged field {tag} of size {size}, but there are only {self.end - pos}")
            field = known.get(tag)
            if field is None:
                self.dropped += 1
            else:
                value = bytearray()
                inner = _Copier(self.buf, pos + size)
                if inner.field(field, pos, value, in_tag=True) != pos + size:
                    raise InvalidRequestError(f"tagged field {tag} does not fill its declared size {size}")
                self.dropped += inner.dropped
                kept.append(_uvarint(tag) + _uvarint(len(value)) + bytes(value))
            pos += size
        out += _uvarint(len(kept)) + b"".join(kept)
        return pos


def strip_unknown_tags(cls: type, buf: Any, pos: int, end: int) -> tuple[bytes, int]:
    """The flexible message ``cls`` at ``buf[pos:end]`` without the tagged fields ``cls`` does not
    declare, and how many were dropped. Bytes after the message are kept as they are."""
    copier = _Copier(buf, end)
    out = bytearray()
    stop = copier.struct(cls, pos, out)
    out += buf[stop:end]
    return bytes(out), copier.dropped
