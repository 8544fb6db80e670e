"""kill -9 during a produce loop, restart: every acknowledged record is there, nothing else is,
and the log passes dump-log verification. Also: bad configs and corrupt files at start-up."""

from __future__ import annotations

import glob
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.cli.dump_log import main as dump_log_main
from odradek.free_ports import free_port
from odradek.protocol.records import validate_batches
from odradek.replication.replica_manager import IO_THREAD_MIN_BYTES

from .cli_support import odradek


def _start_broker(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    log_file = open(data_dir.parent / f"{data_dir.name}-broker.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek.cli.main",
            "broker",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={data_dir}",
            "--override",
            "log.segment.bytes=200000",
            "--override",
            "log.index.interval.bytes=1024",
            "--override",
            "num.partitions=2",
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    log_file.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(_output(data_dir)) from None
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("broker did not start")


def _output(data_dir: Path) -> str:
    return (data_dir.parent / f"{data_dir.name}-broker.log").read_text(errors="replace")


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(30)


def _consume(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    idle = 0
    while idle < 6:
        msgs = c.consume(1000, 0.5)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            assert m.error() is None, m.error()
            out[m.partition()].append(m.value())
    c.close()
    return out


@pytest.mark.parametrize(
    "batches",
    [
        pytest.param({"linger.ms": 2, "value_bytes": 200, "min_acked": 1000, "max_sent": 10**9}, id="small"),
        # batches of up to 1 MB: written by the broker's I/O threads
        pytest.param(
            {"linger.ms": 100, "batch.size": 1_000_000, "value_bytes": 1000, "min_acked": 20_000, "max_sent": 60_000},
            id="io-threads",
        ),
    ],
)
def test_kill_9_during_produce_loses_no_acknowledged_record(tmp_path: Path, batches: dict[str, int]) -> None:
    port = free_port()
    proc = _start_broker(tmp_path, port)
    bootstrap = f"127.0.0.1:{port}"
    acked: set[bytes] = set()
    sent: set[bytes] = set()
    settings = dict(batches)
    value_bytes, min_acked, max_sent = settings.pop("value_bytes"), settings.pop("min_acked"), settings.pop("max_sent")
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "message.timeout.ms": 3000,
            "retries": 0,
            "socket.timeout.ms": 2000,
            **settings,
        }
    )

    def cb(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            acked.add(msg.value())

    i = 0
    start = time.time()
    while (time.time() - start < 1.5 or len(acked) < min_acked) and len(sent) < max_sent:
        value = b"record-%08d-" % i + b"x" * value_bytes
        sent.add(value)
        try:
            producer.produce("crash", value=value, partition=i % 2, on_delivery=cb)
        except BufferError:
            producer.poll(0.05)
            continue
        i += 1
        producer.poll(0)
        assert time.time() - start < 20, "produce loop made no progress"
    # on a loaded machine the send budget runs out before enough answers came back: wait for them
    # (most of what was sent is still in flight) so the kill still lands on an acknowledged prefix
    while len(acked) < min(min_acked, max_sent // 2) and time.time() - start < 20:
        producer.poll(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # while records are still in flight
    proc.wait(10)
    producer.flush(5)
    assert len(acked) >= min(min_acked, max_sent // 2)
    proc = _start_broker(tmp_path, port)
    try:
        got = _consume(bootstrap, "crash", 2)
    finally:
        returncode = _stop(proc)
    all_got = [v for vs in got.values() for v in vs]
    assert acked <= set(all_got), f"{len(acked - set(all_got))} acknowledged records lost"
    assert set(all_got) <= sent, "records that were never sent appeared"
    assert len(all_got) == len(set(all_got)), "duplicates (retries were off)"
    for vs in got.values():
        seq = [int(v.split(b"-")[1]) for v in vs]
        assert seq == sorted(seq), "per-partition order broken"
    assert returncode == 0, _output(tmp_path)
    logs = sorted(glob.glob(str(tmp_path / "crash-*" / "*.log")))
    assert logs
    # an empty segment (rolled just before the kill) has no index file yet: it is made at its first append
    indexes = [p[:-4] + ".index" for p in logs if os.path.getsize(p) > 0 or os.path.exists(p[:-4] + ".index")]
    assert dump_log_main(["--files", ",".join(indexes), "--verify-index-only"]) == 0
    if "batch.size" in settings:  # the I/O-thread path was taken
        assert max(h.batch_length for p in logs for h in validate_batches(Path(p).read_bytes())) >= IO_THREAD_MIN_BYTES


def test_flipped_byte_in_tail_is_truncated_at_startup(tmp_path: Path) -> None:
    port = free_port()
    proc = _start_broker(tmp_path, port)
    bootstrap = f"127.0.0.1:{port}"
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(100):
        p.produce("flip", value=b"v%03d" % i + b"y" * 100, partition=0)
        p.flush(5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    seg = sorted(glob.glob(str(tmp_path / "flip-0" / "*.log")))[-1]
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:
        f.seek(size - 30)
        b = f.read(1)
        f.seek(size - 30)
        f.write(bytes([b[0] ^ 0xFF]))
    proc = _start_broker(tmp_path, port)
    try:
        got = _consume(bootstrap, "flip", 1)[0]
    finally:
        assert _stop(proc) == 0
    out = _output(tmp_path)
    assert got == [b"v%03d" % i + b"y" * 100 for i in range(99)]
    assert "flip-0" in out and "CRC mismatch" in out and "Truncated 174 of" in out

    # after a clean shutdown the index is still checked: a broken one is rebuilt, never trusted
    with open(seg[:-4] + ".index", "r+b") as f:
        f.write(b"\xff" * 16)
    proc = _start_broker(tmp_path, port)
    try:
        got = _consume(bootstrap, "flip", 1)[0]
    finally:
        assert _stop(proc) == 0
    assert got == [b"v%03d" % i + b"y" * 100 for i in range(99)]
    assert "corrupt index" in _output(tmp_path) and "rebuilding the index" in _output(tmp_path)
    assert dump_log_main(["--files", seg[:-4] + ".index", "--verify-index-only"]) == 0


def _broker_process(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", *argv], capture_output=True, text=True, timeout=30)


def test_bad_config_exits_with_one_line(tmp_path: Path) -> None:
    """The first case as a process (nothing else, a log line included, reaches stderr); the others
    in-process, as the entry point runs them."""
    for run, args, needle in (
        (_broker_process, ["--override", "no.such.key=1"], "no.such.key"),
        (odradek, ["--override", "num.partitions=abc"], "num.partitions"),
        (odradek, ["--override", "listeners=nonsense"], "listener"),
        (odradek, [str(tmp_path / "missing.properties")], "missing.properties"),
    ):
        result = run("broker", *args)
        assert result.returncode == 1, (args, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and needle in lines[0], (args, result.stderr)
