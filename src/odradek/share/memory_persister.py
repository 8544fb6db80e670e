"""A persister kept in memory (placeholder until the share coordinator is wired)."""

from __future__ import annotations

from odradek.errors import ErrorCode
from odradek.share.state import SharePartitionKey, ShareState, ShareStateError, StateBatch


class InMemoryPersister:
    def __init__(self) -> None:
        self.states: dict[SharePartitionKey, ShareState] = {}

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            raise ShareStateError(ErrorCode.fenced_state_epoch)
        self.states[key] = ShareState(state_epoch, start_offset)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        return self.states.get(key)

    async def write_state(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch]
    ) -> None:
        old = self.states.get(key) or ShareState(state_epoch, -1)
        start = start_offset if start_offset >= 0 else old.start_offset
        kept = [
            b
            for b in old.batches
            if not any(n.first_offset <= b.last_offset and b.first_offset <= n.last_offset for n in batches)
        ]
        merged = tuple(sorted((b for b in [*kept, *batches] if b.last_offset >= start), key=lambda b: b.first_offset))
        self.states[key] = ShareState(state_epoch, start, leader_epoch, merged)

    async def delete_state(self, key: SharePartitionKey) -> None:
        self.states.pop(key, None)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        s = self.states.get(key)
        return None if s is None else ShareState(s.state_epoch, s.start_offset, s.leader_epoch)
