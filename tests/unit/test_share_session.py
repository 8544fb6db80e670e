"""Share sessions' epoch rules (Kafka's ShareSessionCache) and which batches read_committed archives."""

from __future__ import annotations

import uuid

from odradek.errors import ErrorCode
from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches
from odradek.share.manager import _aborted_ranges
from odradek.share.share_session import ShareSessionCache, ShareTopicPartition, next_epoch

T = uuid.uuid4()


def _p(i: int) -> ShareTopicPartition:
    return ShareTopicPartition(T, "t", i)


def test_a_session_opens_at_epoch_one_and_each_request_must_carry_the_next() -> None:
    cache = ShareSessionCache(max_sessions=2)
    assert cache.check("g", "m", 1) == ErrorCode.share_session_not_found
    session = cache.open("g", "m", "c1", 0)
    assert not isinstance(session, ErrorCode) and session.epoch == 1
    assert cache.check("g", "m", 2) == ErrorCode.invalid_share_session_epoch
    assert cache.check("g", "m", 1) is session
    cache.advance(session, "c2", 5)
    assert session.epoch == 2 and session.connection_id == "c2"
    assert cache.check("g", "m", -1) is session  # closing needs only the session
    assert cache.close("g", "m") is session and len(cache) == 0


def test_the_session_limit_refuses_new_sessions_not_renewed_ones() -> None:
    cache = ShareSessionCache(max_sessions=1)
    assert not isinstance(cache.open("g", "m1", "c", 0), ErrorCode)
    assert cache.open("g", "m2", "c", 0) == ErrorCode.share_session_limit_reached
    assert not isinstance(cache.open("g", "m1", "c", 0), ErrorCode)


def test_partitions_join_in_order_and_forgetting_reports_what_was_there() -> None:
    cache = ShareSessionCache()
    session = cache.open("g", "m", "c", 0)
    assert not isinstance(session, ErrorCode)
    session.add([_p(2), _p(0), _p(2)])
    assert list(session.partitions) == [_p(2), _p(0)]
    assert session.forget([_p(0), _p(5)]) == [_p(0)]
    assert list(session.partitions) == [_p(2)]


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(7) == 8 and next_epoch(2**31 - 1) == 1


def _batch(base: int, n: int, pid: int = -1, txn: bool = False, control: bool = False) -> bytes:
    return build_batch(
        [Record(key=None, value=b"x") for _ in range(n)],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        is_transactional=txn,
        is_control=control,
    )


def test_read_committed_archives_the_batches_of_aborted_transactions_up_to_their_marker() -> None:
    log = (
        _batch(0, 2)  # plain
        + _batch(2, 3, pid=7, txn=True)  # aborted (7 from offset 2)
        + _batch(5, 2, pid=8, txn=True)  # committed transaction of 8
        + _batch(7, 1, pid=7, txn=True, control=True)  # 7's abort marker
        + _batch(8, 2, pid=7, txn=True)  # 7's next transaction: not aborted
    )
    headers: list[tuple[int, BatchHeader]] = list(iter_batches(log))
    assert _aborted_ranges(headers, [(7, 2)]) == [(2, 4)]
    assert _aborted_ranges(headers, []) == []
