"""The demo pipeline on a Spark standalone cluster reading a 3-broker cluster through a driver kill
and partition-leader kills, exactly once.

One Spark standalone master and worker for the module (:class:`odradek.spark.standalone.StandaloneCluster`,
2 cores): executors run in JVMs of their own with their own Python workers. One 3-broker cluster on a
real ZooKeeper for the module (``odradek_cluster_module``), internal topics replicated 3 times.
It covers what a local-mode pipeline test would (rate-limited first run, the driver killed in a
batch and that batch replayed, exact Parquet and ``read_committed`` topic contents), on a cluster.
The pytest process already holds a local SparkContext, so the applications run in a driver process
of their own: ``odradek demo --master spark://... --bootstrap-servers ...`` with both topics at
replication factor 3 and ``min.insync.replicas=2``, shipping this checkout's ``odradek`` to the
executors (``--ship-package``). Meanwhile :class:`odradek.spark.faults.FaultInjector` kills (SIGKILL)
the leader of ``page_visits``-0 and then the leader of ``page_visit_counts``-0 once the first
micro-batch is committed, restarting each; the demo kills its own crash-run driver in a batch.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import odradek
from odradek.spark.clickstream import generate, top_pages

pytestmark = [pytest.mark.spark, pytest.mark.zookeeper]

EVENTS = 1500
DEMO_TIMEOUT_S = 600  # the demo's three applications each start a driver and an executor JVM
# Short-lived JVMs on a 2-core machine: the C1 compiler only and the serial collector (as the local
# session of tests/spark/conftest.py), for the drivers and, through the worker's environment, executors.
FAST_JVM = {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
BROKER_OVERRIDES = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "auto.create.topics.enable": "false",
}


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: Any) -> Iterator[Any]:
    from odradek.spark.standalone import StandaloneCluster

    cluster = StandaloneCluster(workers=1, cores_per_worker=2, memory="1g", base_dir=tmp_path_factory.mktemp("spark"))
    try:
        with pytest.MonkeyPatch.context() as patch:  # the worker's environment is captured when it starts
            for name, value in FAST_JVM.items():
                patch.setenv(name, value)
            cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kafka(odradek_cluster_module: Any) -> Any:
    return odradek_cluster_module(3, overrides=BROKER_OVERRIDES)


@pytest.mark.timeout(DEMO_TIMEOUT_S + 120)
def test_pipeline_on_standalone_cluster_through_driver_and_leader_kills(
    standalone: Any, kafka: Any, tmp_path: Path
) -> None:
    from odradek.spark.faults import FaultInjector
    from odradek.spark.pipeline import EVENTS_TOPIC, RESULTS_TOPIC

    status = standalone.status()
    assert (status.workers, status.cores, status.cores_used) == (1, 2, 0)
    output = tmp_path / "out"
    injector = FaultInjector(kafka, output / "checkpoint", EVENTS_TOPIC, RESULTS_TOPIC, step_timeout_s=30).start()
    env = {**os.environ, **FAST_JVM, "PYTHONPATH": str(Path(odradek.__file__).resolve().parents[1])}  # this checkout's
    try:
        demo = subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek.cli.main",
                "demo",
                *("--master", standalone.master_url, "--master-webui", standalone.webui_url),
                *("--bootstrap-servers", kafka.bootstrap_servers),
                *("--replication-factor", "3", "--min-insync-replicas", "2", "--ship-package"),
                *("--events", str(EVENTS), "--max-offsets-per-trigger", "300", "--output", str(output)),
            ],
            capture_output=True,
            text=True,
            timeout=DEMO_TIMEOUT_S,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the demo did not finish within {DEMO_TIMEOUT_S}s: {exc.stdout!r:.3000}\n{exc.stderr!r:.3000}")
    finally:
        injector.stop()
    timeline = "\n".join(text for _, text in injector.timeline)
    assert demo.returncode == 0, f"{demo.stdout[-3000:]}\n{demo.stderr[-3000:]}\n{timeline}"
    expected = top_pages(generate(EVENTS, 7), 3)
    check = re.search(r"check: Parquet \((\d+) rows\) and topic page_visit_counts \((\d+) records", demo.stdout)
    assert check is not None and (int(check[1]), int(check[2])) == (len(expected), len(expected)), demo.stdout
    assert "exactly once although the driver was killed in batch" in demo.stdout
    assert "sample read back with a plain consumer" in demo.stdout
    # run 1 is rate-limited (several batches, the first 60 % of the events); the restart after the
    # killed crash run begins by replaying the batch it was killed in
    run1 = demo.stdout.split("streaming run 1", 1)[1].split("produced the remaining", 1)[0]
    batches = [(int(b), int(rows)) for b, rows in re.findall(r"batch (\d+): (\d+) input rows", run1)]
    assert len(batches) >= 3 and sum(rows for _, rows in batches) == EVENTS * 6 // 10, run1
    killed = re.search(r"killed \(SIGKILL\) in batch (\d+)", demo.stdout)
    assert killed is not None, demo.stdout
    restart = demo.stdout.split("restarted from the checkpoint again:", 1)[1]
    first = re.search(r"batch (\d+): ", restart)
    assert first is not None and first[1] == killed[1], restart
    # both leaders were killed and replaced while the stream ran; every replica is back in its ISR
    kills = [text for _, text in injector.timeline if text.startswith("kill -9 broker")]
    assert len(kills) == 2, timeline
    assert any(f"leader of {EVENTS_TOPIC}-0" in k for k in kills) and any(
        f"leader of {RESULTS_TOPIC}-0" in k for k in kills
    )
    assert "no new leader" not in timeline, timeline
    assert injector.done.is_set(), timeline
    # the applications ended and gave their cores back
    standalone.wait_until(lambda s: not s.active_apps and s.cores_used == 0, timeout_s=30)
