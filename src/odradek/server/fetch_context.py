"""How one Fetch request is served: Kafka 3.9's ``FetchContext`` kinds and ``FetchManager``.

The session rules, the cache and what an incremental fetch reads are in
:mod:`odradek.server.fetch_session`. :meth:`FetchManager.new_context` turns a request's session id
and epoch into a context; the Fetch handler reads the partitions :meth:`FetchContext.partitions`
names and gives the reads to :meth:`FetchContext.answer`, which updates the session and says
which partitions the response carries. An :class:`IncrementalFetchContext` of a watching session
names only the session's pending partitions and, while none of them has anything to answer, its
handler waits with :meth:`IncrementalFetchContext.wait_for_change` and asks again.

Event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic

from odradek.errors import ErrorCode
from odradek.replication.partition import FetchClock, FetchWatchers
from odradek.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    PartitionData,
    PartitionKey,
    R,
    next_epoch,
)

__all__ = [
    "FetchAnswer",
    "FetchContext",
    "FetchManager",
    "FullFetchContext",
    "IncrementalFetchContext",
    "SessionlessFetchContext",
]


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

    @property
    def watching(self) -> bool:
        """Whether :meth:`partitions` names only what changed, so that the handler long-polls
        with :meth:`wait_for_change` and asks again (an incremental fetch of a watching session)."""
        return False

    @property
    def clock(self) -> FetchClock | None:
        """The session's clock (an incremental fetch), for a follower's fetch state."""
        return None

    async def wait_for_change(self, timeout_s: float) -> bool:
        """Wait for a change of the session's partitions (True) or ``timeout_s`` (False)."""
        raise NotImplementedError("only an incremental fetch of a watching session waits for changes")


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
        self.read_seq = session.seq
        """The session's mark count when :meth:`partitions` last chose what to read."""

    def partitions(self) -> list[PartitionData]:
        session = self.session
        self.read_seq = session.seq
        cached = session.to_read()
        if session.uses_topic_ids:
            for c in cached:
                if c.data.topic is None:
                    c.maybe_resolve_unknown_name(self.topic_names)
                    session.watch(c)
        return [c.data for c in cached]

    @property
    def watching(self) -> bool:
        return self.session.watchers is not None

    @property
    def clock(self) -> FetchClock:
        return self.session.clock

    async def wait_for_change(self, timeout_s: float) -> bool:
        return await self.session.wait_for_change(timeout_s)

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
            if cached is None:
                continue
            if response.caught_up:
                session.settle(data.key, self.read_seq)
            if not cached.must_respond(response, True):
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

    def __init__(self, cache: FetchSessionCache, watchers: FetchWatchers | None = None) -> None:
        self.cache = cache
        if watchers is not None:
            cache.watch(watchers)

    @property
    def watchers(self) -> FetchWatchers | None:
        """The replica manager's registry the sessions created from now on watch (see
        :mod:`odradek.server.fetch_session`); None: every fetch reads every partition."""
        return self.cache.shards[0].watchers if self.cache.shards else None

    @watchers.setter
    def watchers(self, watchers: FetchWatchers) -> None:
        self.cache.watch(watchers)

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
