"""The controller's requests applied by the replica manager, without sockets or processes:
LeaderAndIsr (``become_leader_or_follower``), StopReplica (``stop_replicas``) and the controller
epoch fence UpdateMetadata shares, with Kafka 3.9's error per partition; the broker's hooks
(topic config loader, leadership change, deleted topics) are recorded.

Logs live in a temporary directory; the fetcher manager is :class:`RecordingFetchers`; broker 1 is
this broker. Requests are the controller's own (:mod:`odradek.controller.requests`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest
from odradek.errors import ErrorCode, StaleControllerEpochError
from odradek.replication.partition import Partition, PartitionState
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage import LogManager, TopicPartition

from .replication_fakes import TP, RecordingFetchers
from .storage_support import log_config

TP1 = TopicPartition("t", 1)
OTHER = TopicPartition("u", 0)


class Hooks:
    """The broker's side of the replica manager's hooks, recording each call."""

    def __init__(self) -> None:
        self.loaded: list[str] = []
        self.leadership: list[tuple[TopicPartition, str]] = []
        self.deleted: list[set[str]] = []
        self.fail_loading: set[str] = set()

    async def load(self, topic: str) -> None:
        if topic in self.fail_loading:
            raise RuntimeError(f"cannot read the config of {topic}")
        self.loaded.append(topic)

    def leadership_changed(self, tp: TopicPartition, partition: Partition | None) -> None:
        role = "stopped" if partition is None else "leader" if partition.is_leader else "follower"
        self.leadership.append((tp, role))


def _run(tmp_path: Path, body: Callable[[ReplicaManager, Hooks], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        rm = ReplicaManager(1, LogManager([tmp_path / "logs"], log_config()), lambda _topic: log_config(), io_threads=1)
        rm.fetcher_manager = RecordingFetchers()  # type: ignore[assignment]
        hooks = Hooks()
        rm.topic_config_loader = hooks.load
        rm.on_leadership_change = hooks.leadership_changed
        rm.on_topics_deleted = hooks.deleted.append
        try:
            return await body(rm, hooks)
        finally:
            await rm.shutdown_fetchers()
            rm.shutdown()
            rm.log_manager.shutdown()

    return asyncio.run(main())


def _leader_and_isr(controller_epoch: int, **states: PartitionState) -> LeaderAndIsrRequest:
    """States keyed ``t0``, ``t1`` (topic t) or ``u0`` (topic u)."""
    tps = {"t0": TP, "t1": TP1, "u0": OTHER}
    return LeaderAndIsrRequest(0, controller_epoch, {tps[k]: s for k, s in states.items()}, {})


def _stop(controller_epoch: int, *tps: TopicPartition, delete: bool = False, epochs: int = -1) -> StopReplicaRequest:
    return StopReplicaRequest(0, controller_epoch, list(tps), delete, dict.fromkeys(tps, epochs))


def test_a_new_leader_and_a_new_follower(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        errors = await rm.become_leader_or_follower(
            _leader_and_isr(3, t0=PartitionState(1, 1, [1, 2], [1, 2], 3), t1=PartitionState(2, 4, [2, 1], [2, 1], 3))
        )
        assert errors == {TP: ErrorCode.none, TP1: ErrorCode.none}
        assert rm.partitions[TP].is_leader and rm.partitions[TP].leader_epoch == 1
        assert not rm.partitions[TP1].is_leader and rm.partitions[TP1].state.leader == 2
        fetchers: RecordingFetchers = rm.fetcher_manager  # type: ignore[assignment]
        assert fetchers.calls == [("remove", TP, None), ("add", TP1, 2)]
        assert hooks.loaded == ["t", "t"]  # before each partition: the broker reads new topics' configs
        assert hooks.leadership == [(TP, "leader"), (TP1, "follower")]
        assert rm.controller_epoch == 3

    _run(tmp_path, body)


def test_a_stale_controller_epoch_applies_nothing(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        await rm.become_leader_or_follower(_leader_and_isr(5, t0=PartitionState(1, 1, [1], [1], 5)))
        with pytest.raises(StaleControllerEpochError):
            await rm.become_leader_or_follower(_leader_and_isr(4, t0=PartitionState(2, 2, [2], [1, 2], 4)))
        with pytest.raises(StaleControllerEpochError):
            await rm.become_leader_or_follower(_leader_and_isr(4, t1=PartitionState(1, 1, [1], [1], 4)))
        with pytest.raises(StaleControllerEpochError):
            await rm.stop_replicas(_stop(4, TP, delete=True))
        updated: list[int] = []
        with pytest.raises(StaleControllerEpochError):
            rm.maybe_update_metadata_cache(4, lambda: updated.append(4))
        assert updated == []
        assert rm.partitions[TP].is_leader and rm.partitions[TP].leader_epoch == 1
        assert TP1 not in rm.partitions and TP in rm.log_manager
        assert hooks.leadership == [(TP, "leader")] and hooks.deleted == []
        assert rm.controller_epoch == 5
        rm.maybe_update_metadata_cache(6, lambda: updated.append(6))  # a newer controller: applied, remembered
        assert updated == [6] and rm.controller_epoch == 6

    _run(tmp_path, body)


def test_a_leader_epoch_not_newer_is_stale_controller_epoch(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        await rm.become_leader_or_follower(_leader_and_isr(1, t0=PartitionState(1, 3, [1, 2], [1, 2], 1)))
        same = await rm.become_leader_or_follower(_leader_and_isr(1, t0=PartitionState(2, 3, [2], [1, 2], 1)))
        older = await rm.become_leader_or_follower(_leader_and_isr(2, t0=PartitionState(2, 2, [2], [1, 2], 2)))
        assert same == older == {TP: ErrorCode.stale_controller_epoch}
        assert rm.partitions[TP].is_leader and rm.partitions[TP].leader_epoch == 3
        newer = await rm.become_leader_or_follower(_leader_and_isr(2, t0=PartitionState(2, 4, [2, 1], [1, 2], 2)))
        assert newer == {TP: ErrorCode.none}
        assert rm.partitions[TP].state.leader == 2 and rm.partitions[TP].leader_epoch == 4
        assert hooks.leadership == [(TP, "leader"), (TP, "follower")]

    _run(tmp_path, body)


def test_a_state_without_this_broker_is_unknown_topic_or_partition(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        errors = await rm.become_leader_or_follower(_leader_and_isr(1, t0=PartitionState(2, 1, [2, 3], [2, 3], 1)))
        assert errors == {TP: ErrorCode.unknown_topic_or_partition}
        assert TP not in rm.partitions and TP not in rm.log_manager
        assert hooks.loaded == [] and hooks.leadership == []

    _run(tmp_path, body)


def test_one_partitions_failure_leaves_the_others_applied(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        hooks.fail_loading.add("u")
        rm.offline_partitions.add(TP1)
        errors = await rm.become_leader_or_follower(
            _leader_and_isr(
                1,
                u0=PartitionState(1, 1, [1], [1], 1),
                t1=PartitionState(1, 1, [1], [1], 1),
                t0=PartitionState(1, 1, [1], [1], 1),
            )
        )
        assert errors == {
            OTHER: ErrorCode.unknown_server_error,  # unexpected: logged
            TP1: ErrorCode.kafka_storage_error,  # its log dir failed here
            TP: ErrorCode.none,
        }
        assert list(rm.partitions) == [TP] and hooks.leadership == [(TP, "leader")]

    _run(tmp_path, body)


def test_stop_without_delete_keeps_the_log(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        await rm.become_leader_or_follower(_leader_and_isr(1, t0=PartitionState(2, 1, [2, 1], [2, 1], 1)))
        errors = await rm.stop_replicas(_stop(1, TP, epochs=1))
        assert errors == {TP: ErrorCode.none}
        assert TP not in rm.partitions and TP in rm.log_manager
        fetchers: RecordingFetchers = rm.fetcher_manager  # type: ignore[assignment]
        assert TP not in fetchers.assigned
        assert hooks.leadership == [(TP, "follower"), (TP, "stopped")]
        assert hooks.deleted == []

    _run(tmp_path, body)


def test_stop_with_delete_removes_the_log_and_reports_the_topic(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        await rm.become_leader_or_follower(
            _leader_and_isr(1, t0=PartitionState(1, 1, [1], [1], 1), t1=PartitionState(1, 1, [1], [1], 1))
        )
        log_dir = rm.partitions[TP].log.dir
        errors = await rm.stop_replicas(_stop(1, TP, delete=True, epochs=-2))  # -2: during topic deletion
        assert errors == {TP: ErrorCode.none}
        assert TP not in rm.log_manager and not log_dir.exists()
        assert hooks.deleted == [{"t"}]
        assert rm.hosts_topic("t")  # t-1 is still here
        await rm.stop_replicas(_stop(1, TP1, delete=True, epochs=-2))
        assert not rm.hosts_topic("t")

    _run(tmp_path, body)


def test_stop_with_an_older_leader_epoch_is_fenced_and_an_unhosted_partition_stops_anyway(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        await rm.become_leader_or_follower(_leader_and_isr(1, t0=PartitionState(1, 5, [1], [1], 1)))
        fenced = await rm.stop_replicas(_stop(1, TP, delete=True, epochs=4))
        assert fenced == {TP: ErrorCode.fenced_leader_epoch}
        assert rm.partitions[TP].is_leader and TP in rm.log_manager
        unhosted = await rm.stop_replicas(_stop(1, OTHER, delete=True, epochs=3))
        assert unhosted == {OTHER: ErrorCode.none}
        assert hooks.leadership == [(TP, "leader"), (OTHER, "stopped")]
        same = await rm.stop_replicas(_stop(1, TP, epochs=5))  # the current epoch stops it
        assert same == {TP: ErrorCode.none} and TP not in rm.partitions

    _run(tmp_path, body)


def test_a_leader_and_isr_of_many_new_partitions_creates_their_logs_together_first(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager, hooks: Hooks) -> None:
        batches: list[int] = []
        create = rm.log_manager.create_logs

        async def counted(wanted: Any, executor: Any) -> int:
            batches.append(len(wanted))
            return await create(wanted, executor)

        rm.log_manager.create_logs = counted  # type: ignore[method-assign]
        states = {TopicPartition("many", p): PartitionState(1, 0, [1, 2], [1, 2], 3) for p in range(40)}
        errors = await rm.become_leader_or_follower(LeaderAndIsrRequest(0, 3, states, {}))
        assert set(errors.values()) == {ErrorCode.none}
        assert batches == [40]  # the topic's config read once first, then all 40 logs in one batch
        assert hooks.loaded[0] == "many"
        assert all(rm.partitions[tp].is_leader and tp in rm.log_manager for tp in states)

    _run(tmp_path, body)
