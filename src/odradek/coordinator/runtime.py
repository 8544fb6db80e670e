"""What the group and transaction coordinators share (after Kafka's ``CoordinatorRuntime``).

Each coordinator keeps its state in the partitions of one internal topic (``__consumer_offsets``,
``__transaction_state``); this broker coordinates the keys of the partitions it leads. A
:class:`CoordinatorRuntime` owns, for one coordinator:

**Ownership and loading**, one rule keyed by the partition's leader epoch (the coordinator epoch),
as Kafka's ``scheduleLoadOperation`` / ``scheduleUnloadOperation``:

- a partition this broker leads at epoch ``e`` is loaded (the coordinator's
  :class:`PartitionLoader` replays it) unless it is already loaded or loading at ``e`` or newer;
- a newer epoch supersedes: what was loaded is dropped, a load in flight is abandoned (its result
  is discarded when it completes) and the partition is loaded again at the new epoch;
- a load that fails leaves the partition unowned; the next request or leadership notice loads it
  again;
- leadership lost (LeaderAndIsr as follower, StopReplica) or the coordinator stopping: unloaded.

The broker reports leadership through :class:`LeadershipListener`; every request also checks
(:meth:`CoordinatorRuntime.status`) against the replica's current leader epoch, so a leadership
whose notice has not arrived is loaded on first use. Status: NONE when loaded at the current
epoch, COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR when this broker does not lead
the partition, COORDINATOR_NOT_AVAILABLE before :meth:`~CoordinatorRuntime.start` and after
:meth:`~CoordinatorRuntime.stop`.

**Writes** (:meth:`CoordinatorRuntime.write`): one batch appended as leader with acks=-1, then
(optionally) the acks=all wait of the replica manager; NOT_COORDINATOR when the partition is not
loaded, or was unloaded or reloaded under a new epoch while the write waited.

**FindCoordinator** (:meth:`CoordinatorRuntime.find_coordinator`): the internal topic is created
on first use (once at a time); the answer is the live leader of the key's partition
(``abs(java hash) % partitions``, over the topic's partition count once the metadata cache has it,
the configured count before).

**Tasks and timers**: :meth:`~CoordinatorRuntime.spawn` (tracked, failures logged),
:meth:`~CoordinatorRuntime.every` (a periodic action), :meth:`~CoordinatorRuntime.call_later`
(a timer, from the dependencies' clock in unit tests); :meth:`~CoordinatorRuntime.stop` cancels
every task.

The dependencies come in :class:`RuntimeDeps`, built by the broker's start-up: the internal
topic's partitions on this broker (:class:`InternalTopicLog`, :class:`ReplicaInternalLog` over the
replica manager; :class:`LocalInternalLog` over plain logs, outside a broker), a
:class:`MetadataView`, a create-internal-topic callable and the clock. Event
loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from odradek.errors import ErrorCode, KafkaError, NotLeaderOrFollowerError
from odradek.protocol.java_hash import key_partition
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.log import Log, wall_clock_ms
from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "AppendResult",
    "CallLater",
    "ConfigSource",
    "CoordinatorRuntime",
    "CreateInternalTopic",
    "InternalTopic",
    "InternalTopicLog",
    "LeadershipListener",
    "LocalInternalLog",
    "MetadataView",
    "PartitionLoader",
    "ReplicaInternalLog",
    "RuntimeDeps",
    "Timer",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

AppendResult = tuple[ErrorCode, int]
"""(error, offset of the last record appended; -1 on error)."""


# --- what the runtime needs --------------------------------------------------------------------------


class ConfigSource(Protocol):
    """The broker's settings by ``server.properties`` key (a KafkaConfig)."""

    def __getitem__(self, name: str, /) -> Any: ...


class Timer(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[int, Callable[[], None]], Timer]
"""``call_later(delay_ms, fn)``: run ``fn`` on the loop after ``delay_ms``; the timer cancels it."""

CreateInternalTopic = Callable[[str, int, int, Mapping[str, str]], Awaitable[None]]
"""``create(name, partitions, replication_factor, configs)``: create the topic if missing (the
replication factor capped at the live brokers); raises KafkaError when it cannot."""


class InternalTopicLog(Protocol):
    """The internal topic's partitions on this broker; failures come back as error codes."""

    def leader_epoch(self, partition: int) -> int | None:
        """The leader epoch of ``partition`` if this broker leads it, else None."""
        ...

    def append(self, partition: int, records: bytes) -> AppendResult:
        """Append one record batch as leader (acks=-1: ``min.insync.replicas`` applies)."""
        ...

    async def wait_durable(self, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        """Wait until the high watermark passes ``last_offset``: NONE, REQUEST_TIMED_OUT after
        ``timeout_ms``, NOT_LEADER_OR_FOLLOWER if leadership was lost meanwhile,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below ``min.insync.replicas``."""
        ...

    def bounds(self, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset); raises KafkaError if the partition is not here."""
        ...

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        """Whole stored batches from the one holding ``offset`` (at least one batch if any)."""
        ...


class MetadataView(Protocol):
    """What the coordinators read of the broker's metadata cache (filled by UpdateMetadata)."""

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count; None while the cache does not know the topic."""
        ...

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader; -1 when unknown or offline."""
        ...

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """(host, port) of a live broker's first listener; None if it is not live."""
        ...

    def alive_broker_ids(self) -> list[int]: ...


class LeadershipListener(Protocol):
    """Told by the broker, after the replica manager applied LeaderAndIsr or StopReplica."""

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None: ...

    def on_become_follower(self, tp: TopicPartition) -> None: ...


class PartitionLoader(Protocol[T]):
    """A coordinator's part in loading: replay a partition, take over what was read, drop it."""

    async def replay(self, partition: int, epoch: int) -> T | None:
        """Read ``partition``; None when it cannot be read (logged). May stop early (returning
        None) once :meth:`CoordinatorRuntime.is_loading` no longer holds for ``epoch``."""
        ...

    def install(self, partition: int, epoch: int, loaded: T) -> None:
        """Take over what :meth:`replay` read; ``partition`` is owned at ``epoch`` already."""
        ...

    def unload(self, partition: int) -> None:
        """Forget the state of ``partition`` (no longer owned)."""
        ...


@dataclass(frozen=True, slots=True)
class RuntimeDeps:
    """What a coordinator's runtime takes from the broker."""

    log: InternalTopicLog
    metadata: MetadataView
    create_internal_topic: CreateInternalTopic
    time_ms: Callable[[], int] = wall_clock_ms
    call_later: CallLater | None = None
    """None: the running event loop's ``call_later``."""


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """The internal topic a coordinator keeps its state in, and how it is created."""

    name: str
    partitions: int
    """The configured partition count (used until the metadata cache knows the topic)."""
    replication_factor: int
    configs: Callable[[int], Mapping[str, str]] = field(default=lambda _live: {})
    """Topic configs at creation, given the number of live brokers."""


# --- the replica manager's partitions ------------------------------------------------------------------


class ReplicaInternalLog:
    """:class:`InternalTopicLog` over the broker's replica manager: appends through
    ``append_records`` (acks=-1, origin ``coordinator``), durability through its acks=all wait
    (``wait_for_acks``, Kafka's DelayedProduce)."""

    def __init__(self, replica_manager: ReplicaManager, topic: str) -> None:
        self._replica_manager = replica_manager
        self.topic = topic

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def leader_epoch(self, partition: int) -> int | None:
        p = self._replica_manager.partitions.get(self._tp(partition))
        return int(p.leader_epoch) if p is not None and p.is_leader else None

    def append(self, partition: int, records: bytes) -> AppendResult:
        try:
            info = self._replica_manager.append_records(self._tp(partition), records, -1, "coordinator")
        except KafkaError as exc:
            return exc.error_code, -1
        return ErrorCode.none, int(info.last_offset)

    async def wait_durable(self, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        return await self._replica_manager.wait_for_acks(self._tp(partition), last_offset + 1, timeout_ms)

    def bounds(self, partition: int) -> tuple[int, int]:
        return _log_bounds(self._replica_manager.get_partition(self._tp(partition)).log)

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        return _log_read(self._replica_manager.get_partition(self._tp(partition)).log, offset, max_bytes)


def _log_bounds(log_: Log) -> tuple[int, int]:
    return int(log_.log_start_offset), int(log_.log_end_offset)


def _log_read(log_: Log, offset: int, max_bytes: int) -> bytes:
    """Whole batches from the one holding ``offset``; across the gaps a cleaned log has (an
    offset the cleaner removed reads from the next batch kept, in a later segment if need be)."""
    return bytes(log_.read(offset, max_bytes, None, True).records_bytes())


class LocalInternalLog:
    """:class:`InternalTopicLog` over plain :class:`~odradek.storage.log.Log` objects, one per
    partition, with no replication: each is led at ``leader_epoch``, an append is durable at once
    (the high watermark follows the log end). For a coordinator's load path outside a broker
    (benchmarks; tests over real, cleaned segments). A partition absent from ``logs`` is not
    led here."""

    def __init__(self, logs: Mapping[int, Log], leader_epoch: int = 0) -> None:
        self.logs = dict(logs)
        self.epoch = leader_epoch

    def _log(self, partition: int) -> Log:
        log_ = self.logs.get(partition)
        if log_ is None:
            raise NotLeaderOrFollowerError(f"partition {partition} is not here")
        return log_

    def leader_epoch(self, partition: int) -> int | None:
        return self.epoch if partition in self.logs else None

    def append(self, partition: int, records: bytes) -> AppendResult:
        try:
            log_ = self._log(partition)
            info = log_.append_as_leader(records, self.epoch, origin="coordinator")
        except KafkaError as exc:
            return exc.error_code, -1
        log_.high_watermark = log_.log_end_offset
        return ErrorCode.none, int(info.last_offset)

    async def wait_durable(self, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        return ErrorCode.none if partition in self.logs else ErrorCode.not_leader_or_follower

    def bounds(self, partition: int) -> tuple[int, int]:
        return _log_bounds(self._log(partition))

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        return _log_read(self._log(partition), offset, max_bytes)


# --- the runtime -----------------------------------------------------------------------------------------


class CoordinatorRuntime(Generic[T]):
    """See the module docstring. ``name`` names the coordinator in log lines."""

    def __init__(self, name: str, topic: InternalTopic, deps: RuntimeDeps, loader: PartitionLoader[T]) -> None:
        self.name = name
        self.topic = topic
        self.log = deps.log
        self.metadata = deps.metadata
        self._create_internal_topic = deps.create_internal_topic
        self.time_ms = deps.time_ms
        self._call_later = deps.call_later
        self._loader = loader
        self.owned: dict[int, int] = {}
        """Loaded partitions -> their coordinator epoch (the leader epoch they were loaded at)."""
        self.loading: dict[int, int] = {}
        """Partitions being loaded -> the epoch of the load."""
        self.active = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._create_lock = asyncio.Lock()

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin answering; load every partition this broker leads."""
        self.active = True
        for partition in range(self.partition_count()):
            self.status(partition)

    async def stop(self) -> None:
        """Stop answering, unload every partition, cancel and await every task."""
        self.active = False
        for partition in list(self.owned) + list(self.loading):
            self.unload(partition)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    # --- tasks and timers ------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task of this coordinator (cancelled by :meth:`stop`; failures logged)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s task failed", self.name, exc_info=task.exception())

    def every(self, interval_ms: int, action: Callable[[], Awaitable[object]], what: str) -> None:
        """Run ``action`` every ``interval_ms`` until :meth:`stop`; a failure is logged, not fatal."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000.0)
                try:
                    await action()
                except Exception:
                    log.exception("%s: %s failed", self.name, what)

        self.spawn(loop())

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> Timer:
        if self._call_later is not None:
            return self._call_later(delay_ms, fn)
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, fn)

    # --- partitions ------------------------------------------------------------------------------------

    def partition_count(self) -> int:
        """The topic's partition count per the metadata cache, else the configured one."""
        return self.metadata.partition_count(self.topic.name) or self.topic.partitions

    def partition_for(self, key: str) -> int:
        return key_partition(key, max(1, self.partition_count()))

    def epoch(self, partition: int) -> int | None:
        """The coordinator epoch ``partition`` is loaded at; None when it is not loaded."""
        return self.owned.get(partition)

    def is_loading(self, partition: int, epoch: int | None = None) -> bool:
        """``partition`` is loading (at ``epoch``, when given)."""
        current = self.loading.get(partition)
        return current is not None and (epoch is None or current == epoch)

    @property
    def any_loading(self) -> bool:
        return bool(self.loading)

    # --- ownership -------------------------------------------------------------------------------------

    def status(self, partition: int) -> ErrorCode:
        """Reconcile ``partition`` with the replica's leadership; NONE when requests may be
        served (see the module docstring for the others)."""
        if not self.active:
            return ErrorCode.coordinator_not_available
        epoch = self.log.leader_epoch(partition)
        if epoch is None:
            self.unload(partition)
            return ErrorCode.not_coordinator
        return self.load(partition, epoch)

    def load(self, partition: int, epoch: int) -> ErrorCode:
        """Load ``partition`` at leader epoch ``epoch`` unless loaded or loading at it or a newer
        one; NONE when loaded, else COORDINATOR_LOAD_IN_PROGRESS."""
        owned = self.owned.get(partition)
        if owned is not None and owned >= epoch:
            return ErrorCode.none
        loading = self.loading.get(partition)
        if loading is not None and loading >= epoch:
            return ErrorCode.coordinator_load_in_progress
        self.unload(partition)
        self.loading[partition] = epoch
        log.info("%s: loading %s-%d at epoch %d", self.name, self.topic.name, partition, epoch)
        self.spawn(self._load(partition, epoch))
        return ErrorCode.coordinator_load_in_progress

    async def _load(self, partition: int, epoch: int) -> None:
        try:
            loaded = await self._loader.replay(partition, epoch)
        except Exception:
            log.exception("%s: loading %s-%d failed", self.name, self.topic.name, partition)
            loaded = None
        if self.loading.get(partition) != epoch:
            log.info("%s: load of %s-%d at epoch %d superseded", self.name, self.topic.name, partition, epoch)
            return
        del self.loading[partition]
        if loaded is None:
            return
        self.owned[partition] = epoch
        self._loader.install(partition, epoch, loaded)

    def unload(self, partition: int) -> None:
        """Stop coordinating ``partition``: a load in flight is abandoned, loaded state dropped."""
        self.loading.pop(partition, None)
        if self.owned.pop(partition, None) is not None:
            self._loader.unload(partition)

    def on_become_leader(self, tp: TopicPartition, leader_epoch: int) -> None:
        if tp.topic == self.topic.name and self.active:
            self.load(tp.partition, leader_epoch)

    def on_become_follower(self, tp: TopicPartition) -> None:
        if tp.topic == self.topic.name:
            self.unload(tp.partition)

    # --- writes ----------------------------------------------------------------------------------------

    async def write(self, partition: int, batch: bytes, timeout_ms: int, *, wait: bool = True) -> AppendResult:
        """Append ``batch`` to a loaded partition and (``wait``) wait until it is durable; (error,
        offset of its last record). NOT_COORDINATOR when the partition is not loaded, or no
        longer at the same epoch once the write is durable."""
        epoch = self.owned.get(partition)
        if epoch is None:
            return ErrorCode.not_coordinator, -1
        error, last_offset = self.log.append(partition, batch)
        if error is ErrorCode.none and wait:
            error = await self.log.wait_durable(partition, last_offset, timeout_ms)
        if error is ErrorCode.none and self.owned.get(partition) != epoch:
            error = ErrorCode.not_coordinator
        return error, last_offset

    # --- FindCoordinator -------------------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the coordinator of ``key``; creates the internal topic if
        missing. COORDINATOR_NOT_AVAILABLE while stopped, while the topic cannot be created, or
        while the key's partition has no live leader."""
        if not self.active:
            return ErrorCode.coordinator_not_available, -1
        name = self.topic.name
        if self.metadata.partition_count(name) is None:
            async with self._create_lock:
                if self.metadata.partition_count(name) is None:
                    live = len(self.metadata.alive_broker_ids()) or 1
                    try:
                        await self._create_internal_topic(
                            name, self.topic.partitions, self.topic.replication_factor, self.topic.configs(live)
                        )
                    except KafkaError as exc:
                        log.warning("%s: cannot create %s: %s", self.name, name, exc)
                        return ErrorCode.coordinator_not_available, -1
            count = self.metadata.partition_count(name)
            if count is None:
                return ErrorCode.coordinator_not_available, -1
            for partition in range(count):
                self.status(partition)
        leader = self.metadata.leader_of(TopicPartition(name, self.partition_for(key)))
        if leader < 0 or self.metadata.broker_address(leader) is None:
            return ErrorCode.coordinator_not_available, -1
        return ErrorCode.none, leader
