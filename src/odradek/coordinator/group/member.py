"""One member of a classic group, and the results handed back to parked JoinGroup/SyncGroup calls.

A member is identified by ``member_id`` (``<client id or group.instance.id>-<uuid4>``, made by the
coordinator) and, for static members (KIP-345), also by ``group_instance_id``. It supports one or
more protocols (for consumers: assignor names such as ``range`` or ``cooperative-sticky``), each
with opaque metadata (the consumer's subscription); the group picks one protocol every generation.

``awaiting_join`` / ``awaiting_sync`` hold the callback of a parked JoinGroup / SyncGroup: set
while the request waits, cleared when it is answered. Event loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from odradek.coordinator.runtime import Timer
from odradek.errors import ErrorCode

__all__ = ["JoinCallback", "JoinGroupResult", "JoinRequest", "MemberMetadata", "SyncCallback", "SyncGroupResult"]


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """The answer to one JoinGroup. ``members`` (id, instance id, metadata) only for the leader."""

    member_id: str
    error: ErrorCode = ErrorCode.none
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode = ErrorCode.none
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """One JoinGroup as the coordinator sees it. ``require_known_member_id``: v4+ (KIP-394);
    ``support_skipping_assignment``: v9+ (a static leader rejoining a stable group is told to
    skip the assignment instead of being hidden)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True
    support_skipping_assignment: bool = False
    reason: str | None = None


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    is_new: bool = False
    """Added by a JoinGroup that has not been answered yet: its session timer is the (long)
    new-member join timeout, and it is expired even while awaiting the join."""
    heartbeat_timer: Timer | None = field(default=None, repr=False)
    """The pending session-expiry timer (an object with ``cancel()``), or None."""

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for ``protocol``; raises KeyError if it does not support it."""
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata."""
        return list(protocols) == list(self.supported_protocols)

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among ``candidates`` (its list is in preference order)."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def answer_join(self, result: JoinGroupResult) -> bool:
        """Answer the parked JoinGroup, if any. Returns whether there was one."""
        callback, self.awaiting_join = self.awaiting_join, None
        if callback is None:
            return False
        callback(result)
        return True

    def answer_sync(self, result: SyncGroupResult) -> bool:
        """Answer the parked SyncGroup, if any. Returns whether there was one."""
        callback, self.awaiting_sync = self.awaiting_sync, None
        if callback is None:
            return False
        callback(result)
        return True

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None
