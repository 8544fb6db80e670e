"""One partition as a replica: its log plus leadership state (Kafka's ``Partition``).

Holds ``leader_epoch``, ``leader_id``, ``isr``, ``replicas`` and the ``high_watermark`` rule.
With a single replica (or every follower in sync) the high watermark follows the log end
offset after each append; replication (followers, ISR shrink/expand) extends this class.

Called only from the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from odradek.errors import NotLeaderOrFollowerError
from odradek.storage import Log, TopicPartition


@dataclass
class PartitionState:
    """What the controller decided for this partition (LeaderAndIsr)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    controller_epoch: int = 0
    zk_version: int = 0


@dataclass(eq=False)
class Partition:
    topic_partition: TopicPartition
    broker_id: int
    log: Log
    state: PartitionState
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return int(self.log.high_watermark)

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark

    def check_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {self.topic_partition.topic}-"
                f"{self.topic_partition.partition} (leader is {self.state.leader})"
            )

    def maybe_increment_high_watermark(self) -> bool:
        """Advance the high watermark to the smallest log end offset in the ISR.

        With only the leader in the ISR that is the leader's log end offset. Returns True if it
        moved (and wakes long-polling fetches).
        """
        new_hw = self.log.log_end_offset
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            self.wake_waiters()
            return True
        return False

    # --- long-poll support -------------------------------------------------------------------

    def add_waiter(self, future: asyncio.Future[None]) -> None:
        self._waiters.append(future)

    def remove_waiter(self, future: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(future)
        except ValueError:
            pass

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
