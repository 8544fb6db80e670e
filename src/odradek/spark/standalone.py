"""A Spark standalone cluster (one master, N workers) started from the pyspark package itself.

:class:`StandaloneCluster` runs ``<pyspark>/bin/spark-class org.apache.spark.deploy.master.Master``
and ``...deploy.worker.Worker`` as child processes (nothing downloaded, no ``sbin`` daemon scripts:
``SPARK_NO_DAEMONIZE`` keeps them in the foreground), each in a process group of its own so
:meth:`~StandaloneCluster.stop` also takes the executor JVMs and Python workers the worker spawned.
Everything listens on 127.0.0.1 on free ports; each process logs to ``<base_dir>/<name>.log`` and
each worker's executors work in ``<base_dir>/work-<n>``.

The master's state comes from its web UI's JSON (``http://127.0.0.1:<webui port>/json/``), parsed by
:func:`parse_master_json` into a :class:`MasterStatus`: alive workers, their cores and cores in use,
and the running applications. :func:`master_status` reads it for any master (also one this module
did not start).

The JVMs get a small heap (``SPARK_DAEMON_MEMORY``, default 256m) and one JIT compiler thread
count fitting a 2-core machine. Not thread-safe: drive one cluster from one thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from odradek.free_ports import free_port

__all__ = [
    "EXECUTOR_MAIN_CLASS",
    "MasterStatus",
    "StandaloneCluster",
    "master_status",
    "parse_master_json",
    "pyspark_home",
]

EXECUTOR_MAIN_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class MasterStatus:
    """What a standalone master's ``/json/`` says.

    ``cores`` and ``cores_used`` count ALIVE workers only (the JSON's ``cores``/``coresused`` do
    the same); ``active_apps`` are ``(app id, name, cores granted)`` of the running applications."""

    url: str
    status: str
    workers: int
    cores: int
    cores_used: int
    active_apps: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def cores_free(self) -> int:
        return max(0, self.cores - self.cores_used)


def parse_master_json(document: dict[str, Any]) -> MasterStatus:
    """A :class:`MasterStatus` from the master's ``/json/`` document.

    Workers not in state ``ALIVE`` (``DEAD``, ``DECOMMISSIONED``, ``UNKNOWN``) are left out of the
    worker and core counts; a missing key counts as zero/empty."""
    alive = [w for w in document.get("workers", []) if w.get("state") == "ALIVE"]
    apps = [
        (str(a.get("id", "")), str(a.get("name", "")), int(a.get("cores", 0))) for a in document.get("activeapps", [])
    ]
    return MasterStatus(
        url=str(document.get("url", "")),
        status=str(document.get("status", "")),
        workers=len(alive),
        cores=sum(int(w.get("cores", 0)) for w in alive),
        cores_used=sum(int(w.get("coresused", 0)) for w in alive),
        active_apps=apps,
    )


def master_status(webui_url: str, timeout_s: float = 5.0) -> MasterStatus:
    """Read and parse ``<webui_url>/json/`` (e.g. ``http://127.0.0.1:8080``). Raises OSError
    (URLError) when the master's web UI does not answer."""
    with urllib.request.urlopen(webui_url.rstrip("/") + "/json/", timeout=timeout_s) as response:
        return parse_master_json(json.loads(response.read()))


def pyspark_home() -> Path:
    """The installed pyspark package directory (holds ``bin/spark-class`` and ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` from ``/proc/<pid>/task/*/children`` (Linux); empty elsewhere."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError):
            found += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1, each worker offering
    ``cores_per_worker`` cores and ``memory`` for executors. Use as a context manager or call
    :meth:`start` / :meth:`stop`."""

    def __init__(
        self,
        workers: int = 1,
        cores_per_worker: int = 2,
        memory: str = "1g",
        base_dir: str | Path = "spark-standalone",
        daemon_memory: str = "256m",
        start_timeout_s: float = 90.0,
    ) -> None:
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory = memory
        self.base_dir = Path(base_dir).resolve()
        self.daemon_memory = daemon_memory
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.webui_port = 0
        self.master: subprocess.Popen[bytes] | None = None
        self.worker_processes: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------------------------ addresses
    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def environment(self) -> dict[str, str]:
        """The environment of the master and workers (and so of executors and Python workers)."""
        env = dict(os.environ)
        if env.get("PYTHONPATH"):  # the processes run in base_dir: relative entries made absolute
            env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep))
        env.update(
            {
                "PYSPARK_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_NO_DAEMONIZE": "1",
                "SPARK_DAEMON_MEMORY": self.daemon_memory,
                "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=2 -Xss1m",
                "SPARK_LOG_DIR": str(self.base_dir),
                "SPARK_HOME": str(pyspark_home()),
            }
        )
        return env

    # ------------------------------------------------------------------------------ lifecycle
    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.base_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        try:
            return subprocess.Popen(
                [str(pyspark_home() / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.environment(),
                cwd=self.base_dir,
                start_new_session=True,
            )
        finally:
            log.close()

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; returns once the master's JSON shows every worker
        ALIVE. Raises RuntimeError (with the log's tail) when that takes over ``start_timeout_s``."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.port, self.webui_port = free_port(), free_port()
        try:
            self.master = self._spawn(
                "master",
                [_MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.webui_port)],
            )
            self._wait(lambda s: True, "the master's web UI", "master")
            for n in range(self.workers):
                work_dir = self.base_dir / f"work-{n + 1}"
                work_dir.mkdir(exist_ok=True)
                self.worker_processes.append(
                    self._spawn(
                        f"worker-{n + 1}",
                        [
                            _WORKER_CLASS,
                            self.master_url,
                            "--host",
                            "127.0.0.1",
                            "--webui-port",
                            str(free_port()),
                            "--cores",
                            str(self.cores_per_worker),
                            "--memory",
                            self.memory,
                            "--work-dir",
                            str(work_dir),
                        ],
                    )
                )
            self._wait(lambda s: s.workers >= self.workers, f"{self.workers} ALIVE worker(s)", "worker-1")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, condition: Any, what: str, log_name: str) -> MasterStatus:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            for process in [self.master, *self.worker_processes]:
                if process is not None and process.poll() is not None:
                    raise RuntimeError(f"Spark {log_name} exited with {process.returncode}: {self._tail(log_name)}")
            with contextlib.suppress(OSError, ValueError):
                status = self.status()
                if condition(status):
                    return status
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} after {self.start_timeout_s:.0f}s: {self._tail(log_name)}")
            time.sleep(0.25)

    def _tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join((self.base_dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def status(self) -> MasterStatus:
        """The master's JSON now (raises OSError when its web UI does not answer)."""
        return master_status(self.webui_url)

    def wait_until(self, condition: Any, timeout_s: float = 60.0) -> MasterStatus:
        """Poll :meth:`status` until ``condition(status)`` is true; TimeoutError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(OSError, ValueError):
                status = self.status()
                if condition(status):
                    return status
            if time.monotonic() > deadline:
                raise TimeoutError(f"master status condition not met within {timeout_s:.0f}s")
            time.sleep(0.2)

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs (``CoarseGrainedExecutorBackend``) the workers spawned:
        descendants of each worker process whose command line names that class."""
        pids: list[int] = []
        pending = [p.pid for p in self.worker_processes if p.poll() is None]
        seen: set[int] = set()
        while pending:
            pid = pending.pop()
            if pid in seen:
                continue
            seen.add(pid)
            if EXECUTOR_MAIN_CLASS in _cmdline(pid):
                pids.append(pid)
            pending += _children(pid)
        return sorted(pids)

    def kill_executor(self, sig: int = signal.SIGKILL) -> int | None:
        """Send ``sig`` (SIGKILL) to one executor JVM (the newest); its pid, or None when no
        executor runs. The worker reports it lost; the driver retries its tasks elsewhere."""
        pids = self.executor_pids()
        if not pids:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pids[-1], sig)
        return pids[-1]

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master: SIGTERM to each process group,
        SIGKILL after 10 s. Safe to call twice."""
        processes = [*self.worker_processes, *([self.master] if self.master else [])]
        for process in processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        self.worker_processes = []
        self.master = None

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
