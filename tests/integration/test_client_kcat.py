"""Debian's kcat (librdkafka 2.0.2): metadata (-L), produce (-P), consume (-C -e), offsets (-Q)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from odradek.testing import BrokerRunner

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make test installs it)")


def kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    result = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_produce_consume_list_query(odradek_broker: BrokerRunner) -> None:
    b = odradek_broker.bootstrap_servers
    lines = [f"key{i}:value {i}" for i in range(100)]
    kcat("-b", b, "-P", "-t", "kc", "-K", ":", "-p", "0", stdin="\n".join(lines) + "\n")
    meta = kcat("-b", b, "-L", "-t", "kc")
    assert 'topic "kc" with 1 partitions' in meta
    assert "partition 0, leader 0, replicas: 0, isrs: 0" in meta
    out = kcat("-b", b, "-C", "-t", "kc", "-e", "-o", "beginning", "-f", "%k|%s|%o\\n")
    rows = out.strip().splitlines()
    assert rows == [f"key{i}|value {i}|{i}" for i in range(100)]
    query = kcat("-b", b, "-Q", "-t", "kc:0:-1")
    assert "kc [0]" in query and "offset 100" in query
    # ts-based query: every record has a timestamp <= now, so a far-future time gives -1 / end
    early = kcat("-b", b, "-Q", "-t", "kc:0:0")
    assert "offset 0" in early
