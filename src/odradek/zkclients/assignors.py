"""Partition assignment of the ZooKeeper consumer group (Kafka 0.8.2's ``RangeAssignor`` and
``RoundRobinAssignor`` for ``partition.assignment.strategy`` = ``range`` | ``roundrobin``).

A consumer thread id is ``<consumer id>-<thread index>``; every consumer computes the same answer
from the same inputs, so each one only keeps its own threads' share:

- **range**, per topic: the topic's consumer threads sorted as strings, its partitions sorted;
  thread *i* of *n* takes ``P // n`` partitions plus one more while ``i < P % n``, in order.
- **roundrobin**: every subscribed (topic, partition) sorted by the Java ``hashCode`` of
  ``"[topic,partition]"`` (then topic, partition), dealt in turn to all threads sorted as strings
  (every consumer must subscribe to the same topics with the same thread count; ValueError
  otherwise).

Pure functions: safe anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.protocol.java_hash import java_string_hash

__all__ = ["STRATEGIES", "range_assign", "roundrobin_assign", "thread_ids"]

Assignment = dict[str, list[tuple[str, int]]]
"""consumer thread id -> [(topic, partition)]."""


def thread_ids(consumer_id: str, threads: int) -> list[str]:
    return [f"{consumer_id}-{i}" for i in range(threads)]


def range_assign(subscriptions: Mapping[str, Mapping[str, int]], partitions: Mapping[str, list[int]]) -> Assignment:
    """``subscriptions``: consumer id -> {topic: threads}; ``partitions``: topic -> partition ids."""
    out: Assignment = {}
    for topic in sorted({t for sub in subscriptions.values() for t in sub}):
        threads = sorted(
            tid for cid, sub in subscriptions.items() if topic in sub for tid in thread_ids(cid, sub[topic])
        )
        parts = sorted(partitions.get(topic, []))
        if not threads:
            continue
        per, extra = divmod(len(parts), len(threads))
        for i, tid in enumerate(threads):
            start = per * i + min(i, extra)
            count = per + (1 if i < extra else 0)
            out.setdefault(tid, []).extend((topic, p) for p in parts[start : start + count])
    return out


def roundrobin_assign(
    subscriptions: Mapping[str, Mapping[str, int]], partitions: Mapping[str, list[int]]
) -> Assignment:
    subs = list(subscriptions.values())
    if any(dict(s) != dict(subs[0]) for s in subs[1:]):
        raise ValueError("roundrobin needs every consumer of the group to subscribe to the same topics and threads")
    threads = sorted(tid for cid, sub in subscriptions.items() for tid in thread_ids(cid, max(sub.values(), default=0)))
    topics = sorted(subs[0]) if subs else []
    everything = [(t, p) for t in topics for p in sorted(partitions.get(t, []))]
    everything.sort(key=lambda tp: (java_string_hash(f"[{tp[0]},{tp[1]}]"), tp[0], tp[1]))
    out: Assignment = {}
    for i, tp in enumerate(everything):
        if threads:
            out.setdefault(threads[i % len(threads)], []).append(tp)
    return out


STRATEGIES = {"range": range_assign, "roundrobin": roundrobin_assign}
