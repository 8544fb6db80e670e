"""Shared scenario of the consumer-group tests: three members of one group in their own processes.

:func:`run_member_churn` drives ``group_worker.py`` processes (one client library each run):
three members share a 6-partition topic, one leaves cleanly, one is killed, and every produced
record must be consumed, with duplicates only of records whose commit did not succeed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

WORKER = Path(__file__).with_name("group_worker.py")
PARTITIONS = 6
SESSION_S = 6.0


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, partitions, 1)])
    fs[topic].result(10)


def produce(
    bootstrap: str, topic: str, per_partition: int, partitions: int = PARTITIONS, tag: str = ""
) -> set[tuple[int, int]]:
    """Produce to every partition; returns the (partition, offset) pairs written."""
    written: set[tuple[int, int]] = set()
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def cb(err: Any, msg: Any) -> None:
        if err:
            errors.append(err)
        else:
            written.add((msg.partition(), msg.offset()))

    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"{tag}{p}-{i}".encode(), partition=p, on_delivery=cb)
    assert producer.flush(30) == 0
    assert not errors, errors
    return written


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``predicate`` every 50 ms; returns the seconds it took, fails after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


class Worker:
    """One ``group_worker.py`` process and the events it printed."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, assignor: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - read back in describe()
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), client, bootstrap, group, topic, assignor],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
        )
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def describe(self) -> str:
        """The process's state, its last events and the end of its stderr (for failure messages)."""
        if self.alive:
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
        self.stderr.seek(0)
        err = self.stderr.read()[-4000:]
        return f"pid {self.proc.pid} rc={self.proc.poll()} last events {self.snapshot()[-3:]} stderr: {err}"

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def assignment(self) -> list[int]:
        found = [e["partitions"] for e in self.snapshot() if e["e"] == "assigned"]
        return found[-1] if found else []

    def consumed(self) -> list[tuple[int, int]]:
        return [(e["p"], e["o"]) for e in self.snapshot() if e["e"] == "record"]

    def committed(self) -> set[tuple[int, int]]:
        return {(e["p"], e["o"]) for e in self.snapshot() if e["e"] == "committed"}

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.reader.join(5)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.reader.join(5)


def covers_exactly(workers: list[Worker], partitions: int = PARTITIONS) -> bool:
    """The workers' latest assignments are non-empty, disjoint and cover every partition."""
    seen: list[int] = []
    for w in workers:
        current = w.assignment()
        if not current:
            return False
        seen.extend(current)
    return sorted(seen) == list(range(partitions))


def run_member_churn(bootstrap: str, client: str, assignor: str, topic: str, group: str) -> dict[str, float]:
    """The acceptance scenario; returns timings (seconds) of each step."""
    create_topic(bootstrap, topic)
    produced = produce(bootstrap, topic, 20, tag="a")
    workers = [Worker(client, bootstrap, group, topic, assignor) for _ in range(3)]
    timings: dict[str, float] = {}
    try:

        def all_consumed(ws: list[Worker]) -> Callable[[], bool]:
            return lambda: produced <= {r for w in ws for r in w.consumed()}

        try:
            timings["three_members_assigned"] = wait_until(lambda: covers_exactly(workers), 60, "3 assignments")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: " + " | ".join(w.describe() for w in workers)) from None
        wait_until(all_consumed(workers), 30, "phase A consumed")

        leaving, crashing, survivor = workers
        leaving.terminate()
        assert any(e["e"] == "closed" for e in leaving.snapshot())
        timings["after_leave"] = wait_until(lambda: covers_exactly([crashing, survivor]), 30, "rebalance after leave")
        produced |= produce(bootstrap, topic, 10, tag="b")
        wait_until(all_consumed(workers), 30, "phase B consumed")

        crashing.kill()
        timings["after_kill"] = wait_until(lambda: covers_exactly([survivor]), SESSION_S + 15, "rebalance after kill")
        produced |= produce(bootstrap, topic, 10, tag="c")
        wait_until(all_consumed(workers), 30, "phase C consumed")
        survivor.terminate()
    finally:
        for w in workers:
            if w.alive:
                w.kill()

    committed_once: dict[tuple[int, int], int] = {}
    consumed_count: dict[tuple[int, int], int] = {}
    for w in workers:
        for r in w.consumed():
            consumed_count[r] = consumed_count.get(r, 0) + 1
        for r in w.committed():
            committed_once[r] = committed_once.get(r, 0) + 1
    assert produced <= set(consumed_count), sorted(produced - set(consumed_count))[:10]
    for record, count in consumed_count.items():
        if count > 1:
            # a duplicate is only allowed for consumptions whose commit did not succeed
            assert committed_once.get(record, 0) <= 1, (record, count, committed_once.get(record))
    return timings
