"""The fault injector's steps against a scripted cluster (no brokers, no metadata requests)."""

from __future__ import annotations

from pathlib import Path

from odradek.spark.faults import FaultInjector, committed_batches


class ScriptedCluster:
    def __init__(self) -> None:
        self.brokers = {1: object(), 2: object(), 3: object()}
        self.leader = 2
        self.down: set[int] = set()
        self.actions: list[str] = []

    def kill9(self, broker_id: int) -> None:
        self.actions.append(f"kill9 {broker_id}")
        self.down.add(broker_id)
        self.leader = 3 if broker_id != 3 else 1  # the controller elects another replica

    def restart(self, broker_id: int) -> None:
        self.actions.append(f"restart {broker_id}")
        self.down.discard(broker_id)


class ScriptedInjector(FaultInjector):
    def partition_state(self, topic: str, partition: int) -> tuple[int, list[int]]:
        cluster: ScriptedCluster = self.kafka
        return cluster.leader, sorted(set(cluster.brokers) - cluster.down)

    def _partitions(self, topic: str) -> int:
        return 5


def test_committed_batches_counts_the_commit_log(tmp_path: Path) -> None:
    assert committed_batches(tmp_path) == 0
    (tmp_path / "commits").mkdir()
    for name in ("0", "1", ".1.crc", "2.tmp"):
        (tmp_path / "commits" / name).write_text("v1")
    assert committed_batches(tmp_path) == 2


def test_kill_leader_kills_waits_for_a_new_leader_restarts_and_waits_for_full_isrs(tmp_path: Path) -> None:
    cluster = ScriptedCluster()
    injector = ScriptedInjector(cluster, tmp_path, "page_visits", "page_visit_counts", step_timeout_s=2)
    injector.kill_leader("page_visits", 0)
    assert cluster.actions == ["kill9 2", "restart 2"]
    assert [text for _, text in injector.timeline] == [
        "kill -9 broker 2, leader of page_visits-0",
        "page_visits-0 led by broker 3",
        "broker 2 restarted",
        "every partition has all replicas in its ISR again",
    ]


def test_a_partition_without_leader_is_recorded_not_killed(tmp_path: Path) -> None:
    cluster = ScriptedCluster()
    cluster.leader = -1
    injector = ScriptedInjector(cluster, tmp_path, "page_visits", "page_visit_counts", step_timeout_s=2)
    injector.kill_leader("page_visits", 0)
    assert cluster.actions == []
    assert injector.timeline[0][1] == "page_visits-0 has no leader; not killed"
