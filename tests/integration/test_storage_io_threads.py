"""Appends written by I/O threads (``Log.append_as_leader_async``) and the ``pwritev`` framing
(here rather than in unit/ because it runs real threads).

The executors are real thread pools; a "gated" pool holds a write before or after the bytes reach
the file, so the tests can act on the log while a write is in progress.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from odradek.errors import KafkaStorageError
from odradek.protocol.records import LOG_APPEND_TIME, BatchHeader, Record, build_batch, validate_batches
from odradek.storage import Log
from unit.storage_support import Clock, log_config


def batch(n: int, value_size: int = 100, ts: int = 1_700_000_000_000, **kw: Any) -> bytes:
    return build_batch([Record(b"k", bytes([i % 251]) * value_size, timestamp_ms=ts + i) for i in range(n)], **kw)


def stored_batches(log: Log) -> list[BatchHeader]:
    """Every batch in the segment files, CRC-checked."""
    return [h for seg in log.segments for h in validate_batches(seg.log_path.read_bytes())]


class GatedExecutor(ThreadPoolExecutor):
    """Runs each task on a thread, waiting on ``gate`` before (``when="before"``) or after the task."""

    def __init__(self, when: str) -> None:
        super().__init__(max_workers=2)
        self.gate = threading.Event()
        self.started = threading.Event()
        self.when = when

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def gated() -> Any:
            self.started.set()
            if self.when == "before":
                self.gate.wait(10)
            result = fn(*args, **kwargs)
            if self.when == "after":
                self.gate.wait(10)
            return result

        return super().submit(gated)


async def wait_started(executor: GatedExecutor) -> None:
    for _ in range(1000):
        if executor.started.is_set():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the write never started")


def test_concurrent_async_appends_keep_arrival_order(tmp_path: Path) -> None:
    payloads = [batch(50 if i % 3 else 2, value_size=1000) for i in range(40)]  # ~50 KB and ~2 KB

    async def run() -> list[tuple[int, int]]:
        log = Log(tmp_path / "t-0", log_config(segment_bytes=400_000))
        with ThreadPoolExecutor(4) as pool:
            infos = await asyncio.gather(
                *(log.append_as_leader_async(p, 3, executor=pool, executor_min_bytes=10_000) for p in payloads)
            )
        assert log.log_end_offset == sum(validate_batches(p)[0].records_count for p in payloads)
        assert log.num_segments > 1
        headers = stored_batches(log)
        assert [h.base_offset for h in headers] == [i.first_offset for i in infos]
        assert all(h.partition_leader_epoch == 3 for h in headers)
        log.close()
        return [(i.first_offset, i.last_offset) for i in infos]

    ranges = asyncio.run(run())
    expected, offset = [], 0
    for p in payloads:
        n = validate_batches(p)[0].records_count
        expected.append((offset, offset + n - 1))
        offset += n
    assert ranges == expected
    reopened = Log(tmp_path / "t-0", log_config(segment_bytes=400_000))
    assert reopened.log_end_offset == offset
    reopened.close()


def test_bytes_are_stored_as_sent_except_offset_and_epoch(tmp_path: Path) -> None:
    payload = batch(3) + batch(5, producer_id=9, producer_epoch=1, base_sequence=0)

    async def run() -> None:
        log = Log(tmp_path / "t-0", log_config())
        with ThreadPoolExecutor(1) as pool:
            log.append_as_leader(batch(2), 0)
            await log.append_as_leader_async(payload, 12, executor=pool, executor_min_bytes=0)
        data = log.segments[0].log_path.read_bytes()
        tail = data[len(batch(2)) :]
        assert len(tail) == len(payload)
        first_len = len(batch(3))
        for start, base in ((0, 2), (first_len, 5)):
            assert struct.unpack_from(">qii", tail, start) == (
                base,
                struct.unpack_from(">i", payload, start + 8)[0],
                12,
            )
            end = first_len if start == 0 else len(payload)
            assert tail[start + 16 : end] == payload[start + 16 : end]
        log.close()

    asyncio.run(run())


def test_a_write_in_progress_is_invisible_until_committed(tmp_path: Path) -> None:
    async def run() -> None:
        log = Log(tmp_path / "t-0", log_config())
        log.append_as_leader(batch(4))
        pool = GatedExecutor("after")
        task = asyncio.create_task(log.append_as_leader_async(batch(10), executor=pool))
        await wait_started(pool)
        await asyncio.sleep(0.05)  # the bytes are in the file by now, not committed
        assert log.log_end_offset == 4
        assert log.read(4, 1 << 20).size == 0
        with pytest.raises(KafkaStorageError, match="asynchronous append is in progress"):
            log.append_as_leader(batch(1))
        pool.gate.set()
        info = await task
        assert (info.first_offset, info.last_offset, log.log_end_offset) == (4, 13, 14)
        assert log.read(4, 1 << 20).size > 0
        pool.shutdown()
        log.close()

    asyncio.run(run())


@pytest.mark.parametrize("when", ["before", "after"])
def test_close_during_a_write_fails_the_append_and_keeps_none_of_it(tmp_path: Path, when: str) -> None:
    async def run() -> int:
        log = Log(tmp_path / "t-0", log_config())
        log.append_as_leader(batch(4))
        size = log.segments[0].log_path.stat().st_size
        pool = GatedExecutor(when)
        task = asyncio.create_task(log.append_as_leader_async(batch(10), executor=pool))
        await wait_started(pool)
        await asyncio.sleep(0.02)
        log.close()
        pool.gate.set()
        with pytest.raises(KafkaStorageError):
            await task
        pool.shutdown()
        return size

    size = asyncio.run(run())
    assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == size
    reopened = Log(tmp_path / "t-0", log_config())
    assert reopened.log_end_offset == 4
    reopened.close()


def test_truncation_during_a_write_discards_it(tmp_path: Path) -> None:
    async def run() -> None:
        log = Log(tmp_path / "t-0", log_config())
        log.append_as_leader(batch(4))
        log.append_as_leader(batch(4))
        pool = GatedExecutor("after")
        task = asyncio.create_task(log.append_as_leader_async(batch(10), executor=pool))
        await wait_started(pool)
        await asyncio.sleep(0.02)
        assert log.truncate_to(4)
        pool.gate.set()
        with pytest.raises(KafkaStorageError, match="truncated"):
            await task
        assert log.log_end_offset == 4
        assert [h.base_offset for h in stored_batches(log)] == [0]
        info = await log.append_as_leader_async(batch(2), executor=pool)
        assert info.first_offset == 4
        pool.shutdown()
        log.close()

    asyncio.run(run())


def test_retention_spares_the_active_segment_while_it_is_written(tmp_path: Path) -> None:
    clock = Clock()

    async def run() -> None:
        log = Log(tmp_path / "t-0", log_config(retention_ms=1000), time_ms=clock)
        log.append_as_leader(batch(4, ts=clock.now))
        log.high_watermark = log.log_end_offset
        clock.now += 10_000
        pool = GatedExecutor("after")
        task = asyncio.create_task(log.append_as_leader_async(batch(3, ts=clock.now), executor=pool))
        await wait_started(pool)
        assert log.delete_old_segments() == 0
        pool.gate.set()
        info = await task
        assert info.first_offset == 4
        assert [h.base_offset for h in stored_batches(log)] == [0, 4]
        pool.shutdown()
        log.close()

    asyncio.run(run())


def test_log_append_time_is_stamped_on_the_async_path(tmp_path: Path) -> None:
    clock = Clock(1_800_000_000_000)

    async def run() -> None:
        log = Log(tmp_path / "t-0", log_config(message_timestamp_type="LogAppendTime"), time_ms=clock)
        with ThreadPoolExecutor(1) as pool:
            info = await log.append_as_leader_async(batch(3) + batch(2), executor=pool, executor_min_bytes=0)
        assert info.log_append_time == clock.now
        headers = stored_batches(log)  # CRCs were recomputed
        assert [h.max_timestamp for h in headers] == [clock.now, clock.now]
        assert all(h.timestamp_type == LOG_APPEND_TIME for h in headers)
        log.close()

    asyncio.run(run())


def test_more_batches_than_iov_max_in_one_append(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", log_config())
    payload = b"".join(batch(1, value_size=5) for _ in range(1500))  # 3,000 chunks
    info = log.append_as_leader(payload, 2)
    assert (info.first_offset, info.last_offset) == (0, 1499)
    headers = stored_batches(log)
    assert [h.base_offset for h in headers] == list(range(1500))
    assert log.segments[0].log_path.stat().st_size == len(payload)
    log.close()


def test_a_cancelled_caller_does_not_cancel_its_write(tmp_path: Path) -> None:
    """The caller of an append written by an I/O thread is cancelled (its connection closed) while
    the thread writes: the append is still committed and reported to ``on_commit``, and the next
    append waits for it instead of writing over the same bytes."""

    async def run() -> None:
        log = Log(tmp_path / "t-0", log_config())
        log.append_as_leader(batch(4))
        pool = GatedExecutor("before")
        committed: list[tuple[int, int]] = []
        first = asyncio.create_task(
            log.append_as_leader_async(
                batch(10, value_size=300),
                executor=pool,
                on_commit=lambda info: committed.append((info.first_offset, info.last_offset)),
            )
        )
        await wait_started(pool)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        second = asyncio.create_task(log.append_as_leader_async(batch(3), executor=pool, executor_min_bytes=0))
        await asyncio.sleep(0.05)
        assert not second.done()  # held behind the write still in progress
        pool.gate.set()
        info = await second
        assert committed == [(4, 13)]
        assert (info.first_offset, info.last_offset, log.log_end_offset) == (14, 16, 17)
        assert [(h.base_offset, h.records_count) for h in stored_batches(log)] == [(0, 4), (4, 10), (14, 3)]
        pool.shutdown()
        log.close()

    asyncio.run(run())
