"""Load kio, Kafka's protocol schemas, without hypothesis: imported first by ``odradek broker``.

kio's phantom types (``kio.static._phantom``) import ``hypothesis.strategies`` whenever hypothesis
is installed, so that property tests can draw kio's primitive types; that import costs about
0.2 s, a sixth of a broker's start, and a broker process never draws from a strategy. Importing
this module before anything else loads kio makes that one import fail (as if hypothesis were
absent) while ``kio.static._phantom`` loads, then lets ``hypothesis`` import normally again.

It only acts in a process where neither kio nor hypothesis is loaded yet (a fresh ``odradek
broker``): a test process that already imported either keeps kio's hypothesis strategies.
Called from the main thread at import time, before any other thread runs.
"""

from __future__ import annotations

import sys


def load_kio_without_hypothesis() -> None:
    """Import ``kio.static._phantom`` with ``hypothesis`` hidden (see the module docstring)."""
    if "kio" in sys.modules or "hypothesis" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # makes `import hypothesis...` raise ImportError
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


load_kio_without_hypothesis()
