"""A broker in its own process, for tests that must see it crash, grow or stall from outside."""

from __future__ import annotations

import contextlib
import pathlib
import signal
import socket
import subprocess
import sys
import time

from odradek.free_ports import free_port


class BrokerProcess:
    """``odradek broker`` on 127.0.0.1 with its data in ``data_dir``; output in ``log_path``."""

    def __init__(self, data_dir: pathlib.Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.overrides = overrides or {}
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        argv = [sys.executable, "-m", "odradek.cli.main", "broker", "--log-level", "INFO"]
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": str(self.data_dir), **self.overrides}
        for key, value in props.items():
            argv += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"broker exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            time.sleep(0.05)
        self.kill()
        raise AssertionError("broker did not start")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_bytes(self, key: str = "VmRSS") -> int:
        assert self.proc is not None
        for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {key} for pid {self.proc.pid}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
