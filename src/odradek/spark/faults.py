"""Faults injected into a running pipeline from outside: partition leaders killed with SIGKILL and
restarted, and one Spark executor killed, with a timeline of what was done when.

:class:`FaultInjector` runs in a thread of its own next to :func:`odradek.spark.pipeline.run_pipeline`
(which runs on the caller's main thread) and paces itself on the streaming query's progress: the
files of the checkpoint's commit log (``<checkpoint>/commits/<batch id>``, one per finished
micro-batch, in every run of the query). The plan, in order:

1. once ``start_after_batches`` micro-batches are committed: SIGKILL the leader of partition 0 of
   the input topic, wait until the controller elected another leader, restart the broker and wait
   until every partition of both topics has all its replicas in the ISR again;
2. the same for the leader of the output topic's partition 0 (maybe the broker restarted in 1);
3. with a Spark cluster given (:class:`~odradek.spark.standalone.StandaloneCluster`): once one more
   micro-batch is committed and an executor runs, SIGKILL that executor JVM (its tasks are retried
   on the executor the worker starts in its place).

Leaders and ISRs come from Metadata requests (confluent-kafka's admin client) to the brokers alive
at the time. A step that cannot be done (no leader, a timeout) is recorded in the timeline and the
plan carries on; nothing is raised into the pipeline. ``kafka_cluster`` is an
:class:`odradek.cli.cluster.LocalCluster` (``kill9``, ``restart``, ``bootstrap_servers``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["FaultInjector", "committed_batches"]


def committed_batches(checkpoint: Path) -> int:
    """How many micro-batches the checkpoint's commit log holds (0 before the first)."""
    commits = checkpoint / "commits"
    try:
        return sum(1 for p in commits.iterdir() if p.name.isdigit())
    except OSError:
        return 0


class FaultInjector:
    """The plan of the module docstring against ``kafka_cluster`` (and ``spark_cluster``).

    :meth:`start` launches the thread, :meth:`stop` ends it (waiting for a running step);
    :attr:`timeline` holds ``(seconds since start, what happened)``; :attr:`done` is set when the
    plan is complete."""

    def __init__(
        self,
        kafka_cluster: Any,
        checkpoint: Path,
        input_topic: str,
        output_topic: str,
        spark_cluster: Any = None,
        start_after_batches: int = 1,
        step_timeout_s: float = 45.0,
        out: Callable[[str], None] | None = None,
    ) -> None:
        self.kafka = kafka_cluster
        self.spark = spark_cluster
        self.checkpoint = checkpoint
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.start_after_batches = start_after_batches
        self.step_timeout_s = step_timeout_s
        self.out = out
        self.timeline: list[tuple[float, str]] = []
        self.done = threading.Event()
        self._stopping = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="fault-injector", daemon=True)

    def start(self) -> FaultInjector:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def record(self, text: str) -> None:
        entry = (time.monotonic() - self._started, text)
        self.timeline.append(entry)
        if self.out is not None:
            self.out(f"  [fault t={entry[0]:6.1f}s] {text}")

    # ------------------------------------------------------------------------------ metadata
    def partition_state(self, topic: str, partition: int) -> tuple[int, list[int]]:
        """``(leader id or -1, ISR)`` of a partition from a Metadata request to the alive brokers."""
        from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap_servers})
        metadata = admin.list_topics(topic, timeout=5)
        state = metadata.topics[topic].partitions[partition]
        return int(state.leader), sorted(int(r) for r in state.isrs)

    def _wait(self, condition: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + self.step_timeout_s
        while not self._stopping.is_set():
            try:
                if condition():
                    return True
            except Exception:  # a broker going away mid-request; asked again
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return False

    def _full_isr(self) -> bool:
        replicas = len(self.kafka.brokers)
        topics = [(self.input_topic, p) for p in range(self._partitions(self.input_topic))] + [(self.output_topic, 0)]
        return all(len(self.partition_state(t, p)[1]) == replicas for t, p in topics)

    def _partitions(self, topic: str) -> int:
        from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap_servers})
        return len(admin.list_topics(topic, timeout=5).topics[topic].partitions)

    # ------------------------------------------------------------------------------ the plan
    def kill_leader(self, topic: str, partition: int) -> None:
        """SIGKILL the leader of ``topic``-``partition``, wait for a new leader, restart the broker,
        wait for full ISRs; each step recorded."""
        leader, _isr = self.partition_state(topic, partition)
        if leader < 0:
            self.record(f"{topic}-{partition} has no leader; not killed")
            return
        self.kafka.kill9(leader)
        self.record(f"kill -9 broker {leader}, leader of {topic}-{partition}")
        if self._wait(lambda: self.partition_state(topic, partition)[0] not in (-1, leader)):
            self.record(f"{topic}-{partition} led by broker {self.partition_state(topic, partition)[0]}")
        else:
            self.record(f"{topic}-{partition}: no new leader within {self.step_timeout_s:.0f}s")
        self.kafka.restart(leader)
        self.record(f"broker {leader} restarted")
        if self._wait(self._full_isr):
            self.record("every partition has all replicas in its ISR again")
        else:
            self.record(f"ISRs not full within {self.step_timeout_s:.0f}s")

    def kill_executor(self) -> None:
        if not self._wait(lambda: bool(self.spark.executor_pids())):
            self.record("no executor running; none killed")
            return
        pid = self.spark.kill_executor()
        self.record(f"kill -9 executor JVM pid {pid} (its tasks are retried)")

    def _run(self) -> None:
        try:
            if not self._wait_batches(self.start_after_batches):
                return
            self.kill_leader(self.input_topic, 0)
            if self._stopping.is_set():
                return
            self.kill_leader(self.output_topic, 0)
            next_batch = committed_batches(self.checkpoint) + 1
            if self.spark is not None and self._wait_batches(next_batch):
                self.kill_executor()
            self.done.set()
        except Exception as exc:  # recorded, never raised into the pipeline
            self.record(f"fault step failed: {type(exc).__name__}: {exc}")

    def _wait_batches(self, count: int) -> bool:
        while not self._stopping.is_set():
            if committed_batches(self.checkpoint) >= count:
                return True
            time.sleep(0.2)
        return False
