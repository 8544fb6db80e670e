"""Protobuf schemas: ``.proto`` text compiled by protoc (``grpc_tools.protoc``) or a base64
``FileDescriptorProto`` as confluent-kafka sends it; identity; and Confluent's documented
Protobuf compatibility rules.

Compilation writes the schema and its text references (named by their import path) into a
temporary directory and runs protoc (grpc_tools' bundled protoc in a child Python, about 40 ms),
so untrusted text never reaches a parser inside the registry's (or broker's) process and a
runaway compile is killed after ``PROTOC_TIMEOUT_S``; references given as base64 descriptors are
passed with ``--descriptor_set_in``. Google's well-known types are found in grpc_tools' bundled
include directory.

The child never outlives the registry: on Linux it asks for ``SIGKILL`` when its parent dies
(``prctl(PR_SET_PDEATHSIG)``) as the first thing it does, then checks that its parent is still the
process that started it (a parent killed before the ``prctl`` would otherwise go unnoticed), and
only then loads protoc. This is done in the child's own Python rather than in a ``preexec_fn``,
which is unsafe in a threaded parent. The kernel sends the signal when the *thread* that forked
the child ends, not only the process: compiles start from worker threads (``asyncio.to_thread``)
that block in ``subprocess.run`` until the child has been reaped (on timeout it is killed, then
reaped), so that thread cannot end while its child runs, and a kill -9 of the process ends it.

:func:`normalize` renders the normalized ``.proto`` text (``protobuf_text``) of a parsed schema.

:func:`check` (reader, writer) reports the differences Confluent's ``SchemaDiff`` counts as
breaking: ``SYNTAX_CHANGED``, ``PACKAGE_CHANGED``, ``MESSAGE_REMOVED``, ``FIELD_KIND_CHANGED``
(scalar, message or map; enums are scalars), ``FIELD_SCALAR_KIND_CHANGED`` (outside one
wire-compatible group: int32/uint32/int64/uint64/bool/enums, sint32/sint64, fixed32/sfixed32,
fixed64/sfixed64, string/bytes, float, double), ``FIELD_NAMED_TYPE_CHANGED`` (by the type's name
within its package), map keys and values compared as fields, ``REQUIRED_FIELD_ADDED`` /
``REQUIRED_FIELD_REMOVED``, ``ONEOF_FIELD_REMOVED``, ``FIELD_MOVED_TO_EXISTING_ONEOF`` and
``MULTIPLE_FIELDS_MOVED_TO_ONEOF``. Enum changes (removed enums and constants included), label
changes, messages added or moved, and added, removed or renamed fields are compatible, as in
Confluent's diff (unknown fields and enum values survive on the wire).
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

from odradek.schema_registry import protobuf_text
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


_CHILD = """\
import os, signal, sys
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    os._exit(70)
from grpc_tools import protoc
sys.exit(protoc.main(["protoc", *sys.argv[2:]]))
"""
"""Run as ``python -c _CHILD <parent pid> <protoc args>``: see the module docstring."""


@dataclass(slots=True)
class ProtobufSchema:
    file: descriptor_pb2.FileDescriptorProto
    identity: str
    imports: list[descriptor_pb2.FileDescriptorProto] | None = None
    """The transitive imports as compiled, kept for a ``.proto`` text with custom options (empty
    for one without; None for a base64 descriptor)."""

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


def _compile(text: str, references: dict[str, str]) -> list[descriptor_pb2.FileDescriptorProto]:
    """``text`` compiled with its imports: the imports (dependencies first), then the file."""
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
        args = ["protoc", f"-I{src}", f"-I{_include_dir()}", "--include_imports", f"--descriptor_set_out={out}"]
        args.append(MAIN_FILE)
        if binary.file:
            din = os.path.join(tmp, "in.pb")
            with open(din, "wb") as f:
                f.write(binary.SerializeToString())
            args.insert(1, f"--descriptor_set_in={din}")
        try:
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(os.getpid()), *args[1:]],
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
    return list(fds.file)


def parse(text: str, references: dict[str, str]) -> ProtobufSchema:
    """Parse base64 descriptor or ``.proto`` text; raises InvalidSchema (42201)."""
    fdp = _decode_base64(text)
    imports = None
    if fdp is None:
        if len(text) > 1 << 20:
            raise InvalidSchema("Invalid schema: too large")
        *imports, fdp = _compile(text, references)
        if not protobuf_text.has_unknown_options(fdp):
            imports = []  # kept only where custom options need them
        # a name of its own, so a client can add it to a descriptor pool beside its imports
        fdp.name = f"schema_{hashlib.sha256(text.encode()).hexdigest()[:16]}.proto"
    ident = descriptor_pb2.FileDescriptorProto()
    ident.CopyFrom(fdp)
    ident.ClearField("name")
    ident.ClearField("source_code_info")
    return ProtobufSchema(fdp, base64.b64encode(ident.SerializeToString(deterministic=True)).decode(), imports)


def normalize(schema: ProtobufSchema, references: dict[str, str]) -> str:
    """The normalized ``.proto`` text of ``schema`` (rules in ``protobuf_text``). The imports
    are needed only to name custom options; for a base64 descriptor they are compiled here, from
    a file that only imports the descriptor's dependencies. Raises InvalidSchema (42201)."""
    imports = schema.imports
    if imports is None and schema.file.dependency and protobuf_text.has_unknown_options(schema.file):
        for name in schema.file.dependency:
            if not name or any(c in name for c in '"\\\n\r') or not name.isprintable():
                raise InvalidSchema(f"Invalid schema: bad import name {name!r}")
        stub = 'syntax = "proto3";\n' + "".join(f'import "{name}";\n' for name in schema.file.dependency)
        imports = _compile(stub, references)[:-1]
    return protobuf_text.render(schema.file, imports or ())


Messages = dict[str, descriptor_pb2.DescriptorProto]


def _messages(fdp: descriptor_pb2.FileDescriptorProto) -> Messages:
    """Every message (map entries included) by its fully qualified name, ``.pkg.Outer.Inner``."""
    out: Messages = {}

    def walk(prefix: str, msgs: list[descriptor_pb2.DescriptorProto]) -> None:
        for m in msgs:
            out[f"{prefix}.{m.name}"] = m
            walk(f"{prefix}.{m.name}", list(m.nested_type))

    walk(f".{fdp.package}" if fdp.package else "", list(fdp.message_type))
    return out


class _Diff:
    """Confluent's ``SchemaDiff`` over descriptors: ``writer`` is the original, ``reader`` the update."""

    def __init__(self, reader: descriptor_pb2.FileDescriptorProto, writer: descriptor_pb2.FileDescriptorProto) -> None:
        self.reader, self.writer = reader, writer
        self.rmsgs, self.wmsgs = _messages(reader), _messages(writer)
        self.out: list[str] = []

    def kind(self, f: descriptor_pb2.FieldDescriptorProto, msgs: Messages) -> str:
        if f.type in (T.TYPE_MESSAGE, T.TYPE_GROUP):
            entry = msgs.get(f.type_name)
            return "map" if entry is not None and entry.options.map_entry else "message"
        return "scalar"  # enums are scalars of the general number group, as in Confluent's diff

    def field(
        self, rf: descriptor_pb2.FieldDescriptorProto, wf: descriptor_pb2.FieldDescriptorProto, path: str
    ) -> None:
        rk, wk = self.kind(rf, self.rmsgs), self.kind(wf, self.wmsgs)
        if rk != wk:
            self.out.append(f"FIELD_KIND_CHANGED {path}")
        elif rk == "scalar":
            if _scalar_group(rf) != _scalar_group(wf):
                self.out.append(f"FIELD_SCALAR_KIND_CHANGED {path}")
        elif rk == "map":
            rentry, wentry = self.rmsgs[rf.type_name], self.wmsgs[wf.type_name]
            for r, w in zip(rentry.field, wentry.field, strict=False):  # key = 1, value = 2
                self.field(r, w, f"{path}/{w.name}")
        elif _local(rf.type_name, self.reader.package) != _local(wf.type_name, self.writer.package):
            self.out.append(f"FIELD_NAMED_TYPE_CHANGED {path}")

    def message(self, name: str, rm: descriptor_pb2.DescriptorProto, wm: descriptor_pb2.DescriptorProto) -> None:
        def real_oneof(f: descriptor_pb2.FieldDescriptorProto) -> bool:
            return f.HasField("oneof_index") and not f.proto3_optional

        rall = {f.number: f for f in rm.field}
        wall = {f.number: f for f in wm.field}
        for number, wf in wall.items():
            rf = rall.get(number)
            path = f"#/{name}/{number}"
            if rf is None:
                if wf.label == T.LABEL_REQUIRED:
                    self.out.append(f"REQUIRED_FIELD_REMOVED {path}")
                elif real_oneof(wf) and wm.oneof_decl[wf.oneof_index].name in {o.name for o in rm.oneof_decl}:
                    self.out.append(f"ONEOF_FIELD_REMOVED {path}")
                continue
            self.field(rf, wf, path)
            if rf.label == T.LABEL_REQUIRED and wf.label != T.LABEL_REQUIRED:
                self.out.append(f"REQUIRED_FIELD_ADDED {path}")
        for number, rf in rall.items():
            if number not in wall and rf.label == T.LABEL_REQUIRED:
                self.out.append(f"REQUIRED_FIELD_ADDED #/{name}/{number}")
        for index in {f.oneof_index for f in rall.values() if real_oneof(f)}:
            members = [f for f in rall.values() if real_oneof(f) and f.oneof_index == index]
            moved = [f for f in members if f.number in wall and not real_oneof(wall[f.number])]
            existing = [f for f in members if f.number in wall and real_oneof(wall[f.number])]
            if len(moved) > 1:
                self.out.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF #/{name}/{moved[0].number}")
            elif moved and existing:
                self.out.append(f"FIELD_MOVED_TO_EXISTING_ONEOF #/{name}/{moved[0].number}")

    def run(self) -> list[str]:
        if (self.reader.syntax or "proto2") != (self.writer.syntax or "proto2"):
            self.out.append("SYNTAX_CHANGED")
        if self.reader.package != self.writer.package:
            self.out.append(f"PACKAGE_CHANGED #/{self.writer.package}")
        rlocal = {_local(n, self.reader.package): m for n, m in self.rmsgs.items()}
        for full, wm in self.wmsgs.items():
            local = _local(full, self.writer.package)
            rm = rlocal.get(local)
            if rm is None:
                if not wm.options.map_entry:
                    self.out.append(f"MESSAGE_REMOVED #/{local}")
            elif not wm.options.map_entry:
                self.message(local, rm, wm)
        return self.out


def _scalar_group(f: descriptor_pb2.FieldDescriptorProto) -> int:
    if f.type == T.TYPE_ENUM:
        return 0
    for i, group in enumerate(WIRE_GROUPS):
        if f.type in group:
            return i
    return 100 + int(f.type)  # float and double: each its own group


def _local(name: str, package: str) -> str:
    name = name.lstrip(".")
    return name[len(package) + 1 :] if package and name.startswith(package + ".") else name


def check(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    """Breaking differences from ``writer`` (the data's schema) to ``reader`` (empty: compatible)."""
    return _Diff(reader.file, writer.file).run()
