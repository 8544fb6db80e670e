"""One share-partition on its partition's leader (KIP-932; Kafka's ``SharePartition``).

The leader keeps, for every offset of the *in-flight window* ``[start_offset, end_offset)``, a
:class:`~.state.DeliveryState`, a delivery count and, for ACQUIRED offsets, the member holding the
record and the deadline of its lock. Offsets below ``start_offset`` (the SPSO) are done; offsets at
or after ``end_offset`` were never acquired.

The window is a sorted list of *runs* ``(first, last, state, count, owner, deadline)`` that cover it
contiguously; a change to part of a run splits it, and equal neighbours (same state and count, and
for ACQUIRED the same owner and deadline) are merged again, so every operation costs the runs it
touches (plus a binary search), never the number of offsets it covers.

Life of an offset: ``acquire`` hands AVAILABLE (or new) offsets to a member (ACQUIRED, delivery
count + 1, locked until ``now + record_lock_duration_ms``); the member's acknowledgement makes it
ACKNOWLEDGED (ACCEPT), AVAILABLE again (RELEASE), ARCHIVED (REJECT, GAP) or keeps it with a fresh
lock (RENEW). A release, a lock expiry or the member leaving makes it AVAILABLE again, or ARCHIVED
once its delivery count reached ``delivery_count_limit``. An AVAILABLE offset whose count already
reached the limit (only possible from a loaded state) is archived, not acquired, when next read.
After every change the SPSO moves past the ACKNOWLEDGED/ARCHIVED runs at the window's start.

The durable view (:meth:`SharePartition.state_batches` with :attr:`SharePartition.start_offset`) is
what the share coordinator keeps; acquisition is never persisted (an ACQUIRED run is reported
AVAILABLE with its delivery count), and :attr:`SharePartition.is_dirty` tells the caller when it
changed since the last write.

A pure, synchronous state machine without I/O: event loop only (the caller serializes calls).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.errors import ErrorCode
from odradek.share.state import (
    UNINITIALIZED_STATE_EPOCH,
    AcknowledgeType,
    DeliveryState,
    SharePartitionKey,
    ShareState,
    StateBatch,
)

__all__ = ["AcquiredRecords", "SharePartition"]

_AVAILABLE = DeliveryState.AVAILABLE
_ACQUIRED = DeliveryState.ACQUIRED
_ACKNOWLEDGED = DeliveryState.ACKNOWLEDGED
_ARCHIVED = DeliveryState.ARCHIVED
_DONE = frozenset((_ACKNOWLEDGED, _ARCHIVED))
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """One entry of ShareFetch's ``AcquiredRecords``: offsets ``first_offset..last_offset``
    (inclusive), all acquired with this delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class _Run:
    """Offsets ``first..last`` (inclusive) in one state; ``owner``/``deadline`` only when ACQUIRED."""

    first: int
    last: int
    state: DeliveryState
    count: int
    owner: str | None = None
    deadline: int | None = None

    def same(self, other: _Run) -> bool:
        """Whether ``other``, right after this run, may merge into it."""
        return (
            self.state == other.state
            and self.count == other.count
            and self.owner == other.owner
            and self.deadline == other.deadline
        )


_RunPredicate = Callable[[_Run], bool]


def _merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ranges sorted, with empty ones dropped and overlapping or adjacent ones merged."""
    out: list[tuple[int, int]] = []
    for first, last in sorted((int(a), int(b)) for a, b in ranges if a <= b):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def _segments(
    batches: Sequence[tuple[int, int]], archive: Sequence[tuple[int, int]], read_offset: int | None
) -> list[tuple[int, int, bool]]:
    """What a log read found: ``(first, last, deliverable)`` covering ``[lo, hi]`` contiguously.

    ``lo`` is the first offset read (``read_offset`` when given and lower), ``hi`` the last one.
    Deliverable: in a batch and not in an ``archive`` range. Everything else (archive ranges,
    offsets between batches, which hold no record) is not.
    """
    deliver, drop = _merged(batches), _merged(archive)
    if not deliver and not drop:
        return []
    lo = min(r[0] for r in deliver[:1] + drop[:1])
    hi = max(r[1] for r in deliver[-1:] + drop[-1:])
    if read_offset is not None and read_offset < lo:
        lo = read_offset
    kept: list[tuple[int, int]] = []
    j = 0
    for first, last in deliver:
        while j < len(drop) and drop[j][1] < first:
            j += 1
        cursor, k = first, j
        while k < len(drop) and drop[k][0] <= last:
            if drop[k][0] > cursor:
                kept.append((cursor, drop[k][0] - 1))
            cursor = max(cursor, drop[k][1] + 1)
            k += 1
        if cursor <= last:
            kept.append((cursor, last))
    out: list[tuple[int, int, bool]] = []
    cursor = lo
    for first, last in kept:
        if first > cursor:
            out.append((cursor, first - 1, False))
        out.append((first, last, True))
        cursor = last + 1
    if cursor <= hi:
        out.append((cursor, hi, False))
    return out


class SharePartition:
    """The in-flight records of one share-partition, on its partition's leader. Event loop only.

    Offsets are absolute log offsets; ranges are inclusive. Until :meth:`load` the window is empty
    at offset 0.
    """

    def __init__(
        self,
        key: SharePartitionKey,
        *,
        record_lock_duration_ms: int,
        delivery_count_limit: int,
        max_in_flight_records: int,
    ) -> None:
        if record_lock_duration_ms < 0 or delivery_count_limit < 1 or max_in_flight_records < 1:
            raise ValueError("lock duration must be >= 0, delivery count limit and max in-flight records >= 1")
        self.key = key
        self.record_lock_duration_ms = record_lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight_records = max_in_flight_records
        self._runs: list[_Run] = []
        self._firsts: list[int] = []  # _runs[i].first, for bisect
        self._start = 0
        self._end = 0
        self._state_epoch = UNINITIALIZED_STATE_EPOCH
        self._dirty = False

    # -- views -----------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The share-partition start offset (SPSO): every offset below it is done."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The first offset never acquired (SPEO + 1); ``== start_offset`` when the window is empty."""
        return self._end

    @property
    def state_epoch(self) -> int:
        """The state epoch of the loaded state (0 before :meth:`load`)."""
        return self._state_epoch

    @property
    def is_dirty(self) -> bool:
        """Whether the durable view (start offset, :meth:`state_batches`) changed since :meth:`mark_clean`."""
        return self._dirty

    def mark_clean(self) -> None:
        """The caller wrote the current durable view."""
        self._dirty = False

    def in_flight(self) -> list[tuple[int, int, DeliveryState, int, str | None]]:
        """The window's runs: ``(first, last, state, delivery_count, owner member id or None)``."""
        return [(r.first, r.last, r.state, r.count, r.owner) for r in self._runs]

    def acquired_count(self, member_id: str | None = None) -> int:
        """How many offsets are ACQUIRED (by ``member_id`` when given)."""
        return sum(
            r.last - r.first + 1
            for r in self._runs
            if r.state == _ACQUIRED and (member_id is None or r.owner == member_id)
        )

    def next_lock_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED run (for the caller's timer), or None."""
        deadlines = [r.deadline for r in self._runs if r.deadline is not None]
        return min(deadlines) if deadlines else None

    def fetch_offset(self) -> int | None:
        """Where the next log read starts: the first AVAILABLE offset, else ``end_offset``.

        None when nothing can be acquired: no AVAILABLE offset and the window already holds
        ``max_in_flight_records`` offsets.
        """
        for run in self._runs:
            if run.state == _AVAILABLE:
                return run.first
        if self._end - self._start >= self.max_in_flight_records:
            return None
        return self._end

    def state_batches(self) -> list[StateBatch]:
        """The durable view to write (WriteShareGroupState), with :attr:`start_offset`.

        Every run except AVAILABLE ones with delivery count 0, ACQUIRED reported as AVAILABLE
        (with its delivery count), merged into maximal contiguous runs of equal (state, count);
        sorted, all at or after the start offset.
        """
        out: list[StateBatch] = []
        for run in self._runs:
            state = _AVAILABLE if run.state == _ACQUIRED else run.state
            if state == _AVAILABLE and run.count == 0:
                continue
            if out:
                prev = out[-1]
                same = (prev.delivery_state, prev.delivery_count) == (state, run.count)
                if same and prev.last_offset + 1 == run.first:
                    out[-1] = StateBatch(prev.first_offset, run.last, state, run.count)
                    continue
            out.append(StateBatch(run.first, run.last, state, run.count))
        return out

    # -- loading and the log start ---------------------------------------------------------------

    def load(self, state: ShareState | None, *, log_start_offset: int, reset_offset: int) -> None:
        """Take the state the persister read (replaces anything held).

        ``state`` None, or its start offset -1 (initialized, never placed): the window is empty at
        ``reset_offset`` (which the caller computed from ``share.auto.offset.reset``) and the view
        is dirty (the placed start offset is to be written). Otherwise the SPSO is
        ``max(state.start_offset, log_start_offset)``; the persisted batches (clipped to it) become
        the window, offsets between them AVAILABLE with count 0, persisted ACQUIRED taken as
        AVAILABLE; the window ends after the last batch. The view is dirty only if the start
        offset moved (log start, or done runs at the start).
        """
        self._runs.clear()
        self._firsts.clear()
        self._state_epoch = state.state_epoch if state is not None else UNINITIALIZED_STATE_EPOCH
        if state is None or state.start_offset < 0:
            self._start = self._end = reset_offset
            self._dirty = True
            return
        start = max(state.start_offset, log_start_offset)
        cursor = start
        for batch in sorted(state.batches, key=lambda b: b.first_offset):
            first, last = max(batch.first_offset, cursor), batch.last_offset
            if first > last:
                continue
            if first > cursor:
                self._runs.append(_Run(cursor, first - 1, _AVAILABLE, 0))
            kept = DeliveryState(batch.delivery_state)
            self._runs.append(_Run(first, last, _AVAILABLE if kept == _ACQUIRED else kept, batch.delivery_count))
            cursor = last + 1
        self._firsts[:] = [r.first for r in self._runs]
        self._start, self._end = start, cursor
        self._coalesce(start, cursor)
        self._dirty = start != state.start_offset
        self._advance()

    def move_log_start(self, log_start_offset: int) -> bool:
        """The log start moved (retention, DeleteRecords): offsets below it are gone, acquired ones
        too (their acknowledgements then fail). The SPSO, and the end offset if below, move to it.
        True if anything changed."""
        if log_start_offset <= self._start:
            return False
        if log_start_offset >= self._end:
            self._runs.clear()
            self._firsts.clear()
            self._start = self._end = log_start_offset
        else:
            i = self._split_at(log_start_offset)
            del self._runs[:i]
            del self._firsts[:i]
            self._start = log_start_offset
            self._advance()
        self._dirty = True
        return True

    # -- acquisition -----------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        batches: Sequence[tuple[int, int]],
        *,
        max_records: int,
        now_ms: int,
        archive: Sequence[tuple[int, int]] = (),
        read_offset: int | None = None,
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what a log read returned; the runs acquired, sorted.

        ``batches``: ``(base_offset, last_offset)`` of every batch the read returned, in order
        (offsets between consecutive batches hold no record). ``archive``: ranges not to deliver
        (aborted transactional records under read_committed). ``read_offset``: where the read
        started (normally :meth:`fetch_offset`); when given, offsets from it to the first batch
        hold no record either. Offsets below the SPSO, and in-window offsets not AVAILABLE, are
        skipped. Deliverable offsets that are AVAILABLE in the window, or new (at or after
        ``end_offset``), become ACQUIRED by the member, delivery count + 1, locked until
        ``now_ms + record_lock_duration_ms``; at most ``max_records`` of them. Offsets without a
        record and archive ranges become ARCHIVED (new ones with count 0); an AVAILABLE offset
        whose count reached the limit is archived instead of acquired. New offsets stop where
        the window would exceed ``max_in_flight_records``. The SPSO then advances.
        """
        segments = _segments(batches, archive, read_offset)
        if max_records <= 0 or not segments:
            return []
        deadline = now_ms + self.record_lock_duration_ms
        got: list[AcquiredRecords] = []
        quota = max_records
        touched_from = max(segments[0][0], self._start)
        for first, last, deliverable in segments:
            if last < self._start:
                continue
            first = max(first, self._start)
            if first < self._end:
                quota = self._take_window(member_id, first, min(last, self._end - 1), deliverable, quota, deadline, got)
                if quota == 0:
                    break
            if last < self._end:
                continue
            if first > self._end and self._extend(first - 1, _ARCHIVED, 0, None, None) < first - 1:
                break
            base = self._end
            if not deliverable:
                if self._extend(last, _ARCHIVED, 0, None, None) < last:
                    break
                continue
            want = min(last, base + quota - 1)
            reached = self._extend(want, _ACQUIRED, 1, member_id, deadline)
            if reached >= base:
                got.append(AcquiredRecords(base, reached, 1))
                quota -= reached - base + 1
            if reached < want or quota == 0:
                break
        self._coalesce(touched_from, min(segments[-1][1], self._end))
        self._advance()
        return _joined(got)

    def _take_window(
        self,
        member_id: str,
        first: int,
        last: int,
        deliverable: bool,
        quota: int,
        deadline: int,
        got: list[AcquiredRecords],
    ) -> int:
        """Acquire (or archive) the AVAILABLE offsets of ``first..last`` inside the window; the
        quota left. Leaves runs split: the caller coalesces."""
        pos = first
        while pos <= last and quota > 0:
            run = self._runs[bisect.bisect_right(self._firsts, pos) - 1]
            upto = min(run.last, last)
            if run.state == _AVAILABLE:
                archive = not deliverable or run.count >= self.delivery_count_limit
                if not archive:
                    upto = min(upto, pos + quota - 1)
                i, _ = self._carve(pos, upto)
                piece = self._runs[i]
                if archive:
                    piece.state = _ARCHIVED
                else:
                    piece.state, piece.owner, piece.deadline = _ACQUIRED, member_id, deadline
                    piece.count += 1
                    got.append(AcquiredRecords(pos, upto, piece.count))
                    quota -= upto - pos + 1
                self._dirty = True
            pos = upto + 1
        return quota

    def _extend(self, last: int, state: DeliveryState, count: int, owner: str | None, deadline: int | None) -> int:
        """Append new offsets ``end_offset..last`` as one run, as far as the window allows; the last
        offset appended (``end_offset - 1`` if none). ARCHIVED offsets past an empty window just
        move it."""
        if last < self._end:
            return last
        if state in _DONE and not self._runs:
            self._start = self._end = last + 1
            self._dirty = True
            return last
        room = self.max_in_flight_records - (self._end - self._start)
        if room <= 0:
            self._advance()
            room = self.max_in_flight_records - (self._end - self._start)
            if room <= 0:
                return self._end - 1
        last = min(last, self._end + room - 1)
        run = _Run(self._end, last, state, count, owner, deadline)
        if self._runs and self._runs[-1].same(run):
            self._runs[-1].last = last
        else:
            self._runs.append(run)
            self._firsts.append(run.first)
        self._end = last + 1
        self._dirty = True
        return last

    # -- acknowledgement, release, expiry --------------------------------------------------------

    def acknowledge(
        self,
        member_id: str,
        batches: Sequence[tuple[int, int, Sequence[AcknowledgeType | int]]],
        now_ms: int,
    ) -> ErrorCode | None:
        """Apply ShareFetch/ShareAcknowledge AcknowledgementBatches of ``member_id``; None on success.

        Each batch is ``(first_offset, last_offset, types)``, ``types`` one entry for the whole
        range or one per offset. All or nothing: INVALID_REQUEST when the batches are not sorted
        and disjoint, a range is empty or negative, ``types`` has another length or holds an
        unknown type; INVALID_RECORD_STATE when any offset is not ACQUIRED by the member (outside
        the window, another member's, already acknowledged, its lock expired). Then ACCEPT makes
        ACKNOWLEDGED, RELEASE AVAILABLE (ARCHIVED at the delivery count limit), REJECT and GAP
        ARCHIVED, RENEW keeps ACQUIRED with a lock restarted at ``now_ms``; the SPSO advances.
        """
        prev_last = -1
        for first, last, types in batches:
            if first < 0 or first > last or first <= prev_last:
                return ErrorCode.invalid_request
            if len(types) != 1 and len(types) != last - first + 1:
                return ErrorCode.invalid_request
            if any(int(t) not in _ACK_TYPES for t in types):
                return ErrorCode.invalid_request
            prev_last = last
        for first, last, _ in batches:
            if not self._held_by(member_id, first, last):
                return ErrorCode.invalid_record_state
        for first, last, types in batches:
            if len(types) == 1:
                self._apply(first, last, AcknowledgeType(int(types[0])), now_ms)
                continue
            pos = first
            for kind, group in itertools.groupby(int(t) for t in types):
                n = sum(1 for _ in group)
                self._apply(pos, pos + n - 1, AcknowledgeType(kind), now_ms)
                pos += n
        self._advance()
        return None

    def _held_by(self, member_id: str, first: int, last: int) -> bool:
        """Whether every offset of ``first..last`` is ACQUIRED by ``member_id``."""
        if first < self._start or last >= self._end:
            return False
        i = bisect.bisect_right(self._firsts, first) - 1
        while i < len(self._runs) and self._runs[i].first <= last:
            run = self._runs[i]
            if run.state != _ACQUIRED or run.owner != member_id:
                return False
            i += 1
        return True

    def _apply(self, first: int, last: int, kind: AcknowledgeType, now_ms: int) -> None:
        """One acknowledgement type over ``first..last``, all ACQUIRED (checked by the caller)."""
        i, j = self._carve(first, last)
        for run in self._runs[i:j]:
            if kind == AcknowledgeType.RENEW:
                run.deadline = now_ms + self.record_lock_duration_ms
                continue
            if kind == AcknowledgeType.RELEASE:
                self._release(run)
            else:
                run.state = _ACKNOWLEDGED if kind == AcknowledgeType.ACCEPT else _ARCHIVED
                run.owner = run.deadline = None
            self._dirty = True
        self._coalesce(first, last)

    def _release(self, run: _Run) -> None:
        """An ACQUIRED run given back: AVAILABLE, or ARCHIVED once its count reached the limit."""
        run.owner = run.deadline = None
        if run.count >= self.delivery_count_limit:
            run.state = _ARCHIVED
            self._dirty = True  # AVAILABLE (as reported while acquired) -> ARCHIVED
        else:
            run.state = _AVAILABLE

    def release_member(self, member_id: str) -> bool:
        """The member left or its share session closed: its ACQUIRED offsets are released (AVAILABLE,
        or ARCHIVED at the delivery count limit). True if anything changed."""
        return self._release_where(lambda r: r.owner == member_id)

    def expire_locks(self, now_ms: int) -> bool:
        """Release the ACQUIRED offsets whose lock deadline is ``<= now_ms``. True if any."""
        return self._release_where(lambda r: r.deadline is not None and r.deadline <= now_ms)

    def _release_where(self, predicate: _RunPredicate) -> bool:
        changed = False
        for run in self._runs:
            if run.state == _ACQUIRED and predicate(run):
                self._release(run)
                changed = True
        if changed:
            self._coalesce(self._start, self._end)
            self._advance()
        return changed

    # -- runs ------------------------------------------------------------------------------------

    def _split_at(self, offset: int) -> int:
        """Make a run start at ``offset`` (inside the window, or ``end_offset``); its index."""
        if offset >= self._end:
            return len(self._runs)
        i = bisect.bisect_right(self._firsts, offset) - 1
        run = self._runs[i]
        if run.first == offset:
            return i
        self._runs.insert(i + 1, _Run(offset, run.last, run.state, run.count, run.owner, run.deadline))
        self._firsts.insert(i + 1, offset)
        run.last = offset - 1
        return i + 1

    def _carve(self, first: int, last: int) -> tuple[int, int]:
        """Split runs so that ``first..last`` (inside the window) is exactly ``_runs[i:j]``."""
        i = self._split_at(first)
        return i, self._split_at(last + 1)

    def _coalesce(self, first: int, last: int) -> None:
        """Merge equal neighbours among the runs over ``first..last`` and the runs either side."""
        if not self._runs:
            return
        lo = max(bisect.bisect_right(self._firsts, first) - 2, 0)
        hi = min(bisect.bisect_right(self._firsts, last) + 1, len(self._runs))
        merged: list[_Run] = []
        for run in self._runs[lo:hi]:
            if merged and merged[-1].same(run):
                merged[-1].last = run.last
            else:
                merged.append(run)
        if len(merged) != hi - lo:
            self._runs[lo:hi] = merged
            self._firsts[lo:hi] = [r.first for r in merged]

    def _advance(self) -> None:
        """Drop the ACKNOWLEDGED/ARCHIVED runs at the window's start and move the SPSO past them."""
        k = 0
        while k < len(self._runs) and self._runs[k].state in _DONE:
            k += 1
        if k:
            del self._runs[:k]
            del self._firsts[:k]
        start = self._runs[0].first if self._runs else self._end
        if start != self._start:
            self._start = start
            self._dirty = True


def _joined(runs: list[AcquiredRecords]) -> list[AcquiredRecords]:
    """Sorted acquired runs with contiguous ones of equal delivery count merged."""
    out: list[AcquiredRecords] = []
    for run in sorted(runs, key=lambda r: r.first_offset):
        if out and out[-1].last_offset + 1 == run.first_offset and out[-1].delivery_count == run.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first_offset, run.last_offset, run.delivery_count)
        else:
            out.append(run)
    return out
