"""The broker process keeps large freed buffers instead of faulting fresh pages for every request."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHECK = """
import ctypes, sys
from odradek.server.malloc_tuning import tune_malloc
print(tune_malloc())
"""


def test_tune_malloc_applies_once_and_respects_the_environment() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's mallopt is Linux-only")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    env["MALLOC_TRIM_THRESHOLD_"] = "131072"  # an operator's own setting wins
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
