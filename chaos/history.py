"""What a campaign observed, as plain records: the checker's input and the report's JSON.

Every time is seconds on the campaign's monotonic clock (:meth:`History.now`). A value is a
string unique in the campaign, ``<producer>:<seq>``, where ``<producer>`` names one producer
instance and ``<seq>`` counts its sends from 0 (so a producer's send order is readable from its
values). A partition is ``(topic, partition)``.

Consumer-protocol groups (KIP-848) also record each member's :class:`AssignmentChange` (the
partitions it learned, in a rebalance callback, it was assigned, had revoked or had lost); share
groups (KIP-932) record each :class:`ShareDelivery` and each :class:`ShareAck` with what the
broker answered to it. ``share_groups`` names each share group's topics,
``share_delivery_count_limit`` and ``share_record_lock_duration_ms`` the brokers'
``group.share.delivery.count.limit`` and ``group.share.record.lock.duration.ms``.

Workload threads append concurrently: ``list.append`` is atomic under the GIL, and the checker
reads the lists only after the workloads stopped.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Ack",
    "AssignmentChange",
    "Fail",
    "Fault",
    "History",
    "OffsetObservation",
    "Poll",
    "Send",
    "ShareAck",
    "ShareDelivery",
    "Txn",
    "seq_of",
]

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
    """The broker acknowledged ``value`` at ``offset`` (acks=all). ``offset`` is None when the
    client reports the record persisted without knowing where: librdkafka's idempotent producer
    does so for a batch whose request timed out once a later batch of the same partition
    succeeded (the sequence proves the earlier one was written). Such a record is checked for
    being read, not for its place."""

    value: str
    topic: str
    partition: int
    offset: int | None
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


@dataclass(frozen=True)
class AssignmentChange:
    """A member of consumer-protocol group ``group`` learned at ``t``, in a rebalance callback,
    that ``partitions`` were ``assigned`` to it, ``revoked`` from it (it gives them up: the
    coordinator hands them to another member only after the member's next heartbeat says so) or
    ``lost`` (it was fenced: the coordinator may have handed them on before it learned);
    ``closed``: the member stopped consuming them because it is closing (its last partitions)."""

    consumer: str
    group: str
    kind: str
    t: float
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ShareDelivery:
    """A share consumer's ``poll`` returned the record at ``offset`` (holding ``value``) at ``t``;
    ``delivery_count`` is the broker's count of its acquisitions (1 the first time), None when
    the client does not expose it."""

    consumer: str
    group: str
    topic: str
    partition: int
    offset: int
    value: str
    t: float
    delivery_count: int | None = None


@dataclass
class ShareAck:
    """An acknowledgement (``accept``, ``release`` or ``reject``) a share consumer sent at ``t``
    for a record it had been delivered. ``outcome``: ``confirmed`` (the broker answered it without
    error, in the acknowledgement-commit callback or ``commit_sync``), ``failed`` (an error was
    answered, or the client refused it; ``error`` says which) or ``pending`` (no answer seen, so
    the record's state is unknown); ``t_outcome`` when the answer was seen."""

    consumer: str
    group: str
    topic: str
    partition: int
    offset: int
    value: str
    kind: str
    t: float
    outcome: str = "pending"
    t_outcome: float | None = None
    error: str | None = None


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
    assignments: list[AssignmentChange] = field(default_factory=list)
    share_deliveries: list[ShareDelivery] = field(default_factory=list)
    share_acks: list[ShareAck] = field(default_factory=list)
    share_groups: dict[str, list[str]] = field(default_factory=dict)
    """Each share group's topics: every acknowledged record of them must reach the group."""
    share_delivery_count_limit: int = 5
    share_record_lock_duration_ms: int = 30000
    """The brokers' ``group.share.record.lock.duration.ms`` (Kafka's default here)."""
    notes: list[str] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.start_mono

    def records_polled_by(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for poll in self.polls:
            counts[poll.consumer] = counts.get(poll.consumer, 0) + len(poll.records)
        return dict(sorted(counts.items()))

    def share_deliveries_by(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for delivery in self.share_deliveries:
            counts[delivery.consumer] = counts.get(delivery.consumer, 0) + 1
        return dict(sorted(counts.items()))

    def share_ack_counts(self) -> dict[str, dict[str, int]]:
        """``{kind: {outcome: count}}`` of the share acknowledgements."""
        counts: dict[str, dict[str, int]] = {}
        for ack in self.share_acks:
            by_outcome = counts.setdefault(ack.kind, {})
            by_outcome[ack.outcome] = by_outcome.get(ack.outcome, 0) + 1
        return counts

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
            "assignment_changes": {
                k: sum(1 for a in self.assignments if a.kind == k) for k in ("assigned", "revoked", "lost", "closed")
            },
            "share_deliveries": len(self.share_deliveries),
            "share_deliveries_by": self.share_deliveries_by(),
            "share_acks": self.share_ack_counts(),
            "faults": [asdict(f) for f in self.faults],
            "notes": self.notes,
        }
