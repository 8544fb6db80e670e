"""The embedded store's snapshot file: every persistent znode, rewritten atomically on each change.

Location: ``<metadata_dir>/znodes.json``; the broker's ``metadata_dir`` is
``<log.dirs[0]>/metadata`` (:data:`METADATA_DIR_NAME` inside its first log directory; the log
manager ignores it, as the name is not ``<topic>-<partition>``). Next to it: ``znodes.json.bak``
(the previous snapshot), ``znodes.json.tmp`` (a write in progress; a leftover one is a torn write
and is removed at load) and ``znodes.lock`` (held with ``flock`` by the process owning the store).

File format (UTF-8 text)::

    {"format":"odradek-znodes","format_version":1,"crc32":2362340105,"length":4242,"nodes":7}
    [
    {"path":"/","data":"","version":0,"cversion":3,"ctime":0,"mtime":0},
    {"path":"/brokers","data":"","version":0,"cversion":2,"ctime":1700000000000,"mtime":...},
    ...
    ]

Line 1 is a header; ``crc32`` (zlib CRC-32) and ``length`` cover every byte after the first
newline. Records are sorted by path, parents before children. ``data`` holds the znode's bytes when
they are valid UTF-8 (Kafka's znodes are JSON or decimal text), otherwise the record has
``data_base64`` instead. Ephemeral nodes are never written: they die with the process.

Crash policy: :func:`write_snapshot` writes ``.tmp``, fsyncs it, hard-links the current file to
``.bak``, renames ``.tmp`` over the current file and fsyncs the directory, so after a kill -9 or a
power loss the current file is the old or the new snapshot, never a mix. :func:`read_snapshot`
refuses (with :class:`~odradek.metadata.errors.CorruptStoreError` naming the file and its backup)
a file whose header, checksum or records are wrong, and a directory where the current file is
missing but a backup exists; it never silently returns an empty tree.

Plain functions on files; call them from one thread at a time.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from odradek.metadata.errors import CorruptStoreError

__all__ = [
    "METADATA_DIR_NAME",
    "SNAPSHOT_FILE",
    "NodeRecord",
    "encode_record",
    "find_snapshot",
    "read_snapshot",
    "snapshot_path",
    "write_snapshot",
    "write_snapshot_lines",
]

METADATA_DIR_NAME = "metadata"
SNAPSHOT_FILE = "znodes.json"
_FORMAT = "odradek-znodes"
_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One persistent znode as stored in the snapshot."""

    path: str
    data: bytes
    version: int
    cversion: int
    ctime: int
    mtime: int


def snapshot_path(metadata_dir: str | os.PathLike[str]) -> Path:
    """``<metadata_dir>/znodes.json``."""
    return Path(metadata_dir) / SNAPSHOT_FILE


def find_snapshot(data_dir: str | os.PathLike[str]) -> Path | None:
    """The snapshot of a broker data dir (``<dir>/metadata/znodes.json``) or of a metadata dir
    (``<dir>/znodes.json``), whichever exists; None if neither does."""
    for candidate in (Path(data_dir) / METADATA_DIR_NAME / SNAPSHOT_FILE, Path(data_dir) / SNAPSHOT_FILE):
        if candidate.exists() or candidate.with_name(SNAPSHOT_FILE + ".bak").exists():
            return candidate
    return None


def encode_record(record: NodeRecord) -> str:
    """One record's line in the snapshot body (compact JSON, no newline)."""
    entry: dict[str, object] = {"path": record.path}
    try:
        entry["data"] = record.data.decode("utf-8")
    except UnicodeDecodeError:
        entry["data_base64"] = base64.b64encode(record.data).decode("ascii")
    entry.update(
        version=record.version,
        cversion=record.cversion,
        ctime=record.ctime,
        mtime=record.mtime,
    )
    return json.dumps(entry, separators=(",", ":"))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(path: Path, records: list[NodeRecord]) -> None:
    """Atomically and durably replace the snapshot at ``path`` with ``records``."""
    write_snapshot_lines(path, [encode_record(r) for r in records])


def write_snapshot_lines(path: Path, lines: list[str]) -> None:
    """:func:`write_snapshot` from records already encoded by :func:`encode_record`, in path order
    (the embedded store keeps each znode's line and re-encodes only the znodes a change touched)."""
    body = ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8")
    header = json.dumps(
        {
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "crc32": zlib.crc32(body),
            "length": len(body),
            "nodes": len(lines),
        },
        separators=(",", ":"),
    ).encode("utf-8")
    tmp = path.with_name(path.name + ".tmp")
    backup = path.with_name(path.name + ".bak")
    with open(tmp, "wb") as f:
        f.write(header + b"\n" + body)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        backup_tmp = path.with_name(path.name + ".bak.tmp")
        try:
            os.unlink(backup_tmp)
        except FileNotFoundError:
            pass
        os.link(path, backup_tmp)
        os.replace(backup_tmp, backup)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _corrupt(path: Path, reason: str) -> CorruptStoreError:
    backup = path.with_name(path.name + ".bak")
    hint = (
        f"; the previous snapshot is {backup}: inspect it and move it to {path} to recover"
        if backup.exists()
        else "; no backup snapshot exists"
    )
    return CorruptStoreError(f"Embedded metadata snapshot {path} is unreadable: {reason}{hint}")


def read_snapshot(path: Path, *, remove_torn_tmp: bool = True) -> list[NodeRecord] | None:
    """Load the snapshot at ``path``: its records, or None if the store was never written.

    A leftover ``.tmp`` (a write torn by a crash) is ignored and, if ``remove_torn_tmp``, deleted.
    Raises :class:`CorruptStoreError` for a damaged file, or when only the backup exists.
    """
    tmp = path.with_name(path.name + ".tmp")
    if remove_torn_tmp and tmp.exists():
        tmp.unlink()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if path.with_name(path.name + ".bak").exists():
            raise _corrupt(path, "the file is missing but a backup exists") from None
        return None
    newline = raw.find(b"\n")
    if newline < 0:
        raise _corrupt(path, "no header line (truncated file)")
    try:
        header = json.loads(raw[:newline])
    except ValueError as e:
        raise _corrupt(path, f"bad header: {e}") from None
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise _corrupt(path, f"not an {_FORMAT} file")
    if header.get("format_version") != _FORMAT_VERSION:
        raise _corrupt(path, f"unsupported format_version {header.get('format_version')!r}")
    body = raw[newline + 1 :]
    if len(body) != header.get("length"):
        raise _corrupt(path, f"body is {len(body)} bytes, header says {header.get('length')}")
    if zlib.crc32(body) != header.get("crc32"):
        raise _corrupt(path, "checksum mismatch")
    try:
        entries = json.loads(body)
        records = [_decode_record(e) for e in entries]
    except (ValueError, TypeError, KeyError) as e:
        raise _corrupt(path, f"bad record: {e}") from None
    if len(records) != header.get("nodes"):
        raise _corrupt(path, f"{len(records)} records, header says {header.get('nodes')}")
    return records


def _decode_record(entry: dict[str, object]) -> NodeRecord:
    if "data_base64" in entry:
        data = base64.b64decode(str(entry["data_base64"]), validate=True)
    else:
        data = str(entry["data"]).encode("utf-8")
    ints = {}
    for key in ("version", "cversion", "ctime", "mtime"):
        value = entry[key]
        if not isinstance(value, int):
            raise TypeError(f"{key} of {entry.get('path')!r} is not an integer")
        ints[key] = value
    path = entry["path"]
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"bad path {path!r}")
    return NodeRecord(path=path, data=data, **ints)
