"""Protobuf schemas: ``.proto`` text compiled by protoc (``grpc_tools.protoc``) or a base64
``FileDescriptorProto`` as confluent-kafka sends it; identity; and Confluent's documented
Protobuf compatibility rules.

Compilation writes the schema and its text references (named by their import path) into a
temporary directory and runs protoc (``python -m grpc_tools.protoc``, about 40 ms) in a child
process, so untrusted text never reaches a parser inside the registry's (or broker's) process and
a runaway compile is killed after ``PROTOC_TIMEOUT_S``; references given as base64 descriptors are
passed with ``--descriptor_set_in``.
Google's well-known types are found in grpc_tools' bundled include directory.

:func:`check` (reader, writer) reports Confluent's breaking differences: ``SYNTAX_CHANGED``,
``PACKAGE_CHANGED``, ``MESSAGE_REMOVED``, ``ENUM_REMOVED``, ``ENUM_CONST_REMOVED``,
``ENUM_CONST_CHANGED``, ``FIELD_KIND_CHANGED`` (scalar vs message vs enum, or the label),
``FIELD_SCALAR_KIND_CHANGED`` (outside one wire-compatible group: int32/uint32/int64/uint64/bool,
sint32/sint64, fixed32/sfixed32, fixed64/sfixed64, string/bytes), ``FIELD_NAMED_TYPE_CHANGED``,
``REQUIRED_FIELD_ADDED``/``REQUIRED_FIELD_REMOVED``, ``FIELD_MOVED_TO_EXISTING_ONEOF`` and
``MULTIPLE_FIELDS_MOVED_TO_ONEOF``. Added or removed optional fields, renamed fields and added
messages, enums or constants are compatible (unknown fields are skipped on the wire).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from google.protobuf import descriptor_pb2  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from odradek.schema_registry.errors import InvalidSchema

PROTOC_TIMEOUT_S = 30
MAIN_FILE = "__schema__.proto"
T = descriptor_pb2.FieldDescriptorProto
WIRE_GROUPS = [
    {T.TYPE_INT32, T.TYPE_UINT32, T.TYPE_INT64, T.TYPE_UINT64, T.TYPE_BOOL},
    {T.TYPE_SINT32, T.TYPE_SINT64},
    {T.TYPE_FIXED32, T.TYPE_SFIXED32},
    {T.TYPE_FIXED64, T.TYPE_SFIXED64},
    {T.TYPE_STRING, T.TYPE_BYTES},
]
NAMED = {T.TYPE_MESSAGE, T.TYPE_GROUP, T.TYPE_ENUM}


@dataclass(slots=True)
class ProtobufSchema:
    file: descriptor_pb2.FileDescriptorProto
    identity: str

    def serialized(self) -> str:
        """The descriptor as base64, Confluent's ``format=serialized``."""
        return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode()


def _decode_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    stripped = text.strip()
    if not stripped or any(c in stripped for c in " \n;{}"):
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    return fdp


def _include_dir() -> str:
    import grpc_tools  # type: ignore[import-untyped]

    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


def _compile(text: str, references: dict[str, str]) -> descriptor_pb2.FileDescriptorProto:
    with tempfile.TemporaryDirectory(prefix="odradek-proto-") as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        binary = descriptor_pb2.FileDescriptorSet()
        for name, ref in references.items():
            fdp = _decode_base64(ref)
            if fdp is not None:
                fdp.name = name
                binary.file.append(fdp)
                continue
            path = os.path.normpath(os.path.join(src, name))
            if not path.startswith(src + os.sep):
                raise InvalidSchema(f"Invalid schema: reference name {name!r} escapes the import root")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(ref)
        with open(os.path.join(src, MAIN_FILE), "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(tmp, "out.pb")
        args = ["protoc", f"-I{src}", f"-I{_include_dir()}", f"--descriptor_set_out={out}", MAIN_FILE]
        if binary.file:
            din = os.path.join(tmp, "in.pb")
            with open(din, "wb") as f:
                f.write(binary.SerializeToString())
            args.insert(1, f"--descriptor_set_in={din}")
        try:
            done = subprocess.run(
                [sys.executable, "-m", "grpc_tools.protoc", *args[1:]],
                capture_output=True,
                timeout=PROTOC_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise InvalidSchema(f"Invalid schema: protoc did not finish in {PROTOC_TIMEOUT_S} s") from None
        if done.returncode != 0:
            errors = done.stderr[:4096].decode(errors="replace").replace(src + os.sep, "").replace(tmp, "")
            raise InvalidSchema(f"Invalid schema: {errors.strip() or 'protoc failed'}")
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    return fds.file[-1]


def parse(text: str, references: dict[str, str]) -> ProtobufSchema:
    """Parse base64 descriptor or ``.proto`` text; raises InvalidSchema (42201)."""
    fdp = _decode_base64(text)
    if fdp is None:
        if len(text) > 1 << 20:
            raise InvalidSchema("Invalid schema: too large")
        fdp = _compile(text, references)
        # a name of its own, so a client can add it to a descriptor pool beside its imports
        fdp.name = f"schema_{hashlib.sha256(text.encode()).hexdigest()[:16]}.proto"
    ident = descriptor_pb2.FileDescriptorProto()
    ident.CopyFrom(fdp)
    ident.ClearField("name")
    ident.ClearField("source_code_info")
    return ProtobufSchema(fdp, base64.b64encode(ident.SerializeToString(deterministic=True)).decode())


def _types(
    fdp: descriptor_pb2.FileDescriptorProto,
) -> tuple[dict[str, descriptor_pb2.DescriptorProto], dict[str, descriptor_pb2.EnumDescriptorProto]]:
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}
    enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}

    def walk(
        prefix: str, msgs: list[descriptor_pb2.DescriptorProto], ens: list[descriptor_pb2.EnumDescriptorProto]
    ) -> None:
        for e in ens:
            enums[f"{prefix}{e.name}"] = e
        for m in msgs:
            if m.options.map_entry:
                continue
            messages[f"{prefix}{m.name}"] = m
            walk(f"{prefix}{m.name}.", list(m.nested_type), list(m.enum_type))

    walk("", list(fdp.message_type), list(fdp.enum_type))
    return messages, enums


def _kind(f: descriptor_pb2.FieldDescriptorProto) -> str:
    return "message" if f.type in (T.TYPE_MESSAGE, T.TYPE_GROUP) else "enum" if f.type == T.TYPE_ENUM else "scalar"


def _short_type(name: str, package: str) -> str:
    name = name.lstrip(".")
    return name[len(package) + 1 :] if package and name.startswith(package + ".") else name


def check(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    """Breaking differences from ``writer`` (the data's schema) to ``reader`` (empty: compatible)."""
    out: list[str] = []
    r, w = reader.file, writer.file
    if (r.syntax or "proto2") != (w.syntax or "proto2"):
        out.append("SYNTAX_CHANGED")
    if r.package != w.package:
        out.append(f"PACKAGE_CHANGED #/{w.package}")
    rmsgs, renums = _types(r)
    wmsgs, wenums = _types(w)
    for name in wenums:
        if name not in renums:
            out.append(f"ENUM_REMOVED #/{name}")
            continue
        rvalues = {v.number: v.name for v in renums[name].value}
        for v in wenums[name].value:
            if v.number not in rvalues:
                out.append(f"ENUM_CONST_REMOVED #/{name}/{v.name}")
            elif rvalues[v.number] != v.name:
                out.append(f"ENUM_CONST_CHANGED #/{name}/{v.name}")
    for name, wm in wmsgs.items():
        if name not in rmsgs:
            out.append(f"MESSAGE_REMOVED #/{name}")
            continue
        out += _message(name, rmsgs[name], wm, r.package, w.package)
    return out


def _message(
    name: str, rm: descriptor_pb2.DescriptorProto, wm: descriptor_pb2.DescriptorProto, rpkg: str, wpkg: str
) -> list[str]:
    out: list[str] = []
    rfields = {f.number: f for f in rm.field}
    wfields = {f.number: f for f in wm.field}
    required = T.LABEL_REQUIRED
    for number, wf in wfields.items():
        rf = rfields.get(number)
        path = f"#/{name}/{number}"
        if rf is None:
            if wf.label == required:
                out.append(f"REQUIRED_FIELD_REMOVED {path}")
            continue
        if _kind(rf) != _kind(wf) or (rf.label == T.LABEL_REPEATED) != (wf.label == T.LABEL_REPEATED):
            out.append(f"FIELD_KIND_CHANGED {path}")
        elif _kind(rf) == "scalar" and rf.type != wf.type:
            if not any(rf.type in g and wf.type in g for g in WIRE_GROUPS):
                out.append(f"FIELD_SCALAR_KIND_CHANGED {path}")
        elif _kind(rf) != "scalar" and _short_type(rf.type_name, rpkg) != _short_type(wf.type_name, wpkg):
            out.append(f"FIELD_NAMED_TYPE_CHANGED {path}")
        if rf.label == required and wf.label != required:
            out.append(f"REQUIRED_FIELD_ADDED {path}")
    for number, rf in rfields.items():
        if number not in wfields and rf.label == required:
            out.append(f"REQUIRED_FIELD_ADDED #/{name}/{number}")

    # oneofs: fields outside any writer oneof moving into one reader oneof
    def real_oneof(f: descriptor_pb2.FieldDescriptorProto) -> bool:
        return f.HasField("oneof_index") and not f.proto3_optional

    for index in {f.oneof_index for f in rfields.values() if real_oneof(f)}:
        members = [f for f in rfields.values() if real_oneof(f) and f.oneof_index == index]
        moved = [f for f in members if f.number in wfields and not real_oneof(wfields[f.number])]
        existing = [f for f in members if f.number in wfields and real_oneof(wfields[f.number])]
        if moved and existing:
            out.append(f"FIELD_MOVED_TO_EXISTING_ONEOF #/{name}/{moved[0].number}")
        elif len(moved) > 1:
            out.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF #/{name}/{moved[0].number}")
    return out
