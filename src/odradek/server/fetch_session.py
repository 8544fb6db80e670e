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

**What an incremental fetch reads.** A session in a broker's cache registers each of its
partitions in the replica manager's watchers (:data:`odradek.replication.partition.FetchWatchers`);
every change a fetch could see (an append, a watermark or log start moved, a leadership change, the
partition removed) marks the partition in :attr:`FetchSession.pending`, and so does a request
naming it. An incremental fetch reads the pending partitions only; a read that finds a partition
caught up (nothing past the fetch offset, nothing else to tell) takes it off the list until it is
marked again. An idle session's fetch therefore reads nothing and waits for a mark
(:meth:`FetchSession.wait_for_change`) instead of a change of each partition; for a follower's
session, the session's :class:`~odradek.replication.partition.FetchClock` moves at each fetch and
keeps the follower caught up in every partition it was caught up in at its last read, as a read
at the log end offset would (Kafka reads every partition of the session at every fetch, with the
same answers). One difference shows: an idle partition's authorization is checked when it is next
read (its next change), not at every fetch; nothing is answered from it meanwhile.

Times are milliseconds of a clock that does not go backwards (the broker passes
``time.monotonic()``). Not thread-safe: every method runs on the broker's event loop, and none
awaits (but :meth:`FetchSession.wait_for_change`), so a context's checks and updates are never
interleaved with another request's. Work is bounded by the session size and, for an incremental
fetch, by what changed and was named (plus, when a full shard must evict, one pass over the
shard's sessions).

The request contexts (full, incremental, sessionless) and the manager that chooses them are in
:mod:`odradek.server.fetch_context`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from odradek.replication.partition import FetchClock, FetchWatchers
from odradek.storage import TopicPartition

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "NUM_FETCH_SESSION_CACHE_SHARDS",
    "CachedPartition",
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

    @property
    def caught_up(self) -> bool: ...


R = TypeVar("R", bound=PartitionResponse)


class CachedPartition:
    """A partition of a session: the fetcher's last request (``data``) and what it was last told
    (``high_watermark``, ``local_log_start_offset``; -1 until answered). Registered in the
    replica manager's watchers under ``watched`` (its topic partition) while its session is
    cached, so a change of the partition marks it for the session's next read."""

    __slots__ = ("data", "high_watermark", "local_log_start_offset", "session", "watched")

    def __init__(self, data: PartitionData, response: PartitionResponse | None = None) -> None:
        self.data = data
        self.high_watermark = response.high_watermark if response is not None else -1
        self.local_log_start_offset = response.log_start_offset if response is not None else -1
        self.session: FetchSession | None = None
        self.watched: TopicPartition | None = None

    def partition_changed(self) -> None:
        """The partition changed (:meth:`odradek.replication.partition.Partition.changed`)."""
        if self.session is not None:
            self.session.mark(self.data.key)

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
        "_waiter",
        "cached_size",
        "clock",
        "creation_ms",
        "epoch",
        "evictable_by_all",
        "evictable_by_privileged",
        "id",
        "last_used_ms",
        "partitions",
        "pending",
        "privileged",
        "seq",
        "uses_topic_ids",
        "watchers",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[PartitionKey, CachedPartition],
        uses_topic_ids: bool,
        now_ms: int,
        watchers: FetchWatchers | None = None,
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
        self.watchers = watchers
        """The replica manager's registry; None: every fetch reads every partition (no watching)."""
        self.pending: dict[PartitionKey, int] = dict.fromkeys(partitions, 0)
        """The partitions the next fetch reads, with the :attr:`seq` of their latest mark: named by
        a request, changed since their last read, or not caught up then."""
        self.seq = 0
        """Counts marks; a read at seq ``s`` settles a partition only if not marked after ``s``."""
        self.clock = FetchClock()
        """The time of the latest fetch (a follower's partitions caught up count as fetched then)."""
        self._waiter: asyncio.Future[None] | None = None
        for cached in partitions.values():
            self.watch(cached)

    # -- what changed --------------------------------------------------------------------------

    def mark(self, key: PartitionKey) -> None:
        """``key`` must be read at the next fetch; a fetch waiting for a change returns."""
        self.seq += 1
        self.pending[key] = self.seq
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def settle(self, key: PartitionKey, read_seq: int) -> None:
        """A read at ``read_seq`` found ``key`` caught up: unless marked since, skip it until it changes."""
        if self.watchers is not None and self.pending.get(key, read_seq + 1) <= read_seq:
            del self.pending[key]

    def to_read(self) -> list[CachedPartition]:
        """The partitions a fetch reads: the pending ones (all without watchers), in session
        order when they are many, else in the order they were marked."""
        pending, partitions = self.pending, self.partitions
        if self.watchers is None:
            return list(partitions.values())
        if len(pending) * 4 >= len(partitions):
            return [c for key, c in partitions.items() if key in pending]
        return [partitions[key] for key in pending if key in partitions]

    async def wait_for_change(self, timeout_s: float) -> bool:
        """Wait until a partition of the session changes (True) or ``timeout_s`` passes (False)."""
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(waiter, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._waiter = None

    def watch(self, cached: CachedPartition) -> None:
        """Register ``cached`` with the partition's watchers (once its topic name is known)."""
        cached.session = self
        if self.watchers is None or cached.watched is not None or cached.data.topic is None:
            return
        cached.watched = tp = TopicPartition(cached.data.topic, cached.data.partition)
        self.watchers.setdefault(tp, set()).add(cached)

    def unwatch(self, cached: CachedPartition) -> None:
        cached.session = None
        tp, cached.watched = cached.watched, None
        if tp is not None and self.watchers is not None:
            watching = self.watchers.get(tp)
            if watching is not None:
                watching.discard(cached)
                if not watching:
                    del self.watchers[tp]

    def close(self) -> None:
        """The session left the cache: its partitions stop being watched."""
        for cached in self.partitions.values():
            self.unwatch(cached)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

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
                self.partitions[data.key] = cached = CachedPartition(data)
                self.watch(cached)
                added += 1
            else:
                cached.data = data
                updated += 1
            self.mark(data.key)
        for key in to_forget:
            cached = self.partitions.pop(key, None)
            if cached is not None:
                self.unwatch(cached)
                self.pending.pop(key, None)
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
        self.watchers: FetchWatchers | None = None
        """Given to the sessions created (see :class:`FetchSession`)."""
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
        session = FetchSession(
            self.new_session_id(), privileged, create_partitions(), uses_topic_ids, now_ms, self.watchers
        )
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
            removed.close()
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

    def watch(self, watchers: FetchWatchers) -> None:
        """Sessions created from now on register their partitions in ``watchers`` (the replica
        manager's) and read only what changed; without, every fetch reads every partition."""
        for shard in self.shards:
            shard.watchers = watchers
