"""Combining a share-partition's state batches (Kafka's ``PersisterStateBatchCombiner``).

:func:`combine_state_batches` takes the batches kept so far, the batches of a write and the start
offset, and returns one sorted list of disjoint batches:

- with a start offset other than -1, batches ending before it are dropped and a batch holding it
  is cut to begin there;
- where batches overlap, each offset takes the batch with the higher delivery count, then (equal
  counts) the higher delivery state (AVAILABLE 0 < ACQUIRED 1 < ACKNOWLEDGED 2 < ARCHIVED 4), as
  Kafka orders them. A share-partition's leader only ever raises an offset's delivery count or
  moves it to a later state, so this is "the newer batch wins" for the writes it sends;
- adjacent (contiguous or overlapping) pieces with the same state and count become one batch.

It runs in O(n log n) over the batches' boundaries (a heap of the batches covering the current
offset). Pure: safe from any thread.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from odradek.share.state import StateBatch

__all__ = ["combine_state_batches"]


def _prune(batches: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    if start_offset == -1:
        return list(batches)
    kept = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        kept.append(b)
    return kept


def combine_state_batches(
    batches_so_far: Iterable[StateBatch], new_batches: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """See the module docstring. Empty input gives an empty tuple; a batch whose last offset is
    below its first covers nothing and is dropped."""
    batches = sorted(
        (b for b in _prune([*batches_so_far, *new_batches], start_offset) if b.first_offset <= b.last_offset),
        key=lambda b: b.first_offset,
    )
    if not batches:
        return ()
    boundaries = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    active: list[tuple[int, int, int, int, StateBatch]] = []
    """(-count, -state, -index, last offset, batch): the best covering batch on top."""
    out: list[StateBatch] = []
    i = 0
    for at, next_boundary in itertools.pairwise(boundaries):
        while i < len(batches) and batches[i].first_offset <= at:
            b = batches[i]
            heapq.heappush(active, (-b.delivery_count, -int(b.delivery_state), -i, b.last_offset, b))
            i += 1
        while active and active[0][3] < at:
            heapq.heappop(active)
        if not active:
            continue
        best = active[0][4]
        last = next_boundary - 1
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.last_offset + 1 == at
            and (prev.delivery_state, prev.delivery_count) == (best.delivery_state, best.delivery_count)
        ):
            out[-1] = StateBatch(prev.first_offset, last, prev.delivery_state, prev.delivery_count)
        else:
            out.append(StateBatch(at, last, best.delivery_state, best.delivery_count))
    return tuple(out)
