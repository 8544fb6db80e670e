"""Leader-loss stages read from broker log lines, and the clock-skew fault's steps (no processes)."""

from __future__ import annotations

import datetime
import random
from typing import Any

from chaos.cluster import faketime_env
from chaos.nemesis import make_nemesis
from chaos.stages import _read_logs, leader_loss_stages

START = datetime.datetime(2026, 11, 26, 5, 0, 0).timestamp()


def _line(offset_s: float, logger: str, message: str) -> str:
    stamp = datetime.datetime.fromtimestamp(START + offset_s)
    return f"[{stamp:%Y-%m-%d %H:%M:%S},{stamp.microsecond // 1000:03d}] INFO {logger}: {message}"


def _report(kind: str = "kill-leader", targets: str = "b1") -> dict[str, Any]:
    fault = {"kind": kind, "targets": targets, "start": 10.0, "partition": ["chaos", 1], "window_s": 5.9}
    return {"history": {"start_wall": START}, "unavailability": {"per_fault": [fault]}}


def test_stages_of_a_leader_loss(tmp_path: Any) -> None:
    (tmp_path / "broker-2.log").write_text(
        "\n".join(
            [
                _line(14.9, "odradek.controller.controller", "controller 2: brokers joined [], left [1]"),
                _line(
                    15.0,
                    "state.change.logger",
                    "[Controller id=2 epoch=1] Changed partition chaos-1 from OfflinePartition to OnlinePartition"
                    " with state LeaderAndIsr(leader=3, leaderEpoch=4, isr=[2, 3], zkVersion=5) (broker change)",
                ),
                _line(
                    15.2,
                    "state.change.logger",
                    "[Broker id=2] Follower chaos-1 starts at leader epoch 4 from offset 9 with high watermark 9."
                    " Current leader is 3. Previous leader epoch was 3.",
                ),
            ]
        )
        + "\n[not a log line]\n"
    )
    (tmp_path / "broker-3.log").write_text(
        _line(15.1, "state.change.logger", "[Broker id=3] Leader chaos-1 starts at leader epoch 4 from offset 9")
    )
    (row,) = leader_loss_stages(_report(), _read_logs(tmp_path))
    assert row["new_leader"] == 3
    assert (row["expiry"], row["elected"], row["leader"], row["follower"], row["ack"]) == (4.9, 5.0, 5.1, 5.2, 5.9)


def test_stages_not_found_stay_empty(tmp_path: Any) -> None:
    (tmp_path / "broker-2.log").write_text(
        _line(3.0, "odradek.controller.controller", "controller 2: brokers joined [], left [1]")  # before the fault
    )
    (row,) = leader_loss_stages(_report(), _read_logs(tmp_path))
    assert row["expiry"] is None and row["elected"] is None and row["leader"] is None
    assert leader_loss_stages(_report(kind="slow-link"), []) == []


def test_faketime_environment() -> None:
    env = faketime_env(-42.4)
    assert env["FAKETIME"] == "-42s"
    assert env["LD_PRELOAD"].endswith("libfaketime.so.1")
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "0"  # Python's time.sleep fails under libfaketime otherwise


class _Cluster:
    """What make_nemesis asks of a cluster, recording the process operations."""

    def __init__(self) -> None:
        self.brokers = {1: None, 2: None, 3: None}
        self.session_timeout_s = 6.0
        self.proxy = None
        self.calls: list[tuple[str, int, float | None]] = []

    def leader(self, _topic: str, _partition: int) -> int:
        return 2

    def stop_broker(self, broker_id: int) -> None:
        self.calls.append(("stop", broker_id, None))

    def start_broker(self, broker_id: int, clock_offset_s: float | None = None) -> None:
        self.calls.append(("start", broker_id, clock_offset_s))


def test_clock_skew_restarts_the_leader_off_the_clock_then_on_it() -> None:
    cluster = _Cluster()
    nemesis = make_nemesis("clock-skew", cluster, "chaos", random.Random(3), 8.0)  # type: ignore[arg-type]
    assert nemesis.partition is not None and nemesis.targets.startswith("b2")
    nemesis.inject()
    ((_, stopped, _), (_, started, offset)) = cluster.calls
    assert stopped == started == 2
    assert offset is not None and 10.0 <= abs(offset) <= 60.0
    nemesis.heal()
    assert cluster.calls[2:] == [("stop", 2, None), ("start", 2, None)]
