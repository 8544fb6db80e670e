"""One partition as a replica: its log plus leadership state (Kafka's ``Partition``).

Holds ``leader_epoch``, ``leader_id``, ``isr``, ``replicas`` and, on the leader, what it knows of
each follower. The partition's :class:`~odradek.storage.log.Log` owns the leader epoch cache, the
producer and transaction state and the producer snapshots (``epoch_cache``, ``producer_state`` and
``txn_state`` here are its). The rules (SEEDS §3, Kafka's ``Partition.scala``):

- **High watermark** = the smallest log end offset over the ISR (the leader's included); it only
  moves forward. A follower in the ISR whose log end offset the new leader does not know yet
  holds it where it is until its first fetch.
- **Follower fetch state**: a fetch from replica ``r`` at ``fetch_offset`` tells the leader r's
  log end offset. r is *caught up* at that moment if ``fetch_offset`` >= the leader's log end
  offset, and was caught up at its previous fetch if ``fetch_offset`` >= the leader's log end
  offset as of that previous fetch (Kafka's ``lastCaughtUpTimeMs``).
- **ISR expansion**: a follower outside the ISR whose log end offset reaches the high watermark
  (and the current epoch's start offset) joins it. **ISR shrink**: a follower in the ISR not
  caught up for ``replica.lag.time.max.ms`` leaves it (``maybe_shrink_isr``, run periodically).
  Either change is written to the partition state znode with a conditional update on its
  ``zk_version`` by the ``isr_writer`` the replica manager supplies (the broker's is
  :class:`odradek.replication.isr_writer.ZkIsrWriter`); if the znode changed meanwhile (the
  controller moved on) the change is dropped and the next LeaderAndIsr decides. A change written
  is adopted and reported to ``on_isr_change`` (the replica manager's ``isr_changed``, which the
  broker propagates as an ISR change notification). One ISR update is in flight at a time.
- **min ISR**: an acks=all append to a leader whose ISR is smaller than ``min.insync.replicas`` is
  refused before it is written, NOT_ENOUGH_REPLICAS (:meth:`check_enough_replicas`).
- **acks=all**: :meth:`wait_for_offset` completes when the high watermark reaches the offset
  (NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR then holds fewer than
  ``min.insync.replicas``), when the broker stops leading (NOT_LEADER_OR_FOLLOWER) or at the
  timeout (REQUEST_TIMED_OUT): Kafka's ``DelayedProduce``.

Called only from the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from odradek.errors import ErrorCode, NotEnoughReplicasError, NotLeaderOrFollowerError
from odradek.metadata.znodes import LeaderAndIsr
from odradek.storage import Log, LogAppendInfo, TopicPartition
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.txn_state import TxnState

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("state.change.logger")
"""Kafka's state-change log: each new leadership or leader this broker follows (``makeLeader`` /
``makeFollower``), the lines the fault campaign's leader-loss stages are read from."""


@dataclass(frozen=True)
class PartitionState:
    """What the controller decided for this partition (LeaderAndIsr): the one partition state
    model of the controller, the broker and the inter-broker requests.

    Immutable: a state handed to a request or a :class:`Partition` never changes afterwards;
    a change is a new state (``dataclasses.replace``). The lists are not copied on access, so
    never mutate them either. The state znode holds all of it but ``replicas`` (which lives in
    the topic znode): :meth:`from_znode` and :meth:`to_znode` are the one conversion each way.
    """

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    controller_epoch: int = 0
    zk_version: int = 0

    @classmethod
    def from_znode(cls, znode: LeaderAndIsr, replicas: Sequence[int]) -> PartitionState:
        """The state of a partition whose state znode holds ``znode`` and whose assignment is
        ``replicas``; ``zk_version`` is the znode's version."""
        return cls(
            znode.leader, znode.leader_epoch, list(znode.isr), list(replicas), znode.controller_epoch, znode.zk_version
        )

    def to_znode(self) -> LeaderAndIsr:
        """The state znode's content (everything but ``replicas``)."""
        return LeaderAndIsr(
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            isr=list(self.isr),
            controller_epoch=self.controller_epoch,
            zk_version=self.zk_version,
        )


IsrWriter = Callable[[TopicPartition, PartitionState], Awaitable[int | None]]
"""Writes ``state`` (a new ISR) to the partition state znode if its version is still
``state.zk_version``; returns the new version, or None when the znode changed meanwhile."""


ISR_SHRINKS, ISR_EXPANDS, FOLLOWER_BYTES_IN = range(3)
"""Indexes of :attr:`Partition.counters`."""


class FetchClock:
    """The time of an incremental fetch session's latest fetch (wall-clock ms), shared by every
    partition of the session a follower was caught up in when last read (:attr:`FollowerState.clock`).

    An idle session's fetch reads none of its partitions (:mod:`odradek.server.fetch_session`);
    moving this one clock counts, for each of them, as the fetch at the log end offset it would
    have been: the follower is caught up as of ``ms`` until the partition changes."""

    __slots__ = ("ms",)

    def __init__(self, ms: int = 0) -> None:
        self.ms = ms


class PartitionWatcher(Protocol):
    """Told of every change of a partition a fetch could see (:meth:`Partition.changed`)."""

    def partition_changed(self) -> None: ...


FetchWatchers = dict[TopicPartition, set[PartitionWatcher]]
"""The replica manager's registry of the watchers of each partition (the incremental fetch
sessions' cached partitions), by topic partition: it outlives the :class:`Partition` objects."""


@dataclass
class FollowerState:
    """The leader's view of one follower (Kafka's ``Replica``)."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    clock: FetchClock | None = None
    """The clock of the session whose last read found this follower caught up, while the
    partition has not changed since: the follower counts as caught up at ``clock.ms``."""

    def caught_up_ms(self) -> int:
        """``last_caught_up_time_ms``, or the session clock's time if later."""
        clock = self.clock
        if clock is not None and clock.ms > self.last_caught_up_time_ms:
            return clock.ms
        return self.last_caught_up_time_ms

    def settle_clock(self) -> None:
        """The partition changed (or this follower's fetch did): keep the clock's time, drop the clock."""
        self.last_caught_up_time_ms = self.caught_up_ms()
        self.clock = None


@dataclass(eq=False)
class Partition:
    topic_partition: TopicPartition
    broker_id: int
    log: Log
    state: PartitionState
    epoch_cache: LeaderEpochFileCache | None = None
    replica_lag_time_max_ms: int = 30000
    isr_writer: IsrWriter | None = None
    on_isr_change: Callable[[TopicPartition], None] | None = None
    counters: list[int] | None = None
    """Counters shared by the replica manager's partitions, indexed by :data:`ISR_SHRINKS`,
    :data:`ISR_EXPANDS` (ISR changes this leader made: Kafka's ``IsrShrinksPerSec`` /
    ``IsrExpandsPerSec``) and :data:`FOLLOWER_BYTES_IN` (bytes appended as a follower: Kafka's
    ``ReplicationBytesInPerSec``)."""
    follower_lag: int = 0
    """As a follower: the leader's high watermark in its last fetch response minus this log's end
    offset (Kafka's fetcher lag, whose maximum is ``ReplicaFetcherManager`` ``MaxLag``)."""
    followers: dict[int, FollowerState] = field(default_factory=dict)
    leader_epoch_start_offset: int = 0
    watchers: FetchWatchers | None = None
    """The replica manager's registry; :meth:`changed` tells this partition's watchers."""
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _follower_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _produce_waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = field(default_factory=list)
    _isr_update: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        if self.epoch_cache is None:
            self.epoch_cache = self.log.leader_epoch_cache

    @property
    def producer_state(self) -> ProducerStateManager:
        """The log's producer state (:class:`odradek.storage.log.Log` decides it in the append)."""
        return self.log.producer_state

    @property
    def txn_state(self) -> TxnState:
        """The log's transaction state."""
        return self.log.txn_state

    # --- identity ----------------------------------------------------------------------------

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
        """``min(first unstable offset, high watermark)``: read_committed reads stop there."""
        return self.log.last_stable_offset

    @property
    def in_sync_replica_count(self) -> int:
        return len(self.state.isr)

    def check_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {self.topic_partition.topic}-"
                f"{self.topic_partition.partition} (leader is {self.state.leader})"
            )

    # --- leadership changes (LeaderAndIsr) ----------------------------------------------------

    def make_leader(self, state: PartitionState, now_ms: int) -> bool:
        """Become (or stay) leader with ``state``; True if this is a new leader epoch for us.

        A new leader does not know its followers' log end offsets until they fetch; those in the
        ISR count as caught up now, so they are not shrunk out before they had a chance to fetch.
        A leader that stays leader under a new epoch (the controller shrank the ISR, a
        reassignment) keeps what it knows of its followers (Kafka's ``resetReplicaState``), so the
        high watermark can move with the new ISR at once; long-polling fetches are woken, and a
        follower's fetch parked with the old epoch is answered FENCED_LEADER_EPOCH now rather than
        at the end of its wait.
        """
        was_leader = self.is_leader
        new_epoch = not was_leader or state.leader_epoch != self.state.leader_epoch
        previous_epoch = self.state.leader_epoch
        self.state = state
        if new_epoch:
            self.leader_epoch_start_offset = self.log.log_end_offset
            assert self.epoch_cache is not None
            self.epoch_cache.assign(state.leader_epoch, self.leader_epoch_start_offset)
            known = self.followers if was_leader else {}
            self.followers = {}
            for r in state.replicas:
                if r == self.broker_id:
                    continue
                follower = known.get(r) or FollowerState(r)
                follower.last_caught_up_time_ms = now_ms if r in state.isr else follower.last_caught_up_time_ms
                self.followers[r] = follower
        else:
            for r in state.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerState(r)
            for r in list(self.followers):
                if r not in state.replicas:
                    del self.followers[r]
        self.maybe_increment_high_watermark()
        if new_epoch and was_leader:
            self.wake_waiters()
            self.complete_delayed_produces()
        elif new_epoch:
            self.changed()
        if new_epoch:
            tp = self.topic_partition
            state_change_log.info(
                "[Broker id=%d] Leader %s-%d starts at leader epoch %d from offset %d with high watermark %d,"
                " ISR %s. Previous leader epoch was %d.",
                self.broker_id,
                tp.topic,
                tp.partition,
                state.leader_epoch,
                self.log.log_end_offset,
                self.high_watermark,
                state.isr,
                previous_epoch,
            )
        return new_epoch

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader``; True if the leader or its epoch changed (fetching restarts)."""
        changed = self.state.leader != state.leader or self.state.leader_epoch != state.leader_epoch
        was_leader = self.is_leader
        previous_epoch = self.state.leader_epoch
        self.state = state
        self.followers = {}
        if was_leader:
            self.complete_delayed_produces()  # now NOT_LEADER_OR_FOLLOWER
            self.changed()
        if (changed or was_leader) and state.leader >= 0:
            tp = self.topic_partition
            state_change_log.info(
                "[Broker id=%d] Follower %s-%d starts at leader epoch %d from offset %d with high watermark %d."
                " Current leader is %d. Previous leader epoch was %d.",
                self.broker_id,
                tp.topic,
                tp.partition,
                state.leader_epoch,
                self.log.log_end_offset,
                self.high_watermark,
                state.leader,
                previous_epoch,
            )
        return changed or was_leader

    # --- appends -----------------------------------------------------------------------------

    def append_records_as_follower(self, records: bytes | memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader, offsets as the leader assigned them
        (:meth:`odradek.storage.log.Log.append_as_follower`: new epochs in the batches go to the
        epoch cache, the batches to the producer and transaction state)."""
        info = self.log.append_as_follower(records)
        if self.counters is not None:
            self.counters[FOLLOWER_BYTES_IN] += info.valid_bytes
        return info

    def truncate_to(self, offset: int) -> None:
        """Follower truncation (divergent tail); the log's epoch cache and producer state follow."""
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower whose log lies outside the leader's: start empty at ``offset``."""
        self.log.truncate_fully_and_start_at(offset)

    def replace_log(self, log_: Log) -> None:
        """The log moved to another log dir (same contents, its state loaded from there)."""
        self.log = log_
        self.epoch_cache = log_.leader_epoch_cache

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        self.follower_lag = max(0, leader_high_watermark - self.log.log_end_offset)
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            self.wake_waiters()

    # --- follower fetches on the leader --------------------------------------------------------

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, now_ms: int, clock: FetchClock | None = None
    ) -> None:
        """A fetch from follower ``replica_id`` at ``fetch_offset`` (its log end offset); ``clock``
        is its incremental session's (:class:`FetchClock`), None for a fetch without a session."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        if follower.clock is not None:
            follower.settle_clock()
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            follower.last_caught_up_time_ms = now_ms
            follower.clock = clock
        elif fetch_offset >= follower.last_fetch_leader_log_end_offset >= 0:
            follower.last_caught_up_time_ms = max(follower.last_caught_up_time_ms, follower.last_fetch_time_ms)
        follower.last_fetch_leader_log_end_offset = leader_leo
        follower.last_fetch_time_ms = now_ms
        moved = follower.log_end_offset != fetch_offset
        follower.log_end_offset = fetch_offset
        if (
            replica_id not in self.state.isr
            and fetch_offset >= self.high_watermark
            and fetch_offset >= self.leader_epoch_start_offset
        ):
            self._request_isr_change([*self.state.isr, replica_id], f"replica {replica_id} caught up")
        if moved:  # the same offset again (an idle follower's long polls) cannot move the high watermark
            self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        """Advance the high watermark to the smallest log end offset in the ISR.

        Returns True if it moved (and wakes long-polling fetches and waiting acks=all produces).
        """
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for r in self.state.isr:
            if r == self.broker_id:
                continue
            follower = self.followers.get(r)
            if follower is None or follower.log_end_offset < 0:
                return False
            new_hw = min(new_hw, follower.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            self.wake_waiters()
            self.complete_delayed_produces()
            return True
        return False

    def out_of_sync_replicas(self, now_ms: int) -> list[int]:
        return [
            r
            for r in self.state.isr
            if r != self.broker_id
            and (f := self.followers.get(r)) is not None
            and now_ms - f.caught_up_ms() > self.replica_lag_time_max_ms
        ]

    def maybe_shrink_isr(self, now_ms: int) -> None:
        """Drop followers not caught up for ``replica.lag.time.max.ms`` from the ISR (leader only)."""
        if not self.is_leader:
            return
        lagging = self.out_of_sync_replicas(now_ms)
        if lagging:
            new_isr = [r for r in self.state.isr if r not in lagging]
            self._request_isr_change(new_isr, f"replicas {lagging} not caught up for {self.replica_lag_time_max_ms} ms")

    def _request_isr_change(self, new_isr: list[int], reason: str) -> None:
        if self.isr_writer is None or (self._isr_update is not None and not self._isr_update.done()):
            return
        self._isr_update = asyncio.get_running_loop().create_task(self._update_isr(new_isr, reason))

    async def _update_isr(self, new_isr: list[int], reason: str) -> None:
        try:
            await self._write_isr(new_isr, reason)
        finally:  # written or not, fetch sessions read the partition again (a follower's expansion is retried)
            self.changed()

    async def _write_isr(self, new_isr: list[int], reason: str) -> None:
        assert self.isr_writer is not None
        tp = self.topic_partition
        proposed = replace(self.state, isr=new_isr)
        try:
            version = await self.isr_writer(tp, proposed)
        except Exception:
            log.exception("cannot write the ISR of %s-%d", tp.topic, tp.partition)
            return
        if version is None:
            log.info(
                "%s-%d: ISR update to %s skipped: the partition state changed (zk version %d is stale)",
                tp.topic,
                tp.partition,
                new_isr,
                proposed.zk_version,
            )
            return
        if not self.is_leader or self.state.leader_epoch != proposed.leader_epoch:
            return
        old = self.state.isr
        self.state = replace(proposed, zk_version=version)
        log.info("%s-%d: ISR %s -> %s (%s)", tp.topic, tp.partition, old, new_isr, reason)
        if self.counters is not None:
            self.counters[ISR_SHRINKS if len(new_isr) < len(old) else ISR_EXPANDS] += 1
        if self.on_isr_change is not None:
            self.on_isr_change(tp)
        self.maybe_increment_high_watermark()
        self.complete_delayed_produces()

    # --- acks=all ----------------------------------------------------------------------------

    def wait_for_offset(self, required_offset: int) -> asyncio.Future[ErrorCode]:
        """A future completed with the acks=all outcome once the HW reaches ``required_offset``."""
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._produce_waiters.append((required_offset, fut))
        self.complete_delayed_produces()
        return fut

    @property
    def min_insync_replicas(self) -> int:
        """The log's ``min.insync.replicas`` (a topic override, else the broker's default)."""
        return int(self.log.config.get("min.insync.replicas"))

    def check_enough_replicas(self, required_acks: int) -> None:
        """Before an append to this leader: with ``required_acks`` -1 (acks=all) an ISR smaller
        than ``min.insync.replicas`` raises NotEnoughReplicasError and nothing is appended (Kafka's
        ``appendRecordsToLeader`` check); acks 0 and 1 always pass."""
        min_isr = self.min_insync_replicas
        if required_acks == -1 and len(self.state.isr) < min_isr:
            tp = self.topic_partition
            raise NotEnoughReplicasError(
                f"{tp.topic}-{tp.partition} has {len(self.state.isr)} in-sync replicas, "
                f"fewer than min.insync.replicas={min_isr}"
            )

    def complete_delayed_produces(self) -> None:
        """Complete the acks=all waits this state decides (Kafka's ``checkEnoughReplicasReachOffset``):
        NOT_LEADER_OR_FOLLOWER once this broker no longer leads; once the high watermark reached a
        wait's offset, NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is then smaller than
        ``min.insync.replicas``; the others keep waiting."""
        if not self._produce_waiters:
            return
        leader = self.is_leader
        hw = self.high_watermark
        min_isr = self.min_insync_replicas
        keep: list[tuple[int, asyncio.Future[ErrorCode]]] = []
        for offset, fut in self._produce_waiters:
            if fut.done():
                continue
            if not leader:
                fut.set_result(ErrorCode.not_leader_or_follower)
            elif hw >= offset:
                enough = len(self.state.isr) >= min_isr
                fut.set_result(ErrorCode.none if enough else ErrorCode.not_enough_replicas_after_append)
            else:
                keep.append((offset, fut))
        self._produce_waiters = keep

    # --- long-poll support -------------------------------------------------------------------

    def add_waiter(self, future: asyncio.Future[None], follower: bool = False) -> None:
        """A long-polling fetch: a consumer's waits for the high watermark to move, a follower's
        (``follower``) for the log end offset (Kafka's DelayedFetch completes them apart)."""
        (self._follower_waiters if follower else self._waiters).append(future)

    def remove_waiter(self, future: asyncio.Future[None]) -> None:
        for waiters in (self._waiters, self._follower_waiters):
            try:
                waiters.remove(future)
            except ValueError:
                pass

    def wake_waiters(self) -> None:
        """The high watermark moved (or the partition changed): wake every long-polling fetch."""
        self.wake_follower_waiters()
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def wake_follower_waiters(self) -> None:
        """The log end offset moved: followers waiting for new batches fetch them now."""
        self.changed()
        waiters, self._follower_waiters = self._follower_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def changed(self) -> None:
        """Something a fetch of this partition answers may have changed (log end offset, high
        watermark, last stable or log start offset, leadership, the partition's removal): the
        followers' session clocks stop counting here, and the watchers (the incremental fetch
        sessions holding this partition) read it at their next fetch. Called on every append
        (through :meth:`wake_follower_waiters`): costs a dict lookup and a look at each follower."""
        for follower in self.followers.values():
            if follower.clock is not None:
                follower.settle_clock()
        watchers = self.watchers.get(self.topic_partition) if self.watchers is not None else None
        if watchers:
            for watcher in watchers:
                watcher.partition_changed()
