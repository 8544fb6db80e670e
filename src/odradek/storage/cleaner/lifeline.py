"""The log cleaner's worker processes die with the broker, however it dies (``kill -9`` mid-clean
included): each worker watches a pipe whose only write end the broker holds.

The processes: the cleaner's ``forkserver`` context starts, in the broker, multiprocessing's
resource tracker and the forkserver (both spawned, children of the broker); the pool's workers are
forked by the forkserver (grandchildren). Left alone, a broker killed with SIGKILL leaves all three
running for ever: each worker blocks reading its call queue, whose write end it holds too, and
holds the write ends of the forkserver's "alive" pipe and of the tracker's pipe, the two EOFs on
which those exit. So the workers are what must go; the rest follows:

1. :func:`broker_lifeline` (in the broker) makes, once per process, a pipe that nothing ever
   writes. The broker keeps the write end (close-on-exec: no program it runs inherits it, and the
   forkserver and tracker are spawned with only the descriptors they are given); the read end goes
   to each worker as the pool's ``initargs``.
2. :func:`hold_lifeline` (the pool's ``initializer``, in each worker) starts a daemon thread that
   reads it. The read returns only at EOF, when the kernel has closed the broker's last descriptor,
   i.e. the broker process is gone; the thread then ends the worker at once with ``os._exit``
   (a clean in progress leaves ``.cleaned`` files, removed when the log is next loaded).
3. With the broker and the workers gone the forkserver sees EOF on its alive pipe and exits; then
   the tracker sees EOF on its pipe and exits (unlinking any semaphore left registered).

Why not ``prctl(PR_SET_PDEATHSIG)``: it signals a process when its *parent* dies, and the
workers' parent is the forkserver, which lives as long as any worker; and the forkserver is a
process-wide singleton whose parent is whichever broker thread first submitted a clean, so it
would die with that thread (a broker run on a thread and stopped, while another in the same
process still cleans). It is also Linux only; the pipe is plain POSIX and tied to the broker
process itself.

The pipe is per process, not per broker: brokers in one process (tests) share it, as they share
the forkserver. A process that ``os.fork``s without ``exec`` (not the broker) hands its copy of
the write end on, and the workers then also outlive the broker until that child is gone.
"""

from __future__ import annotations

import os
import threading
from multiprocessing.connection import Connection, Pipe

__all__ = ["LIFELINE_EXIT_CODE", "broker_lifeline", "hold_lifeline"]

LIFELINE_EXIT_CODE = 70
"""A worker's exit status when it ends because the broker is gone."""

_lock = threading.Lock()
_ends: tuple[Connection, Connection] | None = None


def broker_lifeline() -> Connection:
    """The read end of this process's lifeline, made at the first call; pass it to a worker
    (pickled through the forkserver as a descriptor, like any ``Connection``). The write end is
    kept here for the life of the process. Any thread may call."""
    global _ends
    with _lock:
        if _ends is None:
            _ends = Pipe(duplex=False)  # (read end, write end)
        return _ends[0]


def hold_lifeline(lifeline: Connection) -> None:
    """In a worker process, as it starts (the pool's ``initializer``): end the process when the
    broker is gone, i.e. when ``lifeline`` reads EOF. Returns at once; the watch is a daemon thread
    blocked in ``read``, so it costs the worker's clean nothing."""

    def watch() -> None:  # holds ``lifeline``: a collected Connection would close the descriptor
        try:
            while os.read(lifeline.fileno(), 1):  # nothing is ever written: only EOF (or an error) ends the read
                pass
        finally:
            os._exit(LIFELINE_EXIT_CODE)

    threading.Thread(target=watch, name="odradek-cleaner-lifeline", daemon=True).start()
