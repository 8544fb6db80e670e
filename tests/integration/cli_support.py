"""``odradek <command> ...`` run in-process, as the ``odradek`` entry point runs it.

:func:`odradek` calls :func:`odradek.cli.main.main` with stdin, stdout and stderr replaced, and
answers a :class:`subprocess.CompletedProcess` (``returncode``, ``stdout``, ``stderr``), so a test
reads it as it would read a subprocess's; it saves the second or so a new interpreter costs per
command. An exception the command lets out fails the test with its traceback (a process would
print it and exit 1). One command at a time (stdio are the process's): callable from any thread,
serialized by a lock.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import threading
from collections.abc import Iterator

from odradek.cli.main import main

_lock = threading.Lock()


@contextlib.contextmanager
def _stdin(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def odradek(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``odradek *argv`` with ``stdin`` as its input (empty: EOF at once)."""
    out, err = io.StringIO(), io.StringIO()
    with _lock, _stdin(stdin), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return subprocess.CompletedProcess(["odradek", *argv], code, out.getvalue(), err.getvalue())


def odradek_ok(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """:func:`odradek` that must exit 0 (else the test fails with its stderr and stdout)."""
    result = odradek(*argv, stdin=stdin)
    assert result.returncode == 0, result.stderr + result.stdout
    return result
