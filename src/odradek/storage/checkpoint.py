"""Offset checkpoint files (Kafka's ``OffsetCheckpointFile``), kept at the root of each log dir.

Files: ``recovery-point-offset-checkpoint`` (offset up to which each log is flushed),
``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` (high watermarks).

Format (UTF-8 text, Kafka's)::

    0                 <- version
    2                 <- number of entries
    orders 0 1234     <- topic, partition, offset; one line per partition
    orders 1 99

Writes are atomic: the content goes to ``<file>.tmp``, is fsynced, renamed over the file, and the
directory is fsynced, so a crash leaves either the old or the new file. A file that cannot be
parsed is reported (ERROR) and read as empty: a missing recovery point means full recovery,
which is safe. Synchronous; called from the broker's event-loop thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "OffsetCheckpointFile",
    "fsync_dir",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"

_VERSION = 0
logger = logging.getLogger("odradek.storage.checkpoint")


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so renames and new files in it survive a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OffsetCheckpointFile:
    """One checkpoint file: :meth:`read` and an atomic :meth:`write` of ``{TopicPartition: offset}``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        lines = [str(_VERSION), str(len(offsets))]
        lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    def read(self) -> dict[TopicPartition, int]:
        """The entries; ``{}`` when the file is missing or malformed (malformed is logged)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            logger.error("Cannot read checkpoint file %s (%s); ignoring it", self.path, exc)
            return {}
        try:
            return self._parse(text)
        except ValueError as exc:
            logger.error("Malformed checkpoint file %s (%s); ignoring it", self.path, exc)
            return {}

    def _parse(self, text: str) -> dict[TopicPartition, int]:
        lines = text.splitlines()
        if len(lines) < 2:
            raise ValueError("missing version or count line")
        if int(lines[0]) != _VERSION:
            raise ValueError(f"unsupported version {lines[0]!r}")
        count = int(lines[1])
        entries = [line for line in lines[2:] if line.strip()]
        if count != len(entries):
            raise ValueError(f"expected {count} entries, found {len(entries)}")
        out: dict[TopicPartition, int] = {}
        for line in entries:
            parts = line.split()
            if len(parts) != 3:
                raise ValueError(f"malformed line {line!r}")
            out[TopicPartition(parts[0], int(parts[1]))] = int(parts[2])
        return out
