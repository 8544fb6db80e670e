"""Free TCP ports on 127.0.0.1 for the brokers, ZooKeeper servers and Spark daemons that odradek's
tools (``odradek cluster``, the fault campaign, the benchmarks) and tests start.

A port handed out by :func:`free_port` is bound later by another process (a broker started with
``listeners=PLAINTEXT://127.0.0.1:<port>``), and bound again when that broker restarts after a
kill -9. Two things could take it in between, and each is kept out:

- **An outgoing connection.** The kernel gives every client socket a port of its ephemeral range
  (``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default). Ports are drawn below that
  range, so no client connection of any process can hold one when its broker comes back.
- **Another process picking the same port.** Each pytest-xdist worker (``PYTEST_XDIST_WORKER=gwN``)
  draws from a slice of its own; a process walks its slice from a random start, so processes of one
  worker (a test and the campaign it starts) rarely meet, and a port found bound is skipped.

Where the ephemeral range starts too low to leave room (below :data:`LOW`), or the slice is
exhausted, the kernel's choice (``bind(("127.0.0.1", 0))``) is used, as before this module existed.
Thread-safe; any thread may call.
"""

from __future__ import annotations

import os
import random
import socket
import threading

__all__ = ["LOW", "free_port"]

LOW = 12000
"""The lowest port handed out."""
_SLICES = 16
"""How many pytest-xdist workers get a slice of their own (gw16 shares gw0's, and so on)."""

_lock = threading.Lock()
_next: dict[tuple[int, int], int] = {}


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_index() -> int:
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) % _SLICES if name.startswith("gw") and name[2:].isdigit() else 0


def _slice() -> tuple[int, int]:
    """``[start, end)`` of this process's slice, or ``(0, 0)`` where there is no room below the
    ephemeral range."""
    high = _ephemeral_low()
    size = (high - LOW) // _SLICES
    if size < 64:
        return 0, 0
    start = LOW + _worker_index() * size
    return start, start + size


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now and that no outgoing connection will take
    (see the module docstring). Not reserved: the caller binds it soon after."""
    start, end = _slice()
    if start == end:
        return _kernel_port()
    with _lock:
        key = (start, end)
        port = _next.get(key)
        if port is None:
            port = random.randrange(start, end)
        for _ in range(end - start):
            candidate = port
            port = start if port + 1 >= end else port + 1
            if _bindable(candidate):
                _next[key] = port
                return candidate
    return _kernel_port()
