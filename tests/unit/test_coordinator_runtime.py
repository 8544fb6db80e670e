"""The coordinator runtime: ownership and loading keyed by the leader epoch, writes, tasks, and
the internal-topic log over the replica manager's acks=all wait. No sockets, no processes."""

from __future__ import annotations

import asyncio

from odradek.coordinator.runtime import CoordinatorRuntime, InternalTopic, ReplicaInternalLog
from odradek.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from odradek.storage.topic_partition import TopicPartition

from .coordinator_fakes import ManualClock, MemoryOffsetsLog, run, runtime_deps, settle

TOPIC = "__internal"


class Loader:
    """Counts replays, installs and unloads; ``gates[epoch]`` holds a replay at that epoch."""

    def __init__(self) -> None:
        self.replays: list[tuple[int, int]] = []
        self.installed: list[tuple[int, int, str]] = []
        self.unloaded: list[int] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.fail = False

    async def replay(self, partition: int, epoch: int) -> str | None:
        self.replays.append((partition, epoch))
        gate = self.gates.get(epoch)
        if gate is not None:
            await gate.wait()
        return None if self.fail else f"state@{epoch}"

    def install(self, partition: int, epoch: int, loaded: str) -> None:
        self.installed.append((partition, epoch, loaded))

    def unload(self, partition: int) -> None:
        self.unloaded.append(partition)


def make(partitions: int = 1) -> tuple[CoordinatorRuntime[str], Loader, MemoryOffsetsLog]:
    log = MemoryOffsetsLog()
    deps, _metadata, _creator = runtime_deps(log, ManualClock())
    loader = Loader()
    return CoordinatorRuntime("test", InternalTopic(TOPIC, partitions, 1), deps, loader), loader, log


@run
async def test_a_partition_is_loaded_once_per_leader_epoch() -> None:
    runtime, loader, log = make()
    assert runtime.status(0) == ErrorCode.coordinator_not_available  # not started
    log.epochs[0] = 3
    runtime.start()
    assert runtime.status(0) == ErrorCode.coordinator_load_in_progress
    await settle()
    assert runtime.status(0) == ErrorCode.none and runtime.epoch(0) == 3
    runtime.on_become_leader(TopicPartition(TOPIC, 0), 3)  # the same epoch again: nothing
    runtime.on_become_leader(TopicPartition(TOPIC, 0), 2)  # an older one: ignored
    runtime.on_become_leader(TopicPartition("other", 0), 9)  # another topic: not ours
    await settle()
    assert loader.replays == [(0, 3)] and loader.installed == [(0, 3, "state@3")]
    log.epochs[0] = 4  # a newer epoch supersedes what is loaded
    assert runtime.status(0) == ErrorCode.coordinator_load_in_progress
    assert loader.unloaded == [0] and runtime.epoch(0) is None
    await settle()
    assert runtime.epoch(0) == 4 and loader.installed[-1] == (0, 4, "state@4")


@run
async def test_a_newer_epoch_supersedes_a_load_in_flight() -> None:
    runtime, loader, log = make()
    log.epochs[0] = None
    runtime.start()
    loader.gates[1] = asyncio.Event()
    runtime.on_become_leader(TopicPartition(TOPIC, 0), 1)
    await settle()
    assert runtime.is_loading(0, 1)
    runtime.on_become_leader(TopicPartition(TOPIC, 0), 2)
    await settle()
    assert runtime.epoch(0) == 2 and loader.installed == [(0, 2, "state@2")]
    loader.gates[1].set()  # the stale load completes last: discarded
    await settle()
    assert runtime.epoch(0) == 2 and loader.installed == [(0, 2, "state@2")]
    assert loader.unloaded == []  # nothing was installed before epoch 2


@run
async def test_leadership_lost_unloads_and_abandons_a_load() -> None:
    runtime, loader, log = make(partitions=2)
    runtime.start()
    await settle()
    assert runtime.epoch(0) == 0 and runtime.epoch(1) == 0
    runtime.on_become_follower(TopicPartition(TOPIC, 0))
    assert loader.unloaded == [0] and runtime.epoch(0) is None
    log.epochs[0] = None
    assert runtime.status(0) == ErrorCode.not_coordinator
    loader.gates[5] = asyncio.Event()
    runtime.on_become_leader(TopicPartition(TOPIC, 1), 5)
    await settle()
    assert runtime.any_loading
    runtime.on_become_follower(TopicPartition(TOPIC, 1))
    loader.gates[5].set()
    await settle()
    assert runtime.epoch(1) is None and not runtime.any_loading
    assert (1, 5, "state@5") not in loader.installed


@run
async def test_a_failed_load_is_retried_by_the_next_request() -> None:
    runtime, loader, _log = make()
    loader.fail = True
    runtime.start()
    await settle()
    assert runtime.epoch(0) is None and not runtime.any_loading
    loader.fail = False
    assert runtime.status(0) == ErrorCode.coordinator_load_in_progress
    await settle()
    assert runtime.status(0) == ErrorCode.none and len(loader.replays) == 2


@run
async def test_writes_need_the_partition_loaded_at_the_same_epoch() -> None:
    runtime, _loader, log = make()
    batch = build_batch([Record(b"k", b"v")])
    runtime.start()
    assert await runtime.write(0, batch, 1000) == (ErrorCode.not_coordinator, -1)  # still loading
    await settle()
    assert await runtime.write(0, batch, 1000) == (ErrorCode.none, 0)
    log.hold = asyncio.Event()
    pending = asyncio.ensure_future(runtime.write(0, batch, 1000))
    await settle()
    runtime.on_become_leader(TopicPartition(TOPIC, 0), 1)  # reloaded under a new epoch meanwhile
    log.hold.set()
    assert await pending == (ErrorCode.not_coordinator, 1)
    log.hold = None
    log.durable_error = ErrorCode.request_timed_out
    await settle()
    assert await runtime.write(0, batch, 1000) == (ErrorCode.request_timed_out, 2)


@run
async def test_stop_unloads_and_cancels_every_task() -> None:
    runtime, loader, _log = make()
    ticks: list[int] = []

    async def tick() -> None:
        ticks.append(1)

    runtime.start()
    runtime.every(1, tick, "tick")
    await asyncio.sleep(0.02)
    await settle()
    assert ticks and runtime.epoch(0) == 0
    await runtime.stop()
    count = len(ticks)
    await asyncio.sleep(0.02)
    assert len(ticks) == count and loader.unloaded == [0]
    assert runtime.status(0) == ErrorCode.coordinator_not_available


class _Partition:
    def __init__(self, leader: bool, epoch: int) -> None:
        self.is_leader = leader
        self.leader_epoch = epoch


class _ReplicaManager:
    def __init__(self) -> None:
        self.partitions = {
            TopicPartition(TOPIC, 0): _Partition(True, 6),
            TopicPartition(TOPIC, 1): _Partition(False, 6),
        }
        self.waits: list[tuple[TopicPartition, int, int]] = []

    async def wait_for_acks(self, tp: TopicPartition, required_offset: int, timeout_ms: int) -> ErrorCode:
        self.waits.append((tp, required_offset, timeout_ms))
        return ErrorCode.none


@run
async def test_replica_internal_log_uses_the_replica_managers_acks_wait() -> None:
    rm = _ReplicaManager()
    log = ReplicaInternalLog(rm, TOPIC)  # type: ignore[arg-type]
    assert (log.leader_epoch(0), log.leader_epoch(1), log.leader_epoch(2)) == (6, None, None)
    assert await log.wait_durable(0, 41, 500) == ErrorCode.none
    assert rm.waits == [(TopicPartition(TOPIC, 0), 42, 500)]  # durable once the high watermark passes 41
