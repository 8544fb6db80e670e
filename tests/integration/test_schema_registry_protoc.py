"""A registry process killed with SIGKILL while protoc compiles a schema leaves no protoc child
behind: the child asked the kernel for SIGKILL on its parent's death before it loaded protoc.

The compile is made slow on purpose, because a real one is too quick to be caught: the largest
schema the registry accepts (1 MiB of ``.proto``) compiles in under a second here, so a child
still alive after the kill could not be told from one that simply finished. A ``sitecustomize``
module on the server's ``PYTHONPATH`` makes only the protoc child (recognized by its command line)
sleep when it imports ``grpc_tools.protoc``, which it does after its ``prctl``; the real protoc
then runs as usual. It stands in for a slow compile and tests nothing but the child's lifetime.
Linux only (``/proc``, ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from tests.integration.schema_registry_support import call, wait_until

from odradek.server.runner import BrokerRunner

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's"),
]

SLOW_COMPILE = """\
import os, sys, time
if any("grpc_tools" in arg for arg in getattr(sys, "orig_argv", [])):
    def _slow(event, args):
        if event == "import" and args[0] == "grpc_tools.protoc":
            marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"compiling-{os.getpid()}")
            with open(marker, "w") as f:
                f.write(str(os.getppid()))
            time.sleep(60)
    sys.addaudithook(_slow)
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("sr-protoc"))).start()
    try:
        yield runner
    finally:
        runner.stop()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == pid:
                out.append(int(entry))
    return out


def _dead(pid: int) -> bool:
    stat = _stat(pid)
    return stat is None or stat[0] in ("Z", "X")  # a zombie is dead, whoever reaps it


def test_protoc_child_dies_with_a_killed_registry(broker: BrokerRunner, tmp_path: pathlib.Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(SLOW_COMPILE)
    src = str(pathlib.Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), src])}
    bootstrap = ["--bootstrap-server", broker.bootstrap_servers]
    server = subprocess.Popen(
        [sys.executable, "-m", "odradek.cli.main", "schema-registry", "--listen", "127.0.0.1:0", *bootstrap],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:")
        wait_until(lambda: call(url, "GET", "/subjects")[0] == 200, 20, "the registry")
        body = {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3";\nmessage Slow { int32 a = 1; }\n'}
        threading.Thread(target=lambda: _ignore_errors(url, body), daemon=True).start()
        marker = wait_until(lambda: next(tmp_path.glob("compiling-*"), None), 20, "protoc to start compiling")
        child = int(marker.name.split("-")[1])
        assert int(marker.read_text()) == server.pid and not _dead(child)
        children = _children(server.pid)
        assert child in children
        server.send_signal(signal.SIGKILL)
        assert server.wait(10) == -signal.SIGKILL
        started = time.monotonic()
        wait_until(lambda: all(_dead(pid) for pid in children), 5, "the registry's children to die with it")
        # without the parent-death signal the child would sleep on for a minute, then compile
        assert time.monotonic() - started < 5
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
        for entry in tmp_path.glob("compiling-*"):  # never leave a stray child, whatever failed
            pid = int(entry.name.split("-")[1])
            if not _dead(pid):
                os.kill(pid, signal.SIGKILL)


def _ignore_errors(url: str, body: dict[str, str]) -> None:
    try:
        call(url, "POST", "/subjects/slow/versions", body)
    except Exception:  # the server is killed while this request waits
        pass
