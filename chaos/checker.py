"""The checker: Jepsen's Kafka anomalies in a :class:`~chaos.history.History`.

Vocabulary and method after Jepsen's analyses of Redpanda 21.10.1 and Bufstream 0.1. Each
partition's *version order* is the set of offsets known to hold a record (read by any consumer
or acknowledged to a producer), sorted; positions in it, not raw offsets, decide skips (offsets
of transaction markers and aborted records hold nothing a read_committed consumer returns).

Anomalies (:data:`ANOMALIES`; each reported with examples):

- ``lost-write``: acknowledged, never read, although a later offset of its partition was read.
- ``unseen``: acknowledged, never read, and nothing after its offset was read either; also a
  record of a committed transaction that no read returned.
- ``duplicate``: one value at two or more offsets (reads and acknowledgements together).
- ``inconsistent-offsets``: one offset of a partition holding two different values.
- ``reordering``: two values of one producer in one partition whose log order contradicts
  their send order.
- ``poll-skip`` / ``int-poll-skip``: a consumer, inside one assignment, moved past a position
  of the version order without reading it, between two polls / inside one poll.
- ``nonmonotonic-poll`` / ``int-nonmonotonic-poll``: it read a position at or before one it
  had already read, between polls / inside one poll.
- ``aborted-read``: a read_committed consumer read a value of an aborted transaction.
- ``uncommitted-read``: a read_committed consumer read a value of a transaction before its
  commit was asked.
- ``offsets-backwards``: a group's committed offset of a partition decreased.
- ``g0`` (transactions): a write-write cycle between committed transactions, found on the
  partitions' log orders.
- ``g1c``: a cycle of write-write and write-read dependencies holding a write-read edge (a
  consume-transform-produce transaction consumed a committed transaction's value); see
  :mod:`chaos.cycles`.
- ``partition-owned-twice``: two members of a consumer-protocol group owned one partition at once
  (their rebalance callbacks say so); ``share-accepted-redelivered``,
  ``share-rejected-redelivered``, ``share-never-delivered``, ``share-over-delivered``: a share
  group's deliveries and acknowledgements; see :mod:`chaos.group_checks` (and what a client-side
  view cannot prove). Share deliveries are reads too: they enter the version order, so a delivery
  of a wrong value at an offset is ``inconsistent-offsets``.

Unavailability (:func:`unavailability`): for each fault, per partition, the time from the
fault to the first acknowledgement of a record sent after it; the fault's window is that of the
partition it aims at (a leader or follower of it), or the largest over all partitions for faults
of the whole cluster (``window_all_s`` is always the largest). The share groups' topics are left out
(their producer writes at a lower rate, and the faults aim at the ``chaos`` topic).
Faults that took a leader away also report when ZooKeeper named a new one (``elected_s``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.cycles import find_cycles
from chaos.group_checks import GROUP_ANOMALIES, check_ownership, check_share_groups
from chaos.history import History, Poll, seq_of

__all__ = ["ANOMALIES", "CheckResult", "check", "unavailability"]

ANOMALIES = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "reordering",
    "poll-skip",
    "int-poll-skip",
    "nonmonotonic-poll",
    "int-nonmonotonic-poll",
    "aborted-read",
    "uncommitted-read",
    "offsets-backwards",
    "g0",
    "g1c",
    *GROUP_ANOMALIES,
)

MAX_EXAMPLES = 20
TP = tuple[str, int]


@dataclass
class CheckResult:
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not any(self.counts.values())

    def add(self, kind: str, example: dict[str, Any]) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        examples = self.anomalies.setdefault(kind, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(example)

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "counts": self.counts, "examples": self.anomalies, "stats": self.stats}


def _all_reads(history: History) -> Iterable[Poll]:
    yield from history.polls
    yield from history.final_reads


def check(history: History) -> CheckResult:
    """Every anomaly of :data:`ANOMALIES` found in ``history``."""
    result = CheckResult()
    # offset -> values, value -> positions, from reads and acknowledgements
    at_offset: dict[TP, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    positions: dict[str, set[tuple[TP, int]]] = defaultdict(set)
    read_values: set[str] = set()
    max_read: dict[TP, int] = {}
    for poll in _all_reads(history):
        for topic, partition, offset, value in poll.records:
            tp = (topic, partition)
            at_offset[tp][offset].add(value)
            positions[value].add((tp, offset))
            read_values.add(value)
            max_read[tp] = max(max_read.get(tp, -1), offset)
    for delivery in history.share_deliveries:
        tp = (delivery.topic, delivery.partition)
        at_offset[tp][delivery.offset].add(delivery.value)
        positions[delivery.value].add((tp, delivery.offset))
        read_values.add(delivery.value)
        max_read[tp] = max(max_read.get(tp, -1), delivery.offset)
    for ack in history.acks:
        if ack.offset is None:  # persisted, offset unknown (see Ack): nothing to place
            continue
        tp = (ack.topic, ack.partition)
        at_offset[tp][ack.offset].add(ack.value)
        positions[ack.value].add((tp, ack.offset))

    for tp, offsets in sorted(at_offset.items()):
        for offset, values in sorted(offsets.items()):
            if len(values) > 1:
                result.add("inconsistent-offsets", {"partition": list(tp), "offset": offset, "values": sorted(values)})
    for value, where in sorted(positions.items()):
        if len(where) > 1:
            result.add("duplicate", {"value": value, "at": sorted([list(tp), o] for tp, o in where)})

    aborted = {v for t in history.txns if t.outcome != "committed" for v in t.values}
    acked = {a.value: a for a in history.acks}
    for value, ack in sorted(acked.items(), key=lambda kv: kv[1].t):
        if value in read_values or value in aborted:  # a transaction not committed promised nothing
            continue
        tp = (ack.topic, ack.partition)
        example = {"value": value, "partition": list(tp), "offset": ack.offset, "acked_at": round(ack.t, 3)}
        if max_read.get(tp, -1) > (ack.offset if ack.offset is not None else -1):
            result.add("lost-write", {**example, "max_read_offset": max_read[tp]})
        else:
            result.add("unseen", example)

    sent = {s.value: s for s in history.sends}
    for txn in history.txns:  # a committed transaction's records are acknowledged writes too
        if txn.outcome != "committed":
            continue
        for value in txn.values:
            if value not in read_values and value not in acked:
                send = sent.get(value)
                place = [send.topic, send.partition] if send is not None else None
                result.add("unseen", {"value": value, "txn": txn.txn, "partition": place})
    _check_reordering(at_offset, result)
    _check_polls(history, at_offset, aborted, result)
    _check_transactions(history, result)
    _check_offsets(history, result)
    ownership = check_ownership(history, result.add)
    share = check_share_groups(history, result.add)
    for kind in ANOMALIES:
        result.counts.setdefault(kind, 0)
    result.stats = {
        "acknowledged": len(acked),
        "read_distinct": len(read_values),
        "acknowledged_and_read": sum(1 for v in acked if v in read_values),
        "acknowledged_without_offset": sum(1 for a in acked.values() if a.offset is None),
        "indeterminate_sends": len(history.fails),
        "indeterminate_read": sum(1 for f in history.fails if f.value in read_values),
        "partitions": len(at_offset),
        "ownership": ownership,
        "share": share,
    }
    return result


def _version_order(at_offset: dict[TP, dict[int, set[str]]]) -> dict[TP, list[int]]:
    return {tp: sorted(offsets) for tp, offsets in at_offset.items()}


def _check_reordering(at_offset: dict[TP, dict[int, set[str]]], result: CheckResult) -> None:
    for tp, offsets in sorted(at_offset.items()):
        last: dict[str, tuple[int, int, str]] = {}
        seen: set[str] = set()  # a value's later copies are duplicates, not reorderings
        for offset in sorted(offsets):
            for value in sorted(offsets[offset] - seen):
                seen.add(value)
                producer, seq = seq_of(value)
                previous = last.get(producer)
                if previous is not None and seq < previous[0]:
                    result.add(
                        "reordering",
                        {"partition": list(tp), "earlier": [previous[2], previous[1]], "later": [value, offset]},
                    )
                if previous is None or seq > previous[0]:
                    last[producer] = (seq, offset, value)


def _check_polls(
    history: History, at_offset: dict[TP, dict[int, set[str]]], aborted: set[str], result: CheckResult
) -> None:
    """Skips and non-monotonic reads of each consumer inside one assignment session."""
    order = _version_order(at_offset)
    committed_order = {tp: [o for o in offsets if not at_offset[tp][o] <= aborted] for tp, offsets in order.items()}
    index = {tp: {o: i for i, o in enumerate(offsets)} for tp, offsets in order.items()}
    committed_index = {tp: {o: i for i, o in enumerate(offsets)} for tp, offsets in committed_order.items()}
    last: dict[tuple[str, int, TP], tuple[int, int]] = {}  # (consumer, session, tp) -> (position, poll number)
    for number, poll in enumerate(history.polls):
        for topic, partition, offset, _value in poll.records:
            tp = (topic, partition)
            positions = committed_index[tp] if poll.read_committed else index[tp]
            position = positions.get(offset)
            if position is None:  # an aborted record read under read_committed: reported as aborted-read
                continue
            key = (poll.consumer, poll.session, tp)
            previous = last.get(key)
            last[key] = (position, number)
            if previous is None:
                continue
            inside = previous[1] == number
            example = {
                "consumer": poll.consumer,
                "partition": list(tp),
                "t": round(poll.t, 3),
                "from_position": previous[0],
                "to_position": position,
                "to_offset": offset,
            }
            if position <= previous[0]:
                result.add("int-nonmonotonic-poll" if inside else "nonmonotonic-poll", example)
            elif position > previous[0] + 1:
                result.add("int-poll-skip" if inside else "poll-skip", example)


def _check_transactions(history: History, result: CheckResult) -> None:
    txn_of = {v: t for t in history.txns for v in t.values}
    reads = [(p, True) for p in history.polls] + [(p, False) for p in history.final_reads]
    for poll, live in reads:
        if not poll.read_committed:
            continue
        for topic, partition, offset, value in poll.records:
            txn = txn_of.get(value)
            if txn is None:
                continue
            example = {"value": value, "txn": txn.txn, "partition": [topic, partition], "offset": offset}
            if txn.outcome == "aborted":
                result.add("aborted-read", {**example, "consumer": poll.consumer})
            elif live and (txn.t_end_start is None or poll.t < txn.t_end_start) and txn.outcome != "unknown":
                result.add("uncommitted-read", {**example, "read_at": round(poll.t, 3)})
    _check_cycles(history, result)


def _check_cycles(history: History, result: CheckResult) -> None:
    """G0 and G1c between committed transactions (:mod:`chaos.cycles`). Each transactional
    workload runs one transaction at a time on topics no other transactional producer writes, so
    Kafka's legitimate write cycles between concurrent producers cannot occur: any cycle is an
    anomaly."""
    for kind, examples in find_cycles(history).items():
        for example in examples:
            result.add(kind, example)


def _check_offsets(history: History, result: CheckResult) -> None:
    last: dict[tuple[str, str, int], tuple[int, float]] = {}
    for obs in sorted(history.offsets, key=lambda o: o.t):
        key = (obs.group, obs.topic, obs.partition)
        previous = last.get(key)
        if previous is not None and obs.offset < previous[0]:
            result.add(
                "offsets-backwards",
                {
                    "group": obs.group,
                    "partition": [obs.topic, obs.partition],
                    "from": previous[0],
                    "to": obs.offset,
                    "t": round(obs.t, 3),
                },
            )
        if previous is None or obs.offset >= previous[0]:
            last[key] = (obs.offset, obs.t)


def _window(start: float, partitions: Iterable[list[tuple[float, float]]]) -> float | None:
    """The largest, over ``partitions`` (each a sorted list of (send t, ack t)), of the time from
    ``start`` to the first acknowledgement of a record sent after it; None if one never had any."""
    windows: list[float] = []
    for entries in partitions:
        firsts = [ack_t for sent, ack_t in entries if sent >= start]
        if not firsts:
            return None
        windows.append(min(firsts) - start)
    return max(windows) if windows else None


def unavailability(history: History) -> dict[str, Any]:
    """Per fault kind: each fault's window (s) and their median and maximum; a fault after which
    no record sent was ever acknowledged counts as unavailable to the end (``None`` in the list)."""
    send_t = {s.value: s.t for s in history.sends}
    share_topics = {t for topics in history.share_groups.values() for t in topics}
    acks_by_tp: dict[TP, list[tuple[float, float]]] = defaultdict(list)  # (send t, ack t)
    for ack in history.acks:
        if ack.topic in share_topics:
            continue
        sent = send_t.get(ack.value)
        if sent is not None:
            acks_by_tp[(ack.topic, ack.partition)].append((sent, ack.t))
    for entries in acks_by_tp.values():
        entries.sort()
    per_kind: dict[str, list[float | None]] = defaultdict(list)
    per_fault: list[dict[str, Any]] = []
    for fault in history.faults:
        window_all = _window(fault.start, acks_by_tp.values())
        window = window_all if fault.partition is None else _window(fault.start, [acks_by_tp.get(fault.partition, [])])
        per_kind[fault.kind].append(window)
        per_fault.append(
            {
                "kind": fault.kind,
                "targets": fault.targets,
                "start": round(fault.start, 3),
                "partition": None if fault.partition is None else list(fault.partition),
                "window_s": window,
                "window_all_s": window_all,
                "elected_s": fault.elected_s,
            }
        )
    summary: dict[str, Any] = {}
    for kind, kind_windows in sorted(per_kind.items()):
        known = [w for w in kind_windows if w is not None]
        summary[kind] = {
            "faults": len(kind_windows),
            "median_s": round(statistics.median(known), 3) if known else None,
            "max_s": round(max(known), 3) if known else None,
            "never_recovered": sum(1 for w in kind_windows if w is None),
        }
        elections = [f.elected_s for f in history.faults if f.kind == kind and f.elected_s is not None]
        if elections:
            summary[kind]["election_median_s"] = round(statistics.median(elections), 3)
            summary[kind]["election_max_s"] = round(max(elections), 3)
    return {"per_kind": summary, "per_fault": per_fault}
