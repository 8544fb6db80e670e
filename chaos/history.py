"""What a campaign observed, as plain records: the checker's input and the report's JSON.

Every time is seconds on the campaign's monotonic clock (:meth:`History.now`). A value is a
string unique in the campaign, ``<producer>:<seq>``, where ``<producer>`` names one producer
instance and ``<seq>`` counts its sends from 0 (so a producer's send order is readable from its
values). A partition is ``(topic, partition)``.

Workload threads append concurrently: ``list.append`` is atomic under the GIL, and the checker
reads the lists only after the workloads stopped.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Ack", "Fail", "Fault", "History", "OffsetObservation", "Poll", "Send", "Txn", "seq_of"]

TopicPartition = tuple[str, int]


def seq_of(value: str) -> tuple[str, int]:
    """``"p0.1:42"`` -> ``("p0.1", 42)``: the producer and its send counter."""
    producer, _, seq = value.rpartition(":")
    return producer, int(seq)


@dataclass(frozen=True)
class Send:
    value: str
    topic: str
    partition: int
    t: float


@dataclass(frozen=True)
class Ack:
    """The broker acknowledged ``value`` at ``offset`` (acks=all)."""

    value: str
    topic: str
    partition: int
    offset: int
    t: float


@dataclass(frozen=True)
class Fail:
    """The client gave up on ``value``: indeterminate (it may or may not have been written)."""

    value: str
    t: float
    error: str


@dataclass(frozen=True)
class Poll:
    """One ``consume()`` of ``consumer`` in its assignment ``session`` (incremented on every
    assignment), ``records`` as ``(topic, partition, offset, value)`` in the order returned."""

    consumer: str
    session: int
    t: float
    records: tuple[tuple[str, int, int, str], ...]
    read_committed: bool = True


@dataclass(frozen=True)
class OffsetObservation:
    """The committed offset of ``group`` on a partition, as OffsetFetch answered at ``t``."""

    group: str
    topic: str
    partition: int
    offset: int
    t: float


@dataclass
class Txn:
    """One transaction: its values, ``outcome`` ``committed``/``aborted``/``unknown`` and when
    the commit (or abort) was asked (``t_end_start``) and answered (``t_end``). ``reads`` are the
    values a consume-transform-produce transaction consumed (their offsets are committed with it):
    the checker's write-read dependencies."""

    txn: str
    values: list[str] = field(default_factory=list)
    outcome: str = "unknown"
    t_start: float = 0.0
    t_end_start: float | None = None
    t_end: float | None = None
    reads: list[str] = field(default_factory=list)


@dataclass
class Fault:
    """A nemesis operation: ``kind`` (e.g. ``kill-leader``), its targets, when it began and was
    healed (None: still active at the end)."""

    kind: str
    targets: str
    start: float
    end: float | None = None
    elected_s: float | None = None
    """When the fault took a partition's leader away: seconds until ZooKeeper named another."""
    partition: tuple[str, int] | None = None
    """The partition the fault aims at, None for faults of the whole cluster."""


@dataclass
class History:
    start_wall: float = field(default_factory=time.time)
    start_mono: float = field(default_factory=time.monotonic)
    sends: list[Send] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    fails: list[Fail] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    offsets: list[OffsetObservation] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    final_reads: list[Poll] = field(default_factory=list)
    """The final read of every partition from its beginning, after the cluster was healed."""
    notes: list[str] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.start_mono

    def records_polled_by(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for poll in self.polls:
            counts[poll.consumer] = counts.get(poll.consumer, 0) + len(poll.records)
        return dict(sorted(counts.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "start_wall": self.start_wall,
            "sends": len(self.sends),
            "acks": len(self.acks),
            "fails": len(self.fails),
            "polls": len(self.polls),
            "records_polled": sum(len(p.records) for p in self.polls),
            "records_polled_by": self.records_polled_by(),
            "records_final_read": sum(len(p.records) for p in self.final_reads),
            "offset_observations": len(self.offsets),
            "txns": {o: sum(1 for t in self.txns if t.outcome == o) for o in ("committed", "aborted", "unknown")},
            "faults": [asdict(f) for f in self.faults],
            "notes": self.notes,
        }
