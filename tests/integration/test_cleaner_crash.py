"""The log cleaner under faults, in a real process: SIGKILL at each step of a clean (the cleaner's
crash-point test hook, ``ODRADEK_CLEANER_CRASH_POINT``), a full disk (``RLIMIT_FSIZE``: writes
fail with EFBIG) during a clean, and a cleaner worker process killed mid-clean. After each, the
log loads and reads the same last values."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.unit.cleaner_support import T0, append, compacted_log, latest

from odradek.storage.cleaner import CleanerConfig, LogCleaner, clean_log
from odradek.storage.cleaner.swap import CRASH_POINT_ENV

ROOT = Path(__file__).resolve().parents[2]

CLEAN = """
import os, resource, signal, sys
from pathlib import Path
from odradek.storage.cleaner import CleanerConfig, clean_log
from tests.unit.cleaner_support import T0, compacted_log
log = compacted_log(Path(sys.argv[1]))
if len(sys.argv) > 2:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
try:
    stats = clean_log(log, now_ms=T0, config=CleanerConfig(), upper_bound_offset=log.log_end_offset)
except OSError as exc:
    print("failed", exc.errno)
    sys.exit(3)
print("cleaned", stats.records_retained)
"""


def _fill(tmp_path: Path) -> dict[bytes | None, tuple[int, bytes | None]]:
    log = compacted_log(tmp_path)
    for i in range(120):
        append(log, [(b"k%02d" % (i % 17), b"value-%03d" % i), (b"z", b"%d" % i)], timestamp_ms=T0 + i)
        if i % 20 == 19:
            log.roll()
    append(log, [(b"k00", None)])  # a tombstone
    log.roll()
    append(log, [(b"active", b"x")])
    expected = latest(log)
    log.flush()
    log.close()
    return expected


def _start(tmp_path: Path, *args: str, crash: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    if crash is not None:
        env[CRASH_POINT_ENV] = crash
    return subprocess.Popen(
        [sys.executable, "-c", CLEAN, str(tmp_path), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".log", ".txnindex")}


POINTS = ("cleaned", "swap", "deleting", "deleted")


def test_kill_at_each_step_of_a_clean_leaves_a_log_with_the_same_last_values(tmp_path: Path) -> None:
    expected = {point: _fill(tmp_path / point) for point in POINTS}
    procs = {point: _start(tmp_path / point, crash=point) for point in POINTS}  # one process per step
    for point, proc in procs.items():
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, f"{point}: {err}"
    for point in POINTS:
        log = compacted_log(tmp_path / point)  # no clean shutdown: recovery
        names = [p.name for p in log.dir.iterdir()]
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], point
        assert latest(log) == expected[point], point
        assert log.log_end_offset == 242
        if point != "cleaned":  # the swap was committed: the log is cleaned
            assert log.num_segments == 2, point
        clean_log(log, now_ms=T0, config=CleanerConfig(), upper_bound_offset=log.log_end_offset)
        assert latest(log) == expected[point]  # and a clean afterwards completes
        log.close()


def test_a_full_disk_during_a_clean_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    expected = _fill(tmp_path)
    before = _snapshot(tmp_path / "compacted-0")
    proc = _start(tmp_path, "4096")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3 and "failed 27" in out, out + err  # EFBIG
    assert _snapshot(tmp_path / "compacted-0") == before
    assert not [p for p in (tmp_path / "compacted-0").iterdir() if p.name.endswith(".cleaned")]
    log = compacted_log(tmp_path)
    assert latest(log) == expected
    log.close()


def test_a_cleaner_worker_killed_mid_clean_is_replaced_and_the_log_cleaned_later(tmp_path: Path) -> None:
    expected = _fill(tmp_path)
    before = _snapshot(tmp_path / "compacted-0")
    log = compacted_log(tmp_path)
    log.high_watermark = log.log_end_offset  # no checkpoint read here: everything is committed
    slow = CleanerConfig(max_io_bytes_per_second=8192)  # 11 KiB read twice: ~2 s, to kill it mid-way
    cleaner = LogCleaner(slow, lambda: [log], time_ms=lambda: T0)

    async def run() -> None:
        clean = asyncio.create_task(cleaner.clean_filthiest_log())
        deadline = time.monotonic() + 60
        while not any(p.name.endswith(".cleaned") for p in log.dir.iterdir()):  # rewriting now
            assert time.monotonic() < deadline and not clean.done(), "the clean never started writing"
            await asyncio.sleep(0.02)
        executor = cleaner._executor
        assert executor is not None
        for process in list(executor._processes.values()):  # type: ignore[attr-defined]
            os.kill(process.pid, signal.SIGKILL)
        assert not await clean  # failed, logged; the broker's loop goes on
        assert cleaner._executor is not executor and cleaner.cleans == 0
        assert _snapshot(log.dir) == before
        assert not [p for p in log.dir.iterdir() if p.name.endswith(".cleaned")]
        assert latest(log) == expected
        cleaner.config = CleanerConfig()  # a later round, at full speed, in the new pool
        assert await cleaner.clean_filthiest_log()
        await cleaner.shutdown()

    asyncio.run(run())
    assert cleaner.cleans == 1 and latest(log) == expected and log.num_segments == 2
    log.close()
