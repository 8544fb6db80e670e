"""The fetch session cache (Kafka 3.9's FetchSessionCache rules) and the fetching side's
FetchSessionHandler, on plain values: creation, epochs, forgotten partitions, errors, eviction."""

from __future__ import annotations

import uuid

from odradek.errors import ErrorCode
from odradek.replication.fetch_session_handler import FetchSessionHandler, PartitionParams
from odradek.replication.replica_manager import FetchPartitionResult
from odradek.server.fetch_context import (
    FetchContext,
    FetchManager,
    FullFetchContext,
    IncrementalFetchContext,
    SessionlessFetchContext,
)
from odradek.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    NUM_FETCH_SESSION_CACHE_SHARDS,
    CachedPartition,
    FetchSessionCache,
    FetchSessionCacheShard,
    PartitionData,
    next_epoch,
)
from odradek.storage import TopicPartition

ZERO = uuid.UUID(int=0)
LIMIT = 10000
EVICTION_MS = 120000


def _data(topic: str, partition: int, offset: int = 0, topic_id: uuid.UUID = ZERO) -> PartitionData:
    return PartitionData(topic, topic_id, partition, offset, 0, 1 << 20)


def _read(
    data: PartitionData, hw: int = 10, records: bytes = b"", error: ErrorCode = ErrorCode.none
) -> FetchPartitionResult:
    return FetchPartitionResult(TopicPartition(data.topic or "", data.partition), error, hw, hw, 0, records)


def _full(
    manager: FetchManager, parts: list[PartitionData], *, follower: bool = False, now: int = 0, version: int = 12
) -> int:
    """A full fetch of ``parts`` answered with high watermark 10 each; the session id answered."""
    ctx = manager.new_context(version, INVALID_SESSION_ID, INITIAL_EPOCH, follower, parts, [], {}, now, LIMIT)
    assert isinstance(ctx, FullFetchContext)
    answer = ctx.answer([(p, _read(p)) for p in ctx.partitions()], now)
    assert [p for p, _ in answer.partitions] == parts
    return answer.session_id


def test_next_epoch_wraps_to_one_and_keeps_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_creates_a_session_and_incremental_answers_only_changes() -> None:
    manager = FetchManager(FetchSessionCache.sharded(1000, EVICTION_MS))
    parts = [_data("t", 0), _data("t", 1), _data("u", 0)]
    session_id = _full(manager, parts)
    assert session_id != INVALID_SESSION_ID
    assert (manager.cache.size, manager.cache.total_partitions) == (1, 3)

    # epoch 1, nothing named: every cached partition is read at its cached offset, none answered
    ctx = manager.new_context(12, session_id, 1, False, [], [], {}, 1, LIMIT)
    assert isinstance(ctx, IncrementalFetchContext)
    assert ctx.partitions() == parts
    answer = ctx.answer([(p, _read(p)) for p in ctx.partitions()], 1)
    assert (answer.error_code, answer.session_id, answer.partitions) == (0, session_id, [])

    # epoch 2: t-1 moved on (named), u-0's high watermark changed, t-0 got records
    moved = _data("t", 1, offset=7)
    ctx = manager.new_context(12, session_id, 2, False, [moved], [], {}, 2, LIMIT)
    wanted = ctx.partitions()
    assert [p.fetch_offset for p in wanted] == [0, 7, 0]
    reads = {("t", 0): _read(wanted[0], records=b"batch"), ("t", 1): _read(wanted[1]), ("u", 0): _read(wanted[2], 11)}
    answer = ctx.answer([(p, reads[(p.topic or "", p.partition)]) for p in wanted], 2)
    assert [(p.topic, p.partition) for p, _ in answer.partitions] == [("t", 0), ("u", 0)]
    # the partition that returned records goes to the back of the line
    ctx = manager.new_context(12, session_id, 3, False, [], [], {}, 3, LIMIT)
    assert [(p.topic, p.partition) for p in ctx.partitions()] == [("t", 1), ("u", 0), ("t", 0)]


def test_errors_are_always_answered_and_answered_again_once_gone() -> None:
    manager = FetchManager(FetchSessionCache.sharded(1000, EVICTION_MS))
    (part,) = parts = [_data("t", 0)]
    session_id = _full(manager, parts)
    for epoch, error in ((1, ErrorCode.not_leader_or_follower), (2, ErrorCode.not_leader_or_follower), (3, None)):
        ctx = manager.new_context(12, session_id, epoch, False, [], [], {}, epoch, LIMIT)
        read = _read(part, error=error) if error is not None else _read(part)
        answer = ctx.answer([(part, read)], epoch)
        assert len(answer.partitions) == 1, epoch  # the error, the error, the partition back (hw reset)
    ctx = manager.new_context(12, session_id, 4, False, [], [], {}, 4, LIMIT)
    assert ctx.answer([(part, _read(part))], 4).partitions == []


def test_session_errors_and_closing() -> None:
    manager = FetchManager(FetchSessionCache.sharded(1000, EVICTION_MS))
    parts = [_data("t", 0)]
    session_id = _full(manager, parts)
    for sid, epoch, version, error in (
        (session_id + 1, 1, 12, ErrorCode.fetch_session_id_not_found),
        (-5, 1, 12, ErrorCode.fetch_session_id_not_found),
        (session_id, 5, 12, ErrorCode.invalid_fetch_session_epoch),
        (session_id, 1, 13, ErrorCode.fetch_session_topic_id_error),
    ):
        ctx = manager.new_context(version, sid, epoch, False, parts, [], {}, 1, LIMIT)
        assert type(ctx) is FetchContext and ctx.partitions() == []
        assert (ctx.answer([], 1).error_code, ctx.answer([], 1).session_id) == (error, INVALID_SESSION_ID)
    # a duplicate: two requests at epoch 1; the first one's answer comes after the second moved the epoch
    first = manager.new_context(12, session_id, 1, False, [], [], {}, 1, LIMIT)
    assert type(manager.new_context(12, session_id, 1, False, [], [], {}, 1, LIMIT)) is FetchContext
    second = manager.new_context(12, session_id, 2, False, [], [], {}, 1, LIMIT)
    late = first.answer([(parts[0], _read(parts[0]))], 2)
    assert (late.error_code, late.session_id) == (ErrorCode.invalid_fetch_session_epoch, session_id)
    assert second.answer([(parts[0], _read(parts[0]))], 2).error_code == ErrorCode.none
    # epoch -1 with the session's id closes it and answers sessionless
    ctx = manager.new_context(12, session_id, FINAL_EPOCH, False, parts, [], {}, 3, LIMIT)
    assert isinstance(ctx, SessionlessFetchContext) and not isinstance(ctx, FullFetchContext)
    assert ctx.answer([(parts[0], _read(parts[0]))], 3).session_id == INVALID_SESSION_ID
    assert manager.cache.size == 0
    # epoch 0 with an old id closes that session and opens a new one
    old = _full(manager, parts)
    ctx = manager.new_context(12, old, INITIAL_EPOCH, False, parts, [], {}, 4, LIMIT)
    new = ctx.answer([(parts[0], _read(parts[0]))], 4).session_id
    assert new not in (old, INVALID_SESSION_ID)
    assert [s.id for s in manager.cache.sessions()] == [new]


def test_forgotten_partitions_and_the_empty_session() -> None:
    manager = FetchManager(FetchSessionCache.sharded(1000, EVICTION_MS))
    parts = [_data("t", 0), _data("t", 1)]
    session_id = _full(manager, parts)
    added = _data("u", 3)
    ctx = manager.new_context(12, session_id, 1, False, [added], [("t", 0)], {}, 1, LIMIT)
    assert [(p.topic, p.partition) for p in ctx.partitions()] == [("t", 1), ("u", 3)]
    ctx.answer([(p, _read(p)) for p in ctx.partitions()], 1)
    assert manager.cache.total_partitions == 2
    # forgetting every partition closes the session: answered sessionless
    ctx = manager.new_context(12, session_id, 2, False, [], [("t", 1), ("u", 3)], {}, 2, LIMIT)
    assert isinstance(ctx, SessionlessFetchContext) and ctx.partitions() == []
    assert (manager.cache.size, manager.cache.total_partitions) == (0, 0)


def test_a_session_grows_no_larger_than_one_request() -> None:
    manager = FetchManager(FetchSessionCache.sharded(1000, EVICTION_MS))
    session_id = _full(manager, [_data("t", p) for p in range(3)])
    ctx = manager.new_context(12, session_id, 1, False, [_data("t", 3), _data("t", 4)], [], {}, 1, 4)
    assert (type(ctx), ctx.answer([], 1).error_code) == (FetchContext, ErrorCode.invalid_request)
    assert manager.cache.size == 0


def test_topic_ids_resolve_once_known_and_key_the_session() -> None:
    manager = FetchManager(FetchSessionCache.sharded(1000, EVICTION_MS))
    known, later = uuid.uuid4(), uuid.uuid4()
    parts = [_data("t", 0, topic_id=known), PartitionData(None, later, 0, 0, 0, 1 << 20)]
    session_id = _full(manager, parts, version=13)
    ctx = manager.new_context(13, session_id, 1, False, [], [(known, 0)], {known: "t", later: "u"}, 1, LIMIT)
    (left,) = ctx.partitions()
    assert (left.topic, left.topic_id) == ("u", later)
    assert type(manager.new_context(12, session_id, 2, False, [], [], {}, 1, LIMIT)) is FetchContext


def test_shards_split_the_slots_and_the_id_space() -> None:
    cache = FetchSessionCache.sharded(1000, EVICTION_MS)
    assert len(cache.shards) == NUM_FETCH_SESSION_CACHE_SHARDS
    assert {s.max_entries for s in cache.shards} == {125}
    manager = FetchManager(cache)
    ids = [_full(manager, [_data("t", 0)]) for _ in range(16)]
    for n, session_id in enumerate(ids):  # round robin, each id inside its shard's range
        shard = cache.shards[n % NUM_FETCH_SESSION_CACHE_SHARDS]
        assert cache.cache_shard(session_id) is shard and shard.get(session_id) is not None
    assert cache.cache_shard(0) is None and cache.cache_shard(-1) is None


def _shard(max_entries: int) -> FetchSessionCacheShard:
    return FetchSessionCacheShard(max_entries, EVICTION_MS)


def _create(shard: FetchSessionCacheShard, now: int, privileged: bool, size: int) -> int:
    return shard.maybe_create_session(now, privileged, size, False, lambda: {("t", n): _cp(n) for n in range(size)})


def _cp(n: int) -> CachedPartition:
    return CachedPartition(_data("t", n))


def test_eviction_stale_first_then_larger_over_smaller() -> None:
    shard = _shard(3)
    a = _create(shard, 0, False, 5)
    b = _create(shard, 10, False, 1)
    c = _create(shard, 20, False, 2)
    # full, nothing stale, nothing older than the eviction time: a consumer evicts no one
    assert _create(shard, 1000, False, 100) == INVALID_SESSION_ID
    # a follower may evict a consumer's session: the least valuable (smallest) one, b
    d = _create(shard, 1000, True, 1)
    assert d != INVALID_SESSION_ID and shard.get(b) is None and shard.evictions == 1
    # a stale session goes first, whatever its size: a (unused since 0) once past the eviction time
    for sid in (c, d):
        shard.touch(shard.sessions[sid], EVICTION_MS)
    e = _create(shard, EVICTION_MS + 1, False, 1)
    assert e != INVALID_SESSION_ID and shard.get(a) is None and shard.evictions == 2
    # sessions older than the eviction time (used since): a larger consumer session evicts a smaller one
    now = 2 * EVICTION_MS + 100
    for sid in (c, d, e):
        shard.touch(shard.sessions[sid], now)
    assert _create(shard, now + 1, False, 1) == INVALID_SESSION_ID  # as large as e, the smallest: e stays
    assert _create(shard, now + 1, False, 2) != INVALID_SESSION_ID  # larger than e: e goes
    assert shard.get(e) is None and shard.evictions == 3
    # the follower's session d (privileged) stays: a consumer's session is worth less, whatever its size
    assert shard.get(d) is not None
    assert shard.num_partitions == sum(len(s.partitions) for s in shard.sessions.values())


def test_a_thousand_consumers_never_evict_the_followers_sessions() -> None:
    cache = FetchSessionCache.sharded(1000, EVICTION_MS)
    manager = FetchManager(cache)
    followers = {}
    now = 0
    for broker in range(2):  # two followers of each of the 8 shards' worth: 16 follower sessions
        for n in range(NUM_FETCH_SESSION_CACHE_SHARDS):
            parts = [_data("t", p) for p in range(50)]
            followers[(broker, n)] = (_full(manager, parts, follower=True, now=now), parts)
    epochs = dict.fromkeys(followers, 1)
    created = 0
    for rnd in range(6):  # 1,500 consumers, each opening a new session on every fetch
        for consumer in range(1500):
            now += 1
            if _full(manager, [_data(f"c{consumer}", 0), _data(f"c{consumer}", 1)], now=now) != INVALID_SESSION_ID:
                created += 1
        for key, (session_id, _parts) in followers.items():  # the followers fetch on
            now += 1
            ctx = manager.new_context(12, session_id, epochs[key], True, [], [], {}, now, LIMIT)
            assert isinstance(ctx, IncrementalFetchContext), (rnd, key)
            assert ctx.answer([(p, _read(p)) for p in ctx.partitions()], now).error_code == ErrorCode.none
            epochs[key] += 1
        now += EVICTION_MS // 4
    assert cache.size == 1000
    assert sum(1 for s in cache.sessions() if s.privileged) == len(followers)
    assert created > 1000 and cache.evictions > 0  # consumers did evict: stale consumer sessions


def test_fetch_session_handler_sends_changes_and_starts_over_on_errors() -> None:
    handler = FetchSessionHandler(1)
    a, b, c = (TopicPartition("t", n) for n in range(3))
    params = {a: PartitionParams(0, 0, 100, 1, -1), b: PartitionParams(5, 0, 100, 1, -1)}
    full = handler.build(params)
    assert (full.session_id, full.epoch, list(full.to_send), full.to_forget) == (0, 0, [a, b], [])
    assert not handler.handle_response(full, 0, 77, {a})  # a full answer must name every partition
    retry = handler.build(params)
    assert retry.is_full and handler.handle_response(retry, 0, 77, {a, b})
    moved = {a: PartitionParams(3, 0, 100, 1, 0), c: PartitionParams(0, 0, 100, 1, -1)}
    incremental = handler.build(moved)
    assert (incremental.session_id, incremental.epoch) == (77, 1)
    assert (list(incremental.to_send), incremental.to_forget) == ([a, c], [b])
    assert handler.handle_response(incremental, 0, 77, {a})
    same = handler.build(moved)
    assert (same.epoch, same.to_send, same.to_forget) == (2, {}, [])
    assert not handler.handle_response(same, int(ErrorCode.invalid_fetch_session_epoch), 0, set())
    closing = handler.build(moved)  # full again, closing session 77
    assert (closing.session_id, closing.epoch, set(closing.to_send)) == (77, 0, {a, c})
    assert handler.handle_response(closing, 0, 78, {a, c})
    assert not handler.handle_response(handler.build(moved), int(ErrorCode.fetch_session_id_not_found), 0, set())
    assert (handler.build(moved).session_id, handler.epoch) == (0, 0)
    handler.handle_error()
    assert handler.build(moved).is_full


def test_cache_metrics_as_the_jmx_exporter_names_them() -> None:
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import generate_latest

    from odradek.metrics.collectors import FetchSessionCacheCollector

    cache = FetchSessionCache.sharded(8, EVICTION_MS)
    manager = FetchManager(cache)
    _full(manager, [_data("t", 0), _data("t", 1)], follower=True)
    _full(manager, [_data("t", 2)])
    cache.shards[0].evictions = 3
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FetchSessionCacheCollector(cache))
    text = generate_latest(registry).decode()
    assert "kafka_server_fetchsessioncache_numincrementalfetchsessions 2.0" in text
    assert "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached 3.0" in text
    assert "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total 3.0" in text
