"""The checker's properties of Kafka 4's groups, on the client-side records of
:class:`~chaos.history.History`.

**Consumer-protocol groups (KIP-848).** A member owns a partition from the rebalance callback that
assigned it (``on_assign``) until the one that revoked it (``on_revoke``) or told it that it was
lost (``on_lost``), or until it closed (:func:`ownership_intervals`). ``partition-owned-twice``:
two members' intervals of one partition overlap by more than :data:`OWNERSHIP_TOLERANCE_S`, and
the earlier owner's interval did not end in ``lost``.

What a client-side view can and cannot prove:

- A revocation is recorded when the callback runs, before the member's next heartbeat tells the
  coordinator it let the partition go, and the coordinator assigns it to another member only
  after that; the new owner's callback runs after the coordinator's answer. Both times are read
  on one clock (the campaign's process), so a revoked interval that reaches into another
  member's is an anomaly (the tolerance covers the recording of the two callbacks only).
- A lost interval ends when the member *learned* it was fenced (an error answered to its
  heartbeat, usually after it reached the coordinator again); the coordinator may have fenced it,
  and handed its partitions on, as long before as its session timeout allowed. Such overlaps are
  what KIP-848 permits a fenced member (its offset commits are refused by member epoch), so they
  are counted in the stats (``owned_twice_until_lost``), not as anomalies; a coordinator that
  fenced a live member too early is therefore not found here.
- Nothing is seen between the broker's decisions and the callbacks: an assignment the member never
  learned of (a heartbeat answer lost, then superseded) leaves no interval.

**Share groups (KIP-932).** Each delivery a share consumer's ``poll`` returned and each
acknowledgement it sent, with the broker's answer (:class:`~chaos.history.ShareAck`); only
acknowledgements the broker confirmed count.

- ``share-accepted-redelivered`` / ``share-rejected-redelivered``: a record whose ACCEPT / REJECT
  was confirmed was delivered again after the delivery it acknowledged (recorded later): with a
  higher delivery count, or, whatever its count, more than a record lock
  (``group.share.record.lock.duration.ms``) after the confirmation was seen. A lower or equal
  count seen sooner is not counted: it can be an earlier acquisition whose answer reached its
  consumer late, e.g. one made by a leader about to learn it was replaced, whose in-flight records
  the new leader hands out again (as Kafka's failover does); that holder's acknowledgement fails.
  The time rule finds a share-partition that lost its state (its counts start from 1 again) once
  it delivers records accepted more than a lock earlier, which a lost state always includes; it
  would also count an earlier acquisition whose answer was held up for longer than a lock (no
  fault of the campaign holds a connection that long).
- ``share-never-delivered``: a record of a share group's topic acknowledged to its producer that
  no consumer of the group was delivered by the end (the campaign drains the group after healing).
- ``share-over-delivered``: a record delivered more times than ``group.share.delivery.count.limit``
  (deliveries seen, or the largest delivery count a delivery carried).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.history import History, ShareDelivery

__all__ = [
    "GROUP_ANOMALIES",
    "OWNERSHIP_TOLERANCE_S",
    "Ownership",
    "check_ownership",
    "check_share_groups",
    "ownership_intervals",
]

GROUP_ANOMALIES = (
    "partition-owned-twice",
    "share-accepted-redelivered",
    "share-rejected-redelivered",
    "share-never-delivered",
    "share-over-delivered",
)

OWNERSHIP_TOLERANCE_S = 0.05
"""Overlaps up to this long are not anomalies: the two callbacks' times are read by two threads."""

Add = Callable[[str, dict[str, Any]], None]
TP = tuple[str, int]


@dataclass(frozen=True)
class Ownership:
    """``consumer`` of ``group`` owned ``partition`` from ``start`` to ``end`` (None: to the end of
    the history), ended by ``ended_by`` (``revoked``, ``lost``, ``closed`` or None)."""

    consumer: str
    group: str
    partition: TP
    start: float
    end: float | None
    ended_by: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "consumer": self.consumer,
            "from": round(self.start, 3),
            "to": None if self.end is None else round(self.end, 3),
            "ended_by": self.ended_by,
        }


def ownership_intervals(history: History) -> list[Ownership]:
    """Each member's ownership intervals, from its assignment changes in time order. An assignment
    of a partition the member already owns changes nothing; a revocation of one it does not own is
    ignored."""
    opened: dict[tuple[str, str, TP], float] = {}
    intervals: list[Ownership] = []
    for change in sorted(history.assignments, key=lambda c: c.t):
        for tp in change.partitions:
            key = (change.group, change.consumer, tp)
            if change.kind == "assigned":
                opened.setdefault(key, change.t)
                continue
            start = opened.pop(key, None)
            if start is not None:
                intervals.append(Ownership(change.consumer, change.group, tp, start, change.t, change.kind))
    for (group, consumer, tp), start in opened.items():
        intervals.append(Ownership(consumer, group, tp, start, None, None))
    return intervals


def check_ownership(history: History, add: Add) -> dict[str, Any]:
    """``partition-owned-twice`` (module docstring); returns the stats."""
    by_partition: dict[tuple[str, TP], list[Ownership]] = defaultdict(list)
    intervals = ownership_intervals(history)
    for interval in intervals:
        by_partition[(interval.group, interval.partition)].append(interval)
    excused = 0
    excused_max = 0.0
    for (group, tp), owned in sorted(by_partition.items()):
        owned.sort(key=lambda o: o.start)
        for i, earlier in enumerate(owned):
            earlier_end = math.inf if earlier.end is None else earlier.end
            for later in owned[i + 1 :]:
                if later.start >= earlier_end - OWNERSHIP_TOLERANCE_S:
                    break
                if later.consumer == earlier.consumer:
                    continue
                later_end = math.inf if later.end is None else later.end
                overlap = min(earlier_end, later_end) - later.start
                if overlap <= OWNERSHIP_TOLERANCE_S:
                    continue
                if earlier.ended_by == "lost":
                    excused += 1
                    excused_max = max(excused_max, overlap)
                    continue
                add(
                    "partition-owned-twice",
                    {
                        "group": group,
                        "partition": list(tp),
                        "overlap_s": None if math.isinf(overlap) else round(overlap, 3),
                        "owners": [earlier.to_json(), later.to_json()],
                    },
                )
    return {
        "intervals": len(intervals),
        "lost": sum(1 for o in intervals if o.ended_by == "lost"),
        "owned_twice_until_lost": excused,
        "owned_twice_until_lost_max_s": None if math.isinf(excused_max) else round(excused_max, 3),
    }


def _later(delivery: ShareDelivery, acked: ShareDelivery | None, confirmed_at: float, lock_s: float) -> bool:
    """Whether ``delivery`` came after ``acked``, the delivery an acknowledgement confirmed at
    ``confirmed_at`` was for: recorded after it, and with a higher delivery count or more than a
    record lock (``lock_s``) after the confirmation whatever its count (module docstring)."""
    if acked is not None:
        if delivery is acked or delivery.t <= acked.t:
            return False
        counts = (acked.delivery_count, delivery.delivery_count)
        if counts[0] is not None and counts[1] is not None and counts[1] > counts[0]:
            return True
    return delivery.t > confirmed_at + lock_s


def check_share_groups(history: History, add: Add) -> dict[str, Any]:
    """The ``share-*`` anomalies (module docstring); returns the stats."""
    limit = history.share_delivery_count_limit
    lock_s = history.share_record_lock_duration_ms / 1000
    deliveries: dict[tuple[str, str, int, int], list[ShareDelivery]] = defaultdict(list)
    for delivery in sorted(history.share_deliveries, key=lambda d: d.t):
        deliveries[(delivery.group, delivery.topic, delivery.partition, delivery.offset)].append(delivery)

    for (group, topic, partition, offset), seen in sorted(deliveries.items()):
        counts = [d.delivery_count for d in seen if d.delivery_count is not None]
        most = max(len(seen), *counts) if counts else len(seen)
        if most > limit:
            add(
                "share-over-delivered",
                {
                    "group": group,
                    "partition": [topic, partition],
                    "offset": offset,
                    "value": seen[0].value,
                    "deliveries": len(seen),
                    "max_delivery_count": max(counts, default=None),
                    "limit": limit,
                    "delivered": [[d.consumer, round(d.t, 3), d.delivery_count] for d in seen],
                },
            )

    for ack in history.share_acks:
        if ack.outcome != "confirmed" or ack.kind not in ("accept", "reject"):
            continue
        seen = deliveries.get((ack.group, ack.topic, ack.partition, ack.offset), [])
        own = [d for d in seen if d.consumer == ack.consumer and d.t <= ack.t]
        acked = own[-1] if own else None
        confirmed_at = ack.t if ack.t_outcome is None else ack.t_outcome
        again = [d for d in seen if _later(d, acked, confirmed_at, lock_s)]
        if again:
            add(
                f"share-{ack.kind}ed-redelivered",
                {
                    "group": ack.group,
                    "partition": [ack.topic, ack.partition],
                    "offset": ack.offset,
                    "value": ack.value,
                    "acknowledged_by": ack.consumer,
                    "delivery_count": None if acked is None else acked.delivery_count,
                    "confirmed_at": round(confirmed_at, 3),
                    "delivered_again_to": again[0].consumer,
                    "delivered_again_at": round(again[0].t, 3),
                    "delivered_again_count": again[0].delivery_count,
                },
            )

    never = 0
    for group, topics in sorted(history.share_groups.items()):
        delivered = {d.value for d in history.share_deliveries if d.group == group}
        for produced in history.acks:
            if produced.topic in topics and produced.value not in delivered:
                never += 1
                add(
                    "share-never-delivered",
                    {
                        "group": group,
                        "value": produced.value,
                        "partition": [produced.topic, produced.partition],
                        "offset": produced.offset,
                        "acked_at": round(produced.t, 3),
                    },
                )

    all_counts = [d.delivery_count for d in history.share_deliveries if d.delivery_count is not None]
    return {
        "deliveries": len(history.share_deliveries),
        "records_delivered": len(deliveries),
        "redeliveries": len(history.share_deliveries) - len(deliveries),
        "max_delivery_count": max(all_counts, default=None),
        "acks": history.share_ack_counts(),
    }
