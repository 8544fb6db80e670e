"""SharePartition: acquisition, locks, acknowledgements, the SPSO, the durable view, and random
sequences of operations from several members checked against the share-partition's invariants."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from odradek.errors import ErrorCode
from odradek.share.share_partition import AcquiredRecords, SharePartition
from odradek.share.state import AcknowledgeType, DeliveryState, SharePartitionKey, ShareState, StateBatch

KEY = SharePartitionKey("group", uuid.UUID(int=7), 0)
A = AcknowledgeType
S = DeliveryState
LOCK_MS = 1000


def make(*, limit: int = 3, max_in_flight: int = 100, start: int = 0) -> SharePartition:
    sp = SharePartition(
        KEY, record_lock_duration_ms=LOCK_MS, delivery_count_limit=limit, max_in_flight_records=max_in_flight
    )
    sp.load(None, log_start_offset=0, reset_offset=start)
    return sp


def ar(first: int, last: int, count: int = 1) -> AcquiredRecords:
    return AcquiredRecords(first, last, count)


# -- load ------------------------------------------------------------------------------------------


def test_load_uninitialized_places_the_window_at_the_reset_offset() -> None:
    sp = make(start=42)
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (42, 42, 0)
    assert sp.fetch_offset() == 42
    assert sp.in_flight() == [] and sp.state_batches() == []
    assert sp.is_dirty

    sp.load(ShareState(state_epoch=3, start_offset=-1), log_start_offset=0, reset_offset=7)
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (7, 7, 3)


def test_load_persisted_batches_become_the_window() -> None:
    sp = make()
    batches = (
        StateBatch(12, 14, S.ARCHIVED, 1),
        StateBatch(15, 19, S.AVAILABLE, 2),
        StateBatch(22, 24, S.ACKNOWLEDGED, 1),
        StateBatch(25, 25, S.ACQUIRED, 1),
    )
    sp.load(ShareState(state_epoch=2, start_offset=10, batches=batches), log_start_offset=0, reset_offset=99)
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (10, 26, 2)
    assert sp.in_flight() == [
        (10, 11, S.AVAILABLE, 0, None),
        (12, 14, S.ARCHIVED, 1, None),
        (15, 19, S.AVAILABLE, 2, None),
        (20, 21, S.AVAILABLE, 0, None),
        (22, 24, S.ACKNOWLEDGED, 1, None),
        (25, 25, S.AVAILABLE, 1, None),
    ]
    assert sp.state_batches() == [*batches[:3], StateBatch(25, 25, S.AVAILABLE, 1)]
    assert sp.fetch_offset() == 10
    assert not sp.is_dirty


def test_load_clips_to_the_log_start_and_advances_past_done_runs() -> None:
    sp = make()
    batches = (StateBatch(10, 11, S.ARCHIVED, 1), StateBatch(12, 13, S.AVAILABLE, 1))
    sp.load(ShareState(state_epoch=1, start_offset=10, batches=batches), log_start_offset=11, reset_offset=0)
    assert (sp.start_offset, sp.end_offset) == (12, 14)
    assert sp.in_flight() == [(12, 13, S.AVAILABLE, 1, None)]
    assert sp.is_dirty

    sp.load(ShareState(state_epoch=1, start_offset=10, batches=batches), log_start_offset=50, reset_offset=0)
    assert (sp.start_offset, sp.end_offset, sp.in_flight()) == (50, 50, [])


def test_available_at_the_limit_from_a_loaded_state_is_archived_not_acquired() -> None:
    sp = make(limit=3)
    state = ShareState(state_epoch=1, start_offset=0, batches=(StateBatch(0, 4, S.AVAILABLE, 3),))
    sp.load(state, log_start_offset=0, reset_offset=0)
    assert sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0) == [ar(5, 9)]
    assert sp.start_offset == 5


# -- acquire ---------------------------------------------------------------------------------------


def test_acquire_new_records() -> None:
    sp = make()
    sp.mark_clean()
    assert sp.acquire("m1", [(0, 4), (5, 9)], max_records=100, now_ms=5) == [ar(0, 9)]
    assert (sp.start_offset, sp.end_offset, sp.fetch_offset()) == (0, 10, 10)
    assert sp.in_flight() == [(0, 9, S.ACQUIRED, 1, "m1")]
    assert sp.next_lock_deadline() == 5 + LOCK_MS
    assert sp.acquired_count("m1") == 10 and sp.acquired_count("m2") == 0 and sp.acquired_count() == 10
    assert sp.is_dirty
    assert sp.state_batches() == [StateBatch(0, 9, S.AVAILABLE, 1)]


def test_acquire_at_most_max_records_then_another_member_gets_the_rest() -> None:
    sp = make()
    assert sp.acquire("m1", [(0, 9)], max_records=4, now_ms=0) == [ar(0, 3)]
    assert sp.end_offset == 4
    assert sp.acquire("m2", [(0, 9)], max_records=100, now_ms=0) == [ar(4, 9)]
    assert sp.in_flight() == [(0, 3, S.ACQUIRED, 1, "m1"), (4, 9, S.ACQUIRED, 1, "m2")]
    assert sp.acquire("m3", [(0, 9)], max_records=100, now_ms=0) == []
    assert sp.acquire("m3", [(0, 9)], max_records=0, now_ms=0) == []
    assert sp.acquire("m3", [], max_records=10, now_ms=0) == []


def test_window_full_fetch_offset_none_until_something_is_available() -> None:
    sp = make(max_in_flight=5)
    assert sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0) == [ar(0, 4)]
    assert sp.fetch_offset() is None
    assert sp.acquire("m2", [(5, 9)], max_records=100, now_ms=0) == []
    assert sp.acknowledge("m1", [(2, 2, [A.RELEASE])], now_ms=0) is None
    assert sp.fetch_offset() == 2
    assert sp.acknowledge("m1", [(0, 1, [A.ACCEPT])], now_ms=0) is None
    assert sp.start_offset == 2 and sp.fetch_offset() == 2
    assert sp.acquire("m2", [(2, 9)], max_records=100, now_ms=0) == [ar(2, 2, 2), ar(5, 6)]
    assert sp.end_offset == 7 and sp.fetch_offset() is None


def test_redelivery_counts_and_skipping_done_or_held_offsets() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    assert sp.acknowledge("m1", [(2, 3, [A.RELEASE]), (8, 9, [A.RELEASE])], now_ms=0) is None
    assert sp.acknowledge("m1", [(0, 1, [A.ACCEPT])], now_ms=0) is None
    assert sp.fetch_offset() == 2
    # the read starts before the SPSO and covers offsets acknowledged or held by m1
    got = sp.acquire("m2", [(0, 4), (5, 14)], max_records=100, now_ms=0)
    assert got == [ar(2, 3, 2), ar(8, 9, 2), ar(10, 14, 1)]
    assert sp.in_flight() == [
        (2, 3, S.ACQUIRED, 2, "m2"),
        (4, 7, S.ACQUIRED, 1, "m1"),
        (8, 9, S.ACQUIRED, 2, "m2"),
        (10, 14, S.ACQUIRED, 1, "m2"),
    ]


def test_archive_ranges_and_gaps_between_batches_are_archived() -> None:
    sp = make()
    got = sp.acquire("m1", [(0, 2), (6, 8), (9, 11)], max_records=100, now_ms=0, archive=[(9, 11)])
    assert got == [ar(0, 2), ar(6, 8)]
    assert sp.end_offset == 12
    assert sp.in_flight() == [
        (0, 2, S.ACQUIRED, 1, "m1"),
        (3, 5, S.ARCHIVED, 0, None),
        (6, 8, S.ACQUIRED, 1, "m1"),
        (9, 11, S.ARCHIVED, 0, None),
    ]
    # new offsets start after a gap past the end offset: the gap is archived
    assert sp.acquire("m1", [(15, 19)], max_records=100, now_ms=0) == [ar(15, 19)]
    assert sp.in_flight()[-2:] == [(9, 14, S.ARCHIVED, 0, None), (15, 19, S.ACQUIRED, 1, "m1")]


def test_archive_ranges_past_an_empty_window_just_move_it() -> None:
    sp = make(max_in_flight=5)
    assert sp.acquire("m1", [(0, 99)], max_records=100, now_ms=0, archive=[(0, 99)]) == []
    assert (sp.start_offset, sp.end_offset, sp.in_flight()) == (100, 100, [])
    assert sp.acquire("m1", [(100, 104), (105, 120)], max_records=100, now_ms=0, archive=[(100, 104)]) == [ar(105, 109)]
    assert (sp.start_offset, sp.end_offset) == (105, 110)


def test_read_offset_archives_available_offsets_missing_from_the_log() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    assert sp.acknowledge("m1", [(0, 4, [A.RELEASE])], now_ms=0) is None
    # compaction removed 0..2 since: the read from 0 starts at 3
    assert sp.acquire("m2", [(3, 9)], max_records=100, now_ms=0, read_offset=0) == [ar(3, 4, 2)]
    assert sp.start_offset == 3
    assert sp.in_flight() == [(3, 4, S.ACQUIRED, 2, "m2"), (5, 9, S.ACQUIRED, 1, "m1")]


def test_acquire_respects_the_window_for_new_offsets_only() -> None:
    sp = make(max_in_flight=10)
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    sp.acknowledge("m1", [(5, 9, [A.RELEASE])], now_ms=0)
    assert sp.acquire("m2", [(5, 20)], max_records=3, now_ms=0) == [ar(5, 7, 2)]
    assert sp.acquire("m2", [(5, 20)], max_records=30, now_ms=0) == [ar(8, 9, 2)]
    assert sp.end_offset == 10


# -- acknowledge -----------------------------------------------------------------------------------


def test_accept_everything_empties_the_window() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    assert sp.acknowledge("m1", [(0, 9, [A.ACCEPT])], now_ms=0) is None
    assert (sp.start_offset, sp.end_offset, sp.in_flight(), sp.state_batches()) == (10, 10, [], [])
    assert sp.acknowledge("m1", [], now_ms=0) is None


def test_partial_acknowledgement_splits_the_run_and_the_spso_follows() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    assert sp.acknowledge("m1", [(3, 5, [A.ACCEPT])], now_ms=0) is None
    assert sp.in_flight() == [
        (0, 2, S.ACQUIRED, 1, "m1"),
        (3, 5, S.ACKNOWLEDGED, 1, None),
        (6, 9, S.ACQUIRED, 1, "m1"),
    ]
    assert sp.start_offset == 0
    assert sp.acknowledge("m1", [(0, 2, [A.ACCEPT])], now_ms=0) is None
    assert sp.start_offset == 6
    assert sp.in_flight() == [(6, 9, S.ACQUIRED, 1, "m1")]


def test_per_offset_types_and_gap() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    types = [A.ACCEPT, A.ACCEPT, A.RELEASE, A.REJECT, A.GAP]
    assert sp.acknowledge("m1", [(0, 4, types), (7, 7, [int(A.GAP)])], now_ms=0) is None
    assert sp.start_offset == 2
    assert sp.in_flight() == [
        (2, 2, S.AVAILABLE, 1, None),
        (3, 4, S.ARCHIVED, 1, None),
        (5, 6, S.ACQUIRED, 1, "m1"),
        (7, 7, S.ARCHIVED, 1, None),
        (8, 9, S.ACQUIRED, 1, "m1"),
    ]
    assert sp.state_batches() == [StateBatch(2, 2, S.AVAILABLE, 1), StateBatch(3, 4, S.ARCHIVED, 1),
                                  StateBatch(5, 6, S.AVAILABLE, 1), StateBatch(7, 7, S.ARCHIVED, 1),
                                  StateBatch(8, 9, S.AVAILABLE, 1)]  # fmt: skip


def test_release_at_the_delivery_count_limit_archives() -> None:
    sp = make(limit=2)
    sp.acquire("m1", [(0, 4)], max_records=100, now_ms=0)
    assert sp.acknowledge("m1", [(0, 4, [A.RELEASE])], now_ms=0) is None
    assert sp.in_flight() == [(0, 4, S.AVAILABLE, 1, None)]
    assert sp.acquire("m2", [(0, 4)], max_records=100, now_ms=0) == [ar(0, 4, 2)]
    assert sp.acknowledge("m2", [(0, 1, [A.RELEASE])], now_ms=0) is None
    assert sp.start_offset == 2
    assert sp.in_flight() == [(2, 4, S.ACQUIRED, 2, "m2")]


def test_renew_restarts_the_lock_without_dirtying() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    sp.mark_clean()
    assert sp.acknowledge("m1", [(0, 4, [A.RENEW])], now_ms=500) is None
    assert not sp.is_dirty
    assert sp.in_flight() == [(0, 4, S.ACQUIRED, 1, "m1"), (5, 9, S.ACQUIRED, 1, "m1")]
    assert sp.next_lock_deadline() == LOCK_MS
    assert sp.expire_locks(LOCK_MS - 1) is False
    assert sp.expire_locks(LOCK_MS) is True
    assert sp.in_flight() == [(0, 4, S.ACQUIRED, 1, "m1"), (5, 9, S.AVAILABLE, 1, None)]
    assert sp.next_lock_deadline() == 500 + LOCK_MS
    assert not sp.is_dirty  # released, not archived: the durable view is unchanged
    assert sp.acknowledge("m1", [(5, 5, [A.ACCEPT])], now_ms=0) == ErrorCode.invalid_record_state


def test_records_not_held_by_the_member_fail_and_change_nothing() -> None:
    sp = make()
    sp.acquire("m1", [(0, 4)], max_records=100, now_ms=0)
    sp.acquire("m2", [(5, 9)], max_records=100, now_ms=0)
    sp.acknowledge("m1", [(0, 0, [A.ACCEPT])], now_ms=0)
    sp.mark_clean()
    before = sp.in_flight()
    for batches in (
        [(1, 2, [A.ACCEPT]), (5, 5, [A.ACCEPT])],  # the second range is m2's
        [(4, 5, [A.ACCEPT])],  # straddles m1's and m2's
        [(0, 1, [A.ACCEPT])],  # 0 is below the SPSO
        [(1, 1, [A.ACCEPT]), (9, 10, [A.ACCEPT])],  # 10 was never acquired
    ):
        assert sp.acknowledge("m1", batches, now_ms=0) == ErrorCode.invalid_record_state
    assert sp.acknowledge("m3", [(1, 1, [A.GAP])], now_ms=0) == ErrorCode.invalid_record_state
    assert sp.in_flight() == before and not sp.is_dirty


@pytest.mark.parametrize(
    "batches",
    [
        [(3, 4, [A.ACCEPT]), (1, 2, [A.ACCEPT])],  # unsorted
        [(1, 3, [A.ACCEPT]), (3, 4, [A.ACCEPT])],  # overlapping
        [(4, 3, [A.ACCEPT])],  # empty
        [(-1, 3, [A.ACCEPT])],
        [(1, 3, [A.ACCEPT, A.ACCEPT])],  # neither 1 nor 3 types
        [(1, 3, [])],
        [(1, 1, [7])],  # no such type
        [(1, 2, [A.ACCEPT]), (3, 4, [A.ACCEPT, 9])],
    ],
)
def test_malformed_acknowledgements_are_invalid_requests(batches: list[tuple[int, int, list[int]]]) -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    before = sp.in_flight()
    assert sp.acknowledge("m1", batches, now_ms=0) == ErrorCode.invalid_request
    assert sp.in_flight() == before


def test_a_huge_acknowledgement_costs_runs_not_offsets() -> None:
    sp = make(max_in_flight=1_000_000)
    t0 = time.perf_counter()
    assert sp.acquire("m1", [(0, 499_999), (500_000, 999_999)], max_records=1_000_000, now_ms=0) == [ar(0, 999_999)]
    assert sp.acknowledge("m1", [(0, 99_999, [A.ACCEPT])], now_ms=0) is None
    types = [A.ACCEPT] * 100_000
    types[50_000] = A.RELEASE
    assert sp.acknowledge("m1", [(100_000, 199_999, types)], now_ms=0) is None
    assert sp.start_offset == 150_000
    assert sp.in_flight() == [(150_000, 150_000, S.AVAILABLE, 1, None), (150_001, 199_999, S.ACKNOWLEDGED, 1, None),
                              (200_000, 999_999, S.ACQUIRED, 1, "m1")]  # fmt: skip
    assert sp.release_member("m1") and sp.acquire("m2", [(150_000, 999_999)], max_records=10**6, now_ms=0) == [
        ar(150_000, 150_000, 2),
        ar(200_000, 999_999, 2),
    ]
    assert time.perf_counter() - t0 < 1.0


# -- release, expiry, log start ---------------------------------------------------------------------


def test_release_member() -> None:
    sp = make(limit=2)
    sp.acquire("m1", [(0, 4)], max_records=100, now_ms=0)
    sp.acquire("m2", [(5, 9)], max_records=100, now_ms=0)
    assert sp.release_member("m1") is True
    assert sp.release_member("m1") is False
    assert sp.in_flight() == [(0, 4, S.AVAILABLE, 1, None), (5, 9, S.ACQUIRED, 1, "m2")]
    assert sp.acquire("m2", [(0, 4)], max_records=100, now_ms=0) == [ar(0, 4, 2)]
    sp.mark_clean()
    assert sp.release_member("m2") is True
    assert sp.is_dirty
    assert (sp.start_offset, sp.end_offset) == (5, 10)
    assert sp.in_flight() == [(5, 9, S.AVAILABLE, 1, None)]


def test_expire_locks_and_next_lock_deadline() -> None:
    sp = make(limit=1)
    assert sp.next_lock_deadline() is None
    sp.acquire("m1", [(0, 4)], max_records=100, now_ms=0)
    sp.acquire("m2", [(5, 9)], max_records=100, now_ms=300)
    assert sp.next_lock_deadline() == LOCK_MS
    assert sp.expire_locks(LOCK_MS) is True  # count 1 at limit 1: archived
    assert sp.start_offset == 5 and sp.next_lock_deadline() == 300 + LOCK_MS
    assert sp.expire_locks(LOCK_MS + 299) is False
    assert sp.expire_locks(10**9) is True
    assert (sp.start_offset, sp.end_offset, sp.next_lock_deadline()) == (10, 10, None)


def test_move_log_start() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=100, now_ms=0)
    sp.acknowledge("m1", [(6, 6, [A.ACCEPT])], now_ms=0)
    sp.mark_clean()
    assert sp.move_log_start(3) is True and sp.is_dirty
    assert sp.start_offset == 3
    assert sp.in_flight()[0] == (3, 5, S.ACQUIRED, 1, "m1")
    assert sp.acknowledge("m1", [(2, 4, [A.ACCEPT])], now_ms=0) == ErrorCode.invalid_record_state
    assert sp.move_log_start(3) is False and sp.move_log_start(1) is False
    assert sp.move_log_start(6) is True  # 6 is acknowledged: the SPSO moves past it
    assert sp.start_offset == 7
    assert sp.move_log_start(20) is True
    assert (sp.start_offset, sp.end_offset, sp.in_flight(), sp.fetch_offset()) == (20, 20, [], 20)


# -- the durable view ------------------------------------------------------------------------------


def test_state_batches_coalesce_and_report_acquired_as_available() -> None:
    sp = make()
    sp.acquire("m1", [(0, 9)], max_records=5, now_ms=0)
    sp.acquire("m2", [(0, 9)], max_records=5, now_ms=7)
    sp.acknowledge("m1", [(3, 4, [A.RELEASE])], now_ms=0)
    assert len(sp.in_flight()) == 3
    assert sp.state_batches() == [StateBatch(0, 9, S.AVAILABLE, 1)]
    sp.acknowledge("m2", [(5, 6, [A.REJECT]), (7, 7, [A.ACCEPT])], now_ms=0)
    sp.release_member("m1")
    assert sp.state_batches() == [
        StateBatch(0, 4, S.AVAILABLE, 1),
        StateBatch(5, 6, S.ARCHIVED, 1),
        StateBatch(7, 7, S.ACKNOWLEDGED, 1),
        StateBatch(8, 9, S.AVAILABLE, 1),
    ]


def test_state_batches_skip_never_delivered_offsets() -> None:
    sp = make()
    state = ShareState(1, 0, batches=(StateBatch(2, 3, S.AVAILABLE, 1), StateBatch(6, 7, S.AVAILABLE, 1)))
    sp.load(state, log_start_offset=0, reset_offset=0)
    assert sp.state_batches() == list(state.batches)


def test_constructor_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        SharePartition(KEY, record_lock_duration_ms=1, delivery_count_limit=0, max_in_flight_records=1)


# -- random sequences ------------------------------------------------------------------------------

MEMBERS = ("m1", "m2", "m3")
LIMIT = 3

_layout = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.booleans()), min_size=4, max_size=14)
_acquire = st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 3), st.integers(1, 8), st.booleans())
_ack_held = st.tuples(
    st.just("ack_held"),
    st.sampled_from(MEMBERS),
    st.integers(0, 30),
    st.lists(st.sampled_from(list(AcknowledgeType)), min_size=1, max_size=6),
)
_op = st.one_of(
    _acquire,
    _acquire,
    _ack_held,
    _ack_held,
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 30), st.integers(0, 4), st.integers(0, 6)),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("tick"), st.integers(0, 2 * LOCK_MS)),
    st.tuples(st.just("log_start"), st.integers(0, 3)),
)


def _offsets(sp: SharePartition) -> dict[int, tuple[DeliveryState, int, str | None]]:
    return {o: (state, count, owner) for a, b, state, count, owner in sp.in_flight() for o in range(a, b + 1)}


def _check_invariants(sp: SharePartition, initial_start: int, log_start: int) -> None:
    runs = sp.in_flight()
    assert sp.start_offset >= initial_start
    if not runs:
        assert sp.start_offset == sp.end_offset
    else:
        assert runs[0][0] == sp.start_offset and runs[-1][1] == sp.end_offset - 1
        assert runs[0][2] not in (S.ACKNOWLEDGED, S.ARCHIVED)
    for i, (a, b, state, count, owner) in enumerate(runs):
        nxt = runs[i + 1] if i + 1 < len(runs) else None
        assert a <= b and (nxt is None or nxt[0] == b + 1)
        assert (owner is not None) == (state == S.ACQUIRED)
        assert count <= LIMIT and (state != S.ACQUIRED or count >= 1)
        if nxt is not None and state != S.ACQUIRED:
            assert (state, count) != (nxt[2], nxt[3])  # equal neighbours are merged
    batches = sp.state_batches()
    assert all(b.first_offset >= sp.start_offset for b in batches)
    assert all(x.last_offset < y.first_offset for x, y in itertools.pairwise(batches))
    fresh = SharePartition(
        KEY, record_lock_duration_ms=LOCK_MS, delivery_count_limit=LIMIT, max_in_flight_records=sp.max_in_flight_records
    )
    fresh.load(ShareState(1, sp.start_offset, batches=tuple(batches)), log_start_offset=log_start, reset_offset=0)
    assert (fresh.start_offset, fresh.state_batches()) == (sp.start_offset, batches)
    assert fresh.end_offset <= sp.end_offset


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(
    layout=_layout,
    ops=st.lists(_op, min_size=20, max_size=80),
    start=st.integers(0, 3),
    max_in_flight=st.integers(3, 25),
)
def test_random_operations_keep_the_invariants(
    layout: list[tuple[int, int, bool]], ops: list[tuple[object, ...]], start: int, max_in_flight: int
) -> None:
    # the log: batches separated by gaps (compacted offsets), some aborted
    log: list[tuple[int, int]] = []
    aborted: list[tuple[int, int]] = []
    pos = 0
    for gap, length, is_aborted in layout:
        pos += gap
        log.append((pos, pos + length - 1))
        if is_aborted:
            aborted.append(log[-1])
        pos += length
    sp = SharePartition(
        KEY, record_lock_duration_ms=LOCK_MS, delivery_count_limit=LIMIT, max_in_flight_records=max_in_flight
    )
    sp.load(None, log_start_offset=0, reset_offset=start)
    now, log_start = 0, 0
    done: set[int] = set()  # offsets ever acknowledged or archived
    for op in ops:
        before = _offsets(sp)
        start_before, end_before = sp.start_offset, sp.end_offset
        if op[0] == "acquire":
            _, member, n_batches, max_records, pass_read_offset = op
            assert isinstance(member, str) and isinstance(n_batches, int) and isinstance(max_records, int)
            fetch = sp.fetch_offset()
            if fetch is None:
                event("window full")
                assert not any(s == S.AVAILABLE for s, _, _ in before.values())
                assert end_before - start_before >= max_in_flight
                continue
            read = [b for b in log if b[1] >= fetch][:n_batches]
            got = sp.acquire(
                member,
                read,
                max_records=max_records,
                now_ms=now,
                archive=[b for b in aborted if b in read],
                read_offset=fetch if pass_read_offset else None,
            )
            event("acquired" if got else "acquired nothing")
            assert sum(r.last_offset - r.first_offset + 1 for r in got) <= max_records
            assert sp.end_offset - sp.start_offset <= max(max_in_flight, end_before - start_before)
            for r in got:
                for o in range(r.first_offset, r.last_offset + 1):
                    assert o not in done and o >= start_before
                    was = before.get(o)
                    if o >= end_before:
                        assert was is None and r.delivery_count == 1
                    else:
                        assert was is not None and was[0] == S.AVAILABLE and r.delivery_count == was[1] + 1
                    assert r.delivery_count <= LIMIT
                    assert _offsets(sp)[o] == (S.ACQUIRED, r.delivery_count, member)
            assert got == sorted(got, key=lambda r: r.first_offset)
        elif op[0] in ("ack", "ack_held"):
            member = op[1]
            assert isinstance(member, str)
            if op[0] == "ack":
                first, length, kind = op[2], op[3], op[4]
                assert isinstance(first, int) and isinstance(length, int) and isinstance(kind, int)
                batches = [(first, first + length, [kind])]
            else:  # a range some member holds, by that member (its own, or "member"'s if it holds any)
                held = [(a, b, o) for a, b, s, _, o in sp.in_flight() if s == S.ACQUIRED]
                if not held:
                    continue
                held = [h for h in held if h[2] == member] or held
                pick = op[2]
                assert isinstance(pick, int)
                first, last, member = held[pick % len(held)]
                assert member is not None
                types = op[3]
                assert isinstance(types, list)
                if len(types) > 1:  # one type for the whole range, or one per offset of a prefix
                    last = min(last, first + len(types) - 1)
                    types = types[: last - first + 1]
                batches = [(first, last, types)]
            result = sp.acknowledge(member, batches, now_ms=now)
            event(f"{op[0]}: {result.name if result is not None else 'ok'}")
            if result is not None:
                assert _offsets(sp) == before and sp.start_offset == start_before
            else:
                after = _offsets(sp)
                for first, last, types in batches:
                    for o in range(first, last + 1):
                        kind = types[0] if len(types) == 1 else types[o - first]
                        state = after.get(o, (S.ARCHIVED, 0, None))[0] if o >= sp.start_offset else None
                        if kind == A.ACCEPT:
                            assert state in (S.ACKNOWLEDGED, None)
                        elif kind == A.RENEW:
                            assert after[o] == before[o]
                        elif kind == A.RELEASE and before[o][1] < LIMIT:
                            assert state == S.AVAILABLE
                        else:
                            assert state in (S.ARCHIVED, None)
        elif op[0] == "release":
            member = op[1]
            assert isinstance(member, str)
            changed = sp.release_member(member)
            assert changed == any(owner == member for _, _, owner in before.values())
            assert sp.acquired_count(member) == 0
        elif op[0] == "tick":
            delta = op[1]
            assert isinstance(delta, int)
            now += delta
            deadline = sp.next_lock_deadline()
            changed = sp.expire_locks(now)
            assert changed == (deadline is not None and deadline <= now)
            next_deadline = sp.next_lock_deadline()
            assert next_deadline is None or next_deadline > now
        else:
            delta = op[1]
            assert isinstance(delta, int)
            log_start = max(log_start, sp.start_offset + delta - 1)
            sp.move_log_start(log_start)
            assert sp.start_offset >= log_start
        after = _offsets(sp)
        done |= {o for o, (s, _, _) in after.items() if s in (S.ACKNOWLEDGED, S.ARCHIVED)}
        done |= {o for o in before if o < sp.start_offset and o >= log_start}
        assert sp.start_offset >= start_before
        assert sp.acquired_count() == sum(1 for s, _, _ in after.values() if s == S.ACQUIRED)
        _check_invariants(sp, start, log_start)
