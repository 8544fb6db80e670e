"""The leader epoch cache of one partition and its ``leader-epoch-checkpoint`` file (KIP-101).

Each entry is (leader_epoch, start_offset): the first offset written under that epoch. A leader
adds an entry when it appends the first batch of a new epoch; a follower when it appends a batch
stamped with an epoch newer than its latest. :meth:`end_offset_for` answers OffsetForLeaderEpoch:
a follower that was leader asks for its latest epoch's end offset on the new leader and truncates
its divergent tail to it, instead of keeping records the new leader never had.

File format (Kafka's ``CheckpointFile`` with ``LeaderEpochCheckpointFile``'s formatter), text:

    0                 <- version
    2                 <- number of entries
    0 0               <- "epoch start_offset", one line per entry, ascending
    3 1042

Written whole to ``leader-epoch-checkpoint.tmp`` and renamed over the file at every change, but
fsynced only by :meth:`LeaderEpochFileCache.sync`, which the log calls before it moves its
recovery point (:meth:`odradek.storage.log.Log.flush`) and when it closes. So the checkpoint is
durable for every offset below the recovery point, and what a crash may lose of it (epochs of
records above the recovery point, or a torn file) the log rebuilds from the batches it recovers,
as Kafka's segment recovery assigns the epochs it reads. A partition becoming leader thus costs a
write and a rename, not an fsync: a broker taking over 1,000 partitions spent 2.3 s of its event
loop in those fsyncs. A file that does not parse is logged and treated as empty
(:attr:`LeaderEpochFileCache.unreadable` tells the log to rebuild it from every segment).

Edge results of :meth:`end_offset_for` (Kafka's ``LeaderEpochFileCache.endOffsetFor``):
- epoch -1 (undefined), or an epoch above the latest: (-1, -1);
- the latest epoch: (latest, log end offset);
- an epoch below the earliest: (epoch, earliest start offset);
- otherwise (the largest epoch <= the one asked, the start offset of the next epoch).

Not thread-safe: one cache per partition, used from the broker's event loop.
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path

from odradek.storage.checkpoint import fsync_dir

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """(epoch, start_offset) entries, ascending in both, persisted in the partition directory."""

    def __init__(self, directory: Path | str) -> None:
        self.path = Path(directory) / CHECKPOINT_FILE
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        self.unsynced = False
        """The file changed since its last fsync (:meth:`sync`)."""
        self.unreadable = False
        """The file existed but did not parse: the cache started empty."""
        self._read()

    # --- file ------------------------------------------------------------------------------------

    def _read(self) -> None:
        try:
            lines = self.path.read_text().split("\n")
        except FileNotFoundError:
            return
        try:
            if lines[0].strip() != "0":
                raise ValueError(f"unknown version {lines[0]!r}")
            count = int(lines[1])
            entries = [tuple(int(x) for x in line.split()) for line in lines[2 : 2 + count]]
            if len(entries) != count or any(len(e) != 2 for e in entries):
                raise ValueError("entry count does not match")
        except (ValueError, IndexError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            self.unreadable = True
            return
        for epoch, offset in entries:
            self._epochs.append(epoch)
            self._offsets.append(offset)

    def _write(self, sync: bool = False) -> None:
        tmp = self.path.with_name(CHECKPOINT_FILE + ".tmp")
        body = "".join(f"{e} {o}\n" for e, o in zip(self._epochs, self._offsets, strict=True))
        with open(tmp, "w") as f:
            f.write(f"0\n{len(self._epochs)}\n{body}")
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if sync:
            fsync_dir(self.path.parent)
        self.unsynced = not sync

    def sync(self) -> None:
        """Make the file durable if it changed since it last was (a write, an fsync and the
        directory's fsync); a no-op otherwise."""
        if self.unsynced and self.path.parent.exists():
            self._write(sync=True)

    # --- queries ---------------------------------------------------------------------------------

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_epoch(self) -> int:
        return self._epochs[0] if self._epochs else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; see the module docstring for edge cases."""
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # --- changes ---------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; a no-op for the latest epoch.

        Entries with an epoch >= ``epoch`` or a start offset >= ``start_offset`` conflict with the
        new one and are removed first (a stale leader's leftovers).
        """
        if epoch < 0 or start_offset < 0:
            return
        if self._epochs and self._epochs[-1] == epoch and self._offsets[-1] <= start_offset:
            return
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries that start at or after ``end_offset`` (the log was truncated there)."""
        changed = False
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
            changed = True
        if changed:
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: earlier entries go, the one covering it moves up."""
        keep = bisect.bisect_right(self._offsets, start_offset) - 1
        if keep <= 0 and (not self._offsets or self._offsets[0] >= start_offset):
            return
        self._epochs = self._epochs[keep:]
        self._offsets = [start_offset, *self._offsets[keep + 1 :]]
        self._write()

    def clear(self) -> None:
        self._epochs, self._offsets = [], []
        self._write()
