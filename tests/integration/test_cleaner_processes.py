"""No process outlives its broker: a broker process whose log cleaner runs has a resource tracker,
a forkserver and a worker below it (read from /proc); after ``kill -9`` of the broker in the middle
of a clean, and after a clean shutdown, none of them is left."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.integration.process_support import BrokerProcess

from odradek.storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from odradek.storage.cleaner.swap import CLEANED_SUFFIX


@dataclass(frozen=True)
class Proc:
    """A process as /proc showed it: ``start`` (clock ticks after boot) tells a reused pid apart."""

    pid: int
    ppid: int
    start: int
    cmdline: str


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of ``pid``, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid ... starttime (the 20th)
    return fields[0], int(fields[1]), int(fields[19])


def _descendants(root: int) -> list[Proc]:
    """Every process below ``root``: its children, theirs, and so on."""
    procs: dict[int, Proc] = {}
    for entry in Path("/proc").iterdir():
        stat = _stat(int(entry.name)) if entry.name.isdigit() else None
        if stat is None:
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            procs[int(entry.name)] = Proc(int(entry.name), stat[1], stat[2], cmdline)
    found: list[Proc] = []
    parents = {root}
    while parents:
        below = [p for p in procs.values() if p.ppid in parents]
        found += below
        parents = {p.pid for p in below}
    return found


def _running(proc: Proc) -> bool:
    """The same process (pid and start time) exists and is not a zombie awaiting its reaper."""
    stat = _stat(proc.pid)
    return stat is not None and stat[2] == proc.start and stat[0] != "Z"


def _cleaner_processes(broker: BrokerProcess) -> list[Proc]:
    """The broker's descendants, asserted to include the cleaner's three kinds of process."""
    assert broker.proc is not None
    pid = broker.proc.pid
    procs = _descendants(pid)
    forkservers = [p for p in procs if p.ppid == pid and "multiprocessing.forkserver" in p.cmdline]
    assert len(forkservers) == 1, procs
    assert [p for p in procs if p.ppid == pid and "multiprocessing.resource_tracker" in p.cmdline], procs
    assert [p for p in procs if p.ppid == forkservers[0].pid], procs  # a pool worker
    return procs


def _assert_all_gone(procs: list[Proc], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (left := [p for p in procs if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in left:  # do not leak them into the rest of the run, then fail
        os.kill(p.pid, signal.SIGKILL)
    assert not left, f"still running {timeout} s after the broker: {left}"


def _fill_compacted_topic(bootstrap: str) -> str:
    """A compacted topic of many rolled 4 KiB segments (~50 KB), ready for the cleaner; its name.
    The clients are gone when it returns (none is left retrying a killed broker)."""
    topic = f"table-{uuid.uuid4().hex[:8]}"
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for r in range(12):
        for k in range(20):
            producer.produce(topic, key=b"key-%02d" % k, value=b"%03d" % r * 40, partition=0)
        assert producer.flush(10) == 0
    return topic


@contextlib.contextmanager
def _compacting_broker(tmp_path: Path, io_bytes_per_second: int | None = None) -> Iterator[tuple[BrokerProcess, Path]]:
    """A broker process with a topic for its cleaner (:func:`_fill_compacted_topic`); yields it
    and the partition's directory. The broker is killed on the way out."""
    overrides = {"log.cleaner.backoff.ms": "100"}
    if io_bytes_per_second is not None:
        overrides["log.cleaner.io.max.bytes.per.second"] = str(io_bytes_per_second)
    broker = BrokerProcess(tmp_path / "data", overrides).start()
    try:
        topic = _fill_compacted_topic(broker.bootstrap_servers)
        yield broker, tmp_path / "data" / f"{topic}-0"
    finally:
        broker.kill()


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.05)


def _cleaning(partition: Path) -> bool:
    return partition.is_dir() and any(p.name.endswith(CLEANED_SUFFIX) for p in partition.iterdir())


def test_no_cleaner_process_outlives_a_broker_killed_mid_clean(tmp_path: Path) -> None:
    # 8 KB/s: the clean reads the ~50 KB twice, seconds of work to be caught in.
    with _compacting_broker(tmp_path, io_bytes_per_second=8192) as (broker, partition):
        _wait_for(lambda: _cleaning(partition), "the cleaner writes .cleaned files")
        procs = _cleaner_processes(broker)
        broker.kill()  # SIGKILL
        assert _cleaning(partition)  # the clean was cut short: the worker was at work
        _assert_all_gone(procs)


def test_no_cleaner_process_outlives_a_broker_shut_down_cleanly(tmp_path: Path) -> None:
    with _compacting_broker(tmp_path) as (broker, partition):
        checkpoint = partition.parent / CLEANER_OFFSET_CHECKPOINT
        _wait_for(lambda: checkpoint.exists() and f"{partition.name[:-2]} 0 " in checkpoint.read_text(), "a clean")
        procs = _cleaner_processes(broker)
        assert broker.stop() == 0
        _assert_all_gone(procs)
