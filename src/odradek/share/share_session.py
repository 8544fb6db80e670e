"""Share sessions (KIP-932), as Kafka's ``ShareSessionCache``: what a share consumer fetches from
one broker, kept between its ShareFetch requests so each need only name what changed.

A session is keyed by (group id, member id). Its epoch numbers the requests:

- ShareFetch with epoch 0 opens a session (replacing the member's earlier one on this broker,
  whose acquired records are then released). The session's partitions are the request's topics.
  ShareAcknowledge cannot open one: INVALID_SHARE_SESSION_EPOCH.
- Epoch -1 closes it (after its acknowledgements are applied); the member's acquired records on
  the session's partitions are released. A ShareFetch with epoch -1 may not fetch: INVALID_REQUEST.
- Any other epoch must be the session's next: no session is SHARE_SESSION_NOT_FOUND, another
  epoch INVALID_SHARE_SESSION_EPOCH. The request's topics join the session, its forgotten topics
  leave it; the epoch then moves on (after 2^31-1 it wraps to 1).

``group.share.max.share.sessions`` (Kafka's default 2000) bounds the sessions a broker keeps; a
new one past it is SHARE_SESSION_LIMIT_REACHED (the consumer retries later).

Event loop only.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's default ``group.share.max.share.sessions``.
DEFAULT_MAX_SHARE_SESSIONS = 2000


@dataclass(frozen=True, slots=True)
class ShareTopicPartition:
    """A partition as a share session names it: by topic id, with the name it resolved to."""

    topic_id: uuid.UUID
    topic: str
    partition: int


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ``ShareRequestMetadata.nextEpoch``: wraps to 1)."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class ShareSession:
    """One member's session on this broker. ``epoch`` is the epoch its next request must carry;
    ``partitions`` keeps insertion order (the order answers list them in)."""

    group_id: str
    member_id: str
    epoch: int
    connection_id: str
    last_used_ms: int
    partitions: dict[ShareTopicPartition, None] = field(default_factory=dict)

    def add(self, parts: list[ShareTopicPartition]) -> None:
        for p in parts:
            self.partitions.setdefault(p, None)

    def forget(self, parts: list[ShareTopicPartition]) -> list[ShareTopicPartition]:
        """Remove ``parts``; returns those that were in the session."""
        return [p for p in parts if self.partitions.pop(p, 0) is None]


class ShareSessionCache:
    """The sessions of this broker's share consumers (Kafka's ``ShareSessionCache``)."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SHARE_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, connection_id: str, now_ms: int) -> ShareSession | ErrorCode:
        """A new session at epoch 1 (the next request's), or SHARE_SESSION_LIMIT_REACHED.
        The caller has already closed (and released) the member's earlier session."""
        if len(self._sessions) >= self.max_sessions and (group_id, member_id) not in self._sessions:
            return ErrorCode.share_session_limit_reached
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection_id, now_ms)
        self._sessions[(group_id, member_id)] = session
        return session

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession | ErrorCode:
        """The session a request with ``epoch`` (not 0) continues, or its error; does not advance."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.share_session_not_found
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch
        return session

    def advance(self, session: ShareSession, connection_id: str, now_ms: int) -> None:
        session.epoch = next_epoch(session.epoch)
        session.connection_id = connection_id
        session.last_used_ms = now_ms

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def of_connection(self, connection_id: str) -> list[ShareSession]:
        """The sessions last used over ``connection_id`` (to close when it closes)."""
        return [s for s in self._sessions.values() if s.connection_id == connection_id]

    def of_group(self, group_id: str) -> list[ShareSession]:
        """The sessions of ``group_id``'s members on this broker."""
        return [s for (g, _), s in self._sessions.items() if g == group_id]
