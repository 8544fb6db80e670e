"""The fetching side of incremental fetch sessions (KIP-227), as Kafka's ``FetchSessionHandler``.

One handler per connection target (a replica fetcher keeps one for its leader). Before each Fetch,
:meth:`FetchSessionHandler.build` takes every partition to fetch with its request parameters
(:class:`PartitionParams`) and says what to send:

- no session yet (or after an error): a full request, ``session_id`` 0 (or the old session's id,
  which the leader then closes) and epoch 0, naming every partition;
- in a session: an incremental request, the session's id and next epoch, naming only the
  partitions added or whose parameters changed (fetch offset, log start offset, leader epoch, last
  fetched epoch, max bytes) and forgetting (``forgotten_topics_data``) those no longer fetched.

:meth:`FetchSessionHandler.handle_response` then reads the answer's ``error_code`` and
``session_id`` and the partitions it carries: a full answer with a session id opens the session
(epoch 1 next); session id 0 leaves none (the next request is full again); an incremental answer
moves the epoch on. FETCH_SESSION_ID_NOT_FOUND starts over with a full request;
INVALID_FETCH_SESSION_EPOCH or any other top-level error, a full answer not naming exactly the
partitions asked for, or an incremental answer naming a partition outside the session, closes the
session with the next (full) request. :meth:`FetchSessionHandler.handle_error` (no answer: lost
connection, timeout) does the same, since the leader may or may not have seen the request.

Partitions are identified by :class:`odradek.storage.TopicPartition` (the fetcher names topics,
Fetch v12). Plain state, no I/O: one task (the fetcher's) at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import ErrorCode
from odradek.storage import TopicPartition

__all__ = ["FetchRequestData", "FetchSessionHandler", "PartitionParams"]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class PartitionParams:
    """What a Fetch says of one partition (Kafka's ``FetchRequest.PartitionData``)."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """One request's session fields and partitions: ``to_send`` the partitions to name (every one
    in a full request), ``to_forget`` the partitions to drop from the session."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionParams]
    to_forget: list[TopicPartition]

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """See the module docstring."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[TopicPartition, PartitionParams] = {}
        """The partitions the leader's session holds, with the parameters it was last told."""
        self.full_requests = 0
        self.incremental_requests = 0

    def build(self, partitions: dict[TopicPartition, PartitionParams]) -> FetchRequestData:
        """The next request for ``partitions`` (every partition to fetch now, in fetch order)."""
        if self.epoch == INITIAL_EPOCH:
            self.session_partitions = dict(partitions)
            self.full_requests += 1
            return FetchRequestData(self.session_id, INITIAL_EPOCH, dict(partitions), [])
        to_send = {tp: p for tp, p in partitions.items() if self.session_partitions.get(tp) != p}
        to_forget = [tp for tp in self.session_partitions if tp not in partitions]
        for tp in to_forget:
            del self.session_partitions[tp]
        self.session_partitions.update(to_send)
        self.incremental_requests += 1
        return FetchRequestData(self.session_id, self.epoch, to_send, to_forget)

    @property
    def needs_full(self) -> bool:
        """Whether the next request is a full one (no session, or starting over)."""
        return self.epoch == INITIAL_EPOCH

    def build_changes(
        self, changed: dict[TopicPartition, PartitionParams], to_forget: list[TopicPartition]
    ) -> FetchRequestData:
        """The next incremental request when the caller knows what changed: ``changed`` holds the
        partitions added or whose parameters may have changed (those equal to what the session
        holds are left out), ``to_forget`` the session's partitions no longer fetched. Only in a
        session (not :attr:`needs_full`): costs what changed, not what the session holds."""
        assert not self.needs_full
        known = self.session_partitions
        to_send = {tp: p for tp, p in changed.items() if known.get(tp) != p}
        for tp in to_forget:
            known.pop(tp, None)
        known.update(to_send)
        self.incremental_requests += 1
        return FetchRequestData(self.session_id, self.epoch, to_send, to_forget)

    def handle_response(
        self, sent: FetchRequestData, error_code: int, session_id: int, answered: set[TopicPartition]
    ) -> bool:
        """Follow the answer to ``sent``; whether its partitions may be used."""
        if error_code != ErrorCode.none:
            if error_code == ErrorCode.fetch_session_id_not_found:
                self._reset(INVALID_SESSION_ID)
            else:
                self._reset(self.session_id)
            return False
        if sent.is_full:
            if answered != set(sent.to_send):
                self._reset(session_id)
                return False
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
            return True
        if not self.session_partitions.keys() >= answered:
            self._reset(self.session_id)
            return False
        if session_id == INVALID_SESSION_ID:  # the leader closed the session
            self._reset(INVALID_SESSION_ID)
            return True
        self.epoch = 1 if self.epoch == MAX_INT32 else self.epoch + 1
        return True

    def handle_error(self) -> None:
        """No answer came (see the module docstring)."""
        self._reset(self.session_id)

    def _reset(self, close_session_id: int) -> None:
        """Next request full; it closes ``close_session_id`` on the leader (0: none)."""
        self.session_id = close_session_id
        self.epoch = INITIAL_EPOCH
        self.session_partitions = {}
