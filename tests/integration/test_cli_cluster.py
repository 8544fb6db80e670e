"""``odradek cluster`` after a plain install: started in a Python where pytest cannot be imported,
it runs its own ZooKeeper and a broker, prints their addresses, and stops both on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.client.admin import AdminClient

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(120)]

WITHOUT_PYTEST = (
    "import sys; sys.modules['pytest'] = None; from odradek.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def test_odradek_cluster_runs_without_pytest(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", WITHOUT_PYTEST, "cluster", "--brokers", "1", "--data-dir", str(tmp_path)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 60
        assert proc.stdout is not None
        while time.monotonic() < deadline and not (lines and lines[-1].startswith("bootstrap.servers=")):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        assert lines and lines[-1].startswith("bootstrap.servers="), (lines, proc.stderr and proc.stderr.read())
        bootstrap = lines[-1].partition("=")[2]

        async def brokers() -> list[int]:
            async with AdminClient(bootstrap) as admin:
                return [b[0] for b in (await admin.describe_cluster()).brokers]

        assert asyncio.run(brokers()) == [1]
        proc.send_signal(signal.SIGTERM)
        out, _err = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert "stopping the cluster" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
