"""Incremental fetch sessions (KIP-227): Kafka 3.9's ``FetchSessionCache`` and ``FetchManager``.

A Fetch v7+ names a session with ``session_id`` and ``session_epoch``:

==============  =========  =================================================================
session_id      epoch      meaning
==============  =========  =================================================================
0               -1         sessionless (``FINAL_EPOCH``; v4-v6 always): every partition named,
                           every partition answered, session id 0 in the answer
0 or S          0          full fetch (``INITIAL_EPOCH``): closes S if given, names every
                           partition, answers every partition, and creates a session when the
                           cache has room (its id in the answer, epoch 1 next), else answers 0
S               -1         closes S, then as sessionless
S               1..2^31-1  incremental: must equal the session's epoch (else
                           INVALID_FETCH_SESSION_EPOCH; an unknown S FETCH_SESSION_ID_NOT_FOUND;
                           a session opened by id, v13+, used by a v12- request or the other way
                           round FETCH_SESSION_TOPIC_ID_ERROR). The request names only added or
                           changed partitions and removes partitions in
                           ``forgotten_topics_data``; the broker reads every partition of the
                           session and answers only those with records, a changed high
                           watermark or log start offset, a preferred read replica, a diverging
                           epoch or an error. The epoch then moves on (2^31-1 wraps to 1).
==============  =========  =================================================================

Session errors found when a request arrives answer no partitions and session id 0; an id outside
every shard's range (0 or negative with epoch >= 1, too large) is FETCH_SESSION_ID_NOT_FOUND. A
request whose epoch was overtaken while it waited (a duplicate came in) is answered
INVALID_FETCH_SESSION_EPOCH with the session's id and no partitions, as Kafka's. A session left
empty by its forgotten partitions is closed and the request answered as sessionless. A session's
partitions are read in its order, and a partition that returned records moves to the end, so a
response size limit serves them in turn. A session whose partitions would
exceed ``max_partitions`` (the broker passes ``odradek.request.max.entries``, the bound on one
request's array entries) is closed and the request answered INVALID_REQUEST: a session holds no
more than one request could name.

The cache is Kafka 3.9's: :data:`NUM_FETCH_SESSION_CACHE_SHARDS` (8) shards, each holding
``max.incremental.fetch.session.cache.slots // 8`` sessions with ids in its own range
(``max(1, shard * range) <= id < (shard + 1) * range``, range ``(2^31-1) // 8``); new sessions go to
the shards in turn. A full shard makes room by evicting, within the shard, in this order:

1. the least recently used session, if unused for longer than
   ``min.incremental.fetch.session.eviction.ms`` (stale);
2. else the least valuable evictable session, if the new one is worth at least as much: value
   orders (privileged, partitions, id), privileged being a follower's (replica_id >= 0). A
   consumer's session is evictable by a follower's at once and by anyone's once older than the
   eviction time; a follower's session only once older than the eviction time, and never by a
   consumer's (a consumer's is always worth less). Sessions are re-filed at each use.

So consumers opening a new session on every fetch fill the shards with sessions younger than the
eviction time that nobody may evict but a follower, and the followers' sessions, used at every
fetch, are never stale.

Counters for the metrics (:class:`odradek.metrics.collectors.FetchSessionCacheCollector`):
:attr:`FetchSessionCache.size` (``NumIncrementalFetchSessions``),
:attr:`FetchSessionCache.total_partitions` (``NumIncrementalFetchPartitionsCached``) and
:attr:`FetchSessionCache.evictions` (``IncrementalFetchSessionEvictionsPerSec``).

Times are milliseconds of a clock that does not go backwards (the broker passes
``time.monotonic()``). Not thread-safe: every method runs on the broker's event loop, and none
awaits, so a context's checks and updates are never interleaved with another request's. Work is
bounded by the session size: one pass over the session's partitions per request (plus, when a
full shard must evict, one pass over the shard's sessions).
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from odradek.errors import ErrorCode

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "NUM_FETCH_SESSION_CACHE_SHARDS",
    "CachedPartition",
    "FetchAnswer",
    "FetchContext",
    "FetchManager",
    "FetchSession",
    "FetchSessionCache",
    "FetchSessionCacheShard",
    "PartitionData",
    "PartitionResponse",
    "next_epoch",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_INT32 = 2**31 - 1
NUM_FETCH_SESSION_CACHE_SHARDS = 8
"""Kafka 3.9's fixed shard count (``KafkaBroker.NumFetchSessionCacheShards``)."""
ZERO_UUID = uuid.UUID(int=0)

PartitionKey = tuple[str | uuid.UUID, int]
"""How a session names a partition: (topic id, partition) in a session opened by id (v13+), else
(topic name, partition)."""


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: -1 stays -1 (a sessionless request), 2^31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_INT32 else epoch + 1


@dataclass(frozen=True, slots=True)
class PartitionData:
    """One partition a Fetch asks for (Kafka's ``FetchRequest.PartitionData``) with its topic.
    ``topic`` is None for a v13+ topic id this broker does not know; ``topic_id`` is the zero id
    before v13. Fields a version lacks hold Kafka's defaults (-1). Immutable: a session keeps the
    last one its fetcher sent for each partition."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    key: PartitionKey = field(init=False, compare=False, repr=False)
    """(topic id, partition), or (topic name, partition) with the zero id: how a session finds it."""

    def __post_init__(self) -> None:
        named: str | uuid.UUID = self.topic_id if self.topic_id != ZERO_UUID else self.topic or ""
        object.__setattr__(self, "key", (named, self.partition))

    def named(self, topic: str | None) -> PartitionData:
        """The same request with its topic name resolved."""
        return PartitionData(
            topic,
            self.topic_id,
            self.partition,
            self.fetch_offset,
            self.log_start_offset,
            self.max_bytes,
            self.current_leader_epoch,
            self.last_fetched_epoch,
        )


class PartitionResponse(Protocol):
    """What the cache reads of a partition's read (``odradek.replication.replica_manager.
    FetchPartitionResult``) to decide whether an incremental answer carries it."""

    @property
    def error_code(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def records_size(self) -> int: ...

    @property
    def preferred_read_replica(self) -> int: ...

    @property
    def diverging_epoch(self) -> tuple[int, int] | None: ...


R = TypeVar("R", bound=PartitionResponse)


class CachedPartition:
    """A partition of a session: the fetcher's last request (``data``) and what it was last told
    (``high_watermark``, ``local_log_start_offset``; -1 until answered)."""

    __slots__ = ("data", "high_watermark", "local_log_start_offset")

    def __init__(self, data: PartitionData, response: PartitionResponse | None = None) -> None:
        self.data = data
        self.high_watermark = response.high_watermark if response is not None else -1
        self.local_log_start_offset = response.log_start_offset if response is not None else -1

    def maybe_resolve_unknown_name(self, topic_names: Mapping[uuid.UUID, str]) -> None:
        """A topic id unknown when the partition was added may be known now."""
        if self.data.topic is None:
            name = topic_names.get(self.data.topic_id)
            if name is not None:
                self.data = self.data.named(name)

    def must_respond(self, response: PartitionResponse, update: bool) -> bool:
        """Whether an incremental answer must carry this partition (see the module docstring);
        with ``update``, remember what it tells the fetcher. An error resets the remembered high
        watermark to -1, so the partition is answered again once the error is gone."""
        must = response.records_size > 0
        if self.high_watermark != response.high_watermark:
            must = True
            if update:
                self.high_watermark = response.high_watermark
        if self.local_log_start_offset != response.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = response.log_start_offset
        if response.preferred_read_replica >= 0 or response.diverging_epoch is not None:
            must = True
        if response.error_code != 0:
            must = True
            if update:
                self.high_watermark = -1
        return must


class FetchSession:
    """One session: its partitions in fetch order (a partition that returned records moves to the
    end, so the response size limit serves them in turn), epoch and cache bookkeeping."""

    __slots__ = (
        "cached_size",
        "creation_ms",
        "epoch",
        "evictable_by_all",
        "evictable_by_privileged",
        "id",
        "last_used_ms",
        "partitions",
        "privileged",
        "uses_topic_ids",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[PartitionKey, CachedPartition],
        uses_topic_ids: bool,
        now_ms: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1
        """The size the cache last counted (-1: not in the cache)."""
        self.evictable_by_privileged = False
        self.evictable_by_all = False

    def evictable_key(self) -> tuple[bool, int, int]:
        """Kafka's ``EvictableKey``: a smaller key is worth less."""
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch_data: Iterable[PartitionData], to_forget: Iterable[PartitionKey]) -> tuple[int, int, int]:
        """Apply an incremental request: add or update its partitions, drop the forgotten ones.
        Returns (added, updated, removed) counts."""
        added = updated = removed = 0
        for data in fetch_data:
            cached = self.partitions.get(data.key)
            if cached is None:
                self.partitions[data.key] = CachedPartition(data)
                added += 1
            else:
                cached.data = data
                updated += 1
        for key in to_forget:
            if self.partitions.pop(key, None) is not None:
                removed += 1
        return added, updated, removed


class FetchSessionCacheShard:
    """One shard: at most ``max_entries`` sessions with ids in this shard's range."""

    def __init__(self, max_entries: int, eviction_ms: int, session_id_range: int = MAX_INT32, shard_num: int = 0):
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self.sessions: dict[int, FetchSession] = {}
        self._last_used: dict[int, FetchSession] = {}
        """Sessions in the order of their last use, least recent first (re-inserted when touched)."""
        self.num_partitions = 0
        self.evictions = 0
        self._rng = random.Random()

    @property
    def size(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def new_session_id(self) -> int:
        """A random id in this shard's range not in use (never 0)."""
        low = max(1, self.shard_num * self.session_id_range)
        high = (self.shard_num + 1) * self.session_id_range - 1
        while True:
            session_id = self._rng.randint(low, high)
            if session_id not in self.sessions:
                return session_id

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[PartitionKey, CachedPartition]],
    ) -> int:
        """Create a session of ``size`` partitions if there is room or room can be made by an
        eviction; its id, or :data:`INVALID_SESSION_ID` when none was created."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now_ms)
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Evict one session for a new one (see the module docstring); whether one was evicted."""
        if not self._last_used:
            return False
        oldest = next(iter(self._last_used.values()))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self.remove(oldest)
            self.evictions += 1
            return True
        candidates = [
            s for s in self.sessions.values() if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        self.remove(victim)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        """Drop a session (or session id) from the shard; the session removed, or None."""
        session_id = session if isinstance(session, int) else session.id
        removed = self.sessions.pop(session_id, None)
        if removed is not None:
            self._last_used.pop(session_id, None)
            self.num_partitions -= removed.cached_size
            removed.cached_size = -1
        return removed

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a use of ``session`` at ``now_ms``: its last use, size and evictability."""
        self._last_used.pop(session.id, None)
        session.last_used_ms = now_ms
        self._last_used[session.id] = session
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.num_partitions += session.cached_size
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old


class FetchSessionCache:
    """The shards (see the module docstring); ``sharded`` builds Kafka 3.9's eight."""

    def __init__(self, shards: Sequence[FetchSessionCacheShard]) -> None:
        self.shards = list(shards)
        self._next = itertools.cycle(range(len(self.shards)))

    @classmethod
    def sharded(
        cls, max_slots: int, eviction_ms: int, shards: int = NUM_FETCH_SESSION_CACHE_SHARDS
    ) -> FetchSessionCache:
        """``max_slots`` sessions over ``shards`` shards (``max_slots // shards`` each, as Kafka)."""
        id_range = MAX_INT32 // shards
        return cls([FetchSessionCacheShard(max_slots // shards, eviction_ms, id_range, n) for n in range(shards)])

    def cache_shard(self, session_id: int) -> FetchSessionCacheShard | None:
        """The shard whose range holds ``session_id``; None for an id outside every range."""
        index = session_id // self.shards[0].session_id_range
        return self.shards[index] if 0 <= index < len(self.shards) and session_id > 0 else None

    def next_cache_shard(self) -> FetchSessionCacheShard:
        """The shard a new session goes to: each in turn."""
        return self.shards[next(self._next)]

    @property
    def size(self) -> int:
        """Sessions in the cache (``NumIncrementalFetchSessions``)."""
        return sum(s.size for s in self.shards)

    @property
    def total_partitions(self) -> int:
        """Partitions over every session (``NumIncrementalFetchPartitionsCached``)."""
        return sum(s.num_partitions for s in self.shards)

    @property
    def evictions(self) -> int:
        """Sessions evicted since start (``IncrementalFetchSessionEvictionsPerSec``'s count)."""
        return sum(s.evictions for s in self.shards)

    def sessions(self) -> list[FetchSession]:
        return [session for shard in self.shards for session in shard.sessions.values()]


@dataclass(slots=True)
class FetchAnswer(Generic[R]):
    """What a Fetch response carries besides throttle time and node endpoints: the top-level
    error, the session id, and the partitions to answer with their reads, in order."""

    error_code: int
    session_id: int
    partitions: list[tuple[PartitionData, R]]


class FetchContext:
    """How one Fetch request is served (Kafka's ``FetchContext``). Base: a session error."""

    def __init__(self, error: ErrorCode = ErrorCode.none) -> None:
        self.error = error

    def partitions(self) -> list[PartitionData]:
        """The partitions to read (Kafka's ``foreachPartition``), in order."""
        return []

    def answer(self, updates: list[tuple[PartitionData, R]], now_ms: int) -> FetchAnswer[R]:
        """The answer to the request, given each partition's read (Kafka's
        ``updateAndGenerateResponseData``); updates the session."""
        return FetchAnswer(int(self.error), INVALID_SESSION_ID, [])

    def throttled(self) -> tuple[int, int]:
        """(error code, session id) of the empty answer to a request over its fetch quota
        (Kafka's ``getThrottledResponse``)."""
        return int(ErrorCode.none), INVALID_SESSION_ID


class SessionlessFetchContext(FetchContext):
    def __init__(self, fetch_data: list[PartitionData]) -> None:
        super().__init__()
        self.fetch_data = fetch_data

    def partitions(self) -> list[PartitionData]:
        return self.fetch_data

    def answer(self, updates: list[tuple[PartitionData, R]], now_ms: int) -> FetchAnswer[R]:
        return FetchAnswer(int(ErrorCode.none), INVALID_SESSION_ID, updates)


class FullFetchContext(SessionlessFetchContext):
    def __init__(
        self, cache: FetchSessionCache, fetch_data: list[PartitionData], uses_topic_ids: bool, privileged: bool
    ) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.uses_topic_ids = uses_topic_ids
        self.privileged = privileged

    def answer(self, updates: list[tuple[PartitionData, R]], now_ms: int) -> FetchAnswer[R]:
        def create() -> dict[PartitionKey, CachedPartition]:
            return {data.key: CachedPartition(data, response) for data, response in updates}

        shard = self.cache.next_cache_shard()
        session_id = shard.maybe_create_session(now_ms, self.privileged, len(updates), self.uses_topic_ids, create)
        return FetchAnswer(int(ErrorCode.none), session_id, updates)


class IncrementalFetchContext(FetchContext):
    def __init__(self, request_epoch: int, session: FetchSession, topic_names: Mapping[uuid.UUID, str]) -> None:
        super().__init__()
        self.request_epoch = request_epoch
        self.session = session
        self.topic_names = topic_names

    def partitions(self) -> list[PartitionData]:
        cached = self.session.partitions.values()
        if self.session.uses_topic_ids:
            for c in cached:
                c.maybe_resolve_unknown_name(self.topic_names)
        return [c.data for c in cached]

    def _current(self) -> bool:
        """Whether no other request of the session came in since this one (a duplicate would have
        moved the epoch on)."""
        return self.session.epoch == next_epoch(self.request_epoch)

    def answer(self, updates: list[tuple[PartitionData, R]], now_ms: int) -> FetchAnswer[R]:
        session = self.session
        if not self._current():
            return FetchAnswer(int(ErrorCode.invalid_fetch_session_epoch), session.id, [])
        kept = []
        partitions = session.partitions
        for data, response in updates:
            cached = partitions.get(data.key)
            if cached is None or not cached.must_respond(response, True):
                continue
            kept.append((data, response))
            if response.records_size > 0:  # served: to the back of the line
                partitions[data.key] = partitions.pop(data.key)
        return FetchAnswer(int(ErrorCode.none), session.id, kept)

    def throttled(self) -> tuple[int, int]:
        error = ErrorCode.none if self._current() else ErrorCode.invalid_fetch_session_epoch
        return int(error), self.session.id


class FetchManager:
    """Turns a Fetch's session fields into a :class:`FetchContext` (Kafka's ``FetchManager``)."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        is_follower: bool,
        fetch_data: list[PartitionData],
        to_forget: list[PartitionKey],
        topic_names: Mapping[uuid.UUID, str],
        now_ms: int,
        max_partitions: int,
    ) -> FetchContext:
        """The context of one request (see the module docstring for the rules)."""
        uses_topic_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # full
            if session_id != INVALID_SESSION_ID:
                shard = self.cache.cache_shard(session_id)
                if shard is not None:
                    shard.remove(session_id)
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(self.cache, fetch_data, uses_topic_ids, is_follower)
        shard = self.cache.cache_shard(session_id)
        session = shard.get(session_id) if shard is not None else None
        if shard is None or session is None:
            return FetchContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ErrorCode.fetch_session_topic_id_error)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            shard.remove(session)
            return SessionlessFetchContext(fetch_data)
        if len(session.partitions) > max_partitions:
            shard.remove(session)
            return FetchContext(ErrorCode.invalid_request)
        shard.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(epoch, session, topic_names)
