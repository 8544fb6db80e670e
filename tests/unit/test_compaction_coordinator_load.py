"""A coordinator loads a cleaned partition of its internal topic to the same state as the full
history: the group coordinator (groups, members, offsets with their record offsets, a deleted
group, expired offsets, committed, aborted and still open transactional commits) and the
transaction coordinator (transactional ids, an expired one). The history is written by the
coordinators over the in-memory fakes, copied into real logs with its offsets, cleaned twice
with :func:`~odradek.storage.cleaner.clean_log` (the second clean past ``delete.retention.ms``
removes tombstones, aborted records and markers) and read back through
:class:`~odradek.coordinator.runtime.LocalInternalLog`. Files in a temporary directory, no
sockets, no processes."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

from odradek.coordinator.group.schemas import (
    OffsetAndMetadata,
    partition_for,
)
from odradek.coordinator.runtime import LocalInternalLog
from odradek.coordinator.transaction.metadata import TransactionState
from odradek.errors import ErrorCode
from odradek.protocol.records import Record, build_batch, iter_batches
from odradek.storage import Log, LogConfig
from odradek.storage.cleaner import CleanerConfig, clean_log
from odradek.storage.topic_partition import TopicPartition

from .coordinator_fakes import MemoryOffsetsLog
from .group_fakes import Harness, assignment_for, settle
from .test_group_offsets import _txn_offset_batch
from .test_transaction_coordinator import Harness as TxnHarness

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
DAY_MS = 86_400_000


class CleanedLog(MemoryOffsetsLog):
    """The fakes' internal-topic log, whose partitions are read from real (cleaned) logs."""

    def __init__(self, logs: dict[int, Log]) -> None:
        super().__init__()
        self.local = LocalInternalLog(logs)

    def bounds(self, partition: int) -> tuple[int, int]:
        return self.local.bounds(partition) if partition in self.local.logs else (0, 0)

    def read(self, partition: int, offset: int, max_bytes: int) -> bytes:
        return self.local.read(partition, offset, max_bytes)


def clean_copy(history: MemoryOffsetsLog, directory: Path, topic: str, now_ms: int, lso: dict[int, int]) -> CleanedLog:
    """Copy ``history`` into compacted logs (offsets kept), clean each twice: at ``now_ms``
    (tombstones kept, their delete horizon stamped) and a day later (tombstones, aborted records
    and markers past the horizon removed), never past ``lso`` (a partition's last stable offset)."""
    config = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": "1024"})
    logs: dict[int, Log] = {}
    for partition, batches in history.batches.items():
        log = Log(directory / f"{topic}-{partition}", config, time_ms=lambda: now_ms)
        for batch in batches:
            log.append_as_follower(batch)  # the log writes the .txnindex entries of aborts
        log.roll()
        log.high_watermark = log.log_end_offset
        for at in (now_ms, now_ms + DAY_MS + 1):
            clean_log(log, now_ms=at, config=CleanerConfig(), upper_bound_offset=lso.get(partition))
        logs[partition] = log
    return CleanedLog(logs)


def offsets_read(log: MemoryOffsetsLog, partition: int) -> list[int]:
    start, end = log.bounds(partition)
    out: list[int] = []
    offset = start
    while offset < end:
        data = log.read(partition, offset, 1 << 20)
        headers = [h for _, h in iter_batches(data) if h.last_offset >= offset]
        if not headers:
            break
        out += [h.base_offset for h in headers]
        offset = headers[-1].next_offset
    return out


def group_state(h: Harness) -> dict[str, Any]:
    manager = h.coordinator.manager
    state: dict[str, Any] = {
        gid: (g.state, g.generation_id, g.protocol_type, g.protocol_name, sorted(g.members), dict(g.offsets))
        for gid, g in manager.groups.items()
    }
    state["pending transactional offsets"] = manager.txn_offsets.pending
    return state


def _marker(producer_id: int, commit: bool) -> bytes:
    return build_batch(
        [Record(struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0))],
        producer_id=producer_id,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )


def test_group_coordinator_loads_a_cleaned_partition_to_the_same_state(tmp_path: Path) -> None:
    asyncio.run(_group_coordinator_loads_a_cleaned_partition(tmp_path))


async def _group_coordinator_loads_a_cleaned_partition(tmp_path: Path) -> None:
    h = await Harness(retention_ms=60_000, offsets_partitions=1).start()
    # an Empty consumer group whose offsets expire: offset and group tombstones
    a = await h.join_fully("expired")
    await h.sync("expired", a.generation_id, a.member_id, assignment_for([a.member_id]))
    await h.coordinator.commit_offsets("expired", a.member_id, None, a.generation_id, {T0: OffsetAndMetadata(3)})
    h.coordinator.leave_group("expired", [(a.member_id, None, None)])
    await settle()
    h.clock.advance(61_000)
    assert await h.coordinator.expire_offsets() == 1
    # a Stable group committing over and over; a simple group deleted
    b = await h.join_fully("g")
    await h.sync("g", b.generation_id, b.member_id, assignment_for([b.member_id]))
    for i in range(30):
        await h.coordinator.commit_offsets("g", b.member_id, None, b.generation_id, {T0: OffsetAndMetadata(i, f"m{i}")})
    await h.coordinator.commit_offsets("g", b.member_id, None, b.generation_id, {T1: OffsetAndMetadata(7)})
    await h.coordinator.commit_offsets("simple", "", None, -1, {T1: OffsetAndMetadata(1)})
    assert await h.coordinator.delete_groups(["simple"]) == {"simple": ErrorCode.none}
    # transactional commits: one committed, one aborted, one still open at the end of the log
    for pid, offset in ((7, 40), (8, 50)):
        h.log.append(0, _txn_offset_batch("tx", offset, pid))
    h.log.append(0, _marker(7, commit=True))
    h.log.append(0, _marker(8, commit=False))
    _, lso = h.log.append(0, _txn_offset_batch("tx", 60, 9))
    await h.coordinator.shutdown()
    assert partition_for("g", 1) == 0

    full = await Harness(log=h.log, clock=h.clock, offsets_partitions=1).start()
    cleaned_log = clean_copy(h.log, tmp_path, "__consumer_offsets", h.clock.now, {0: lso})
    cleaned = await Harness(log=cleaned_log, clock=h.clock, offsets_partitions=1).start()

    kept = offsets_read(cleaned_log, 0)
    assert len(kept) < len(offsets_read(h.log, 0)) // 3  # the clean removed most of the history
    assert group_state(cleaned) == group_state(full)
    assert set(full.coordinator.manager.groups) == {"g", "tx"}
    assert full.coordinator.fetch_offsets("tx", False, [T0])[1][T0].offset == 40
    assert full.coordinator.fetch_offsets("g", False, [T0])[1][T0].metadata == "m29"


def test_transaction_coordinator_loads_a_cleaned_partition_to_the_same_state(tmp_path: Path) -> None:
    asyncio.run(_transaction_coordinator_loads_a_cleaned_partition(tmp_path))


async def _transaction_coordinator_loads_a_cleaned_partition(tmp_path: Path) -> None:
    h = await TxnHarness(id_expiration_ms=10_000).start()
    await h.init("tx10")  # expires below: a tombstone
    h.clock.advance(10_001)
    assert await h.coordinator.expire_transactional_ids() == 1
    for txn_id in ("tx1", "tx4", "tx7"):
        for _ in range(3):
            pid, epoch = await h.ongoing(txn_id)
            assert await h.coordinator.end_txn(txn_id, pid, epoch, txn_id != "tx4") == ErrorCode.none
            await settle()
    await h.ongoing("tx2")
    await h.coordinator.shutdown()

    def txn_state(harness: TxnHarness) -> dict[str, tuple[Any, ...]]:
        return {
            t: (m.producer_id, m.producer_epoch, m.state, m.partitions, m.timeout_ms)
            for t, m in harness.coordinator.txns.items()
        }

    full = await TxnHarness(log=h.log).start()
    cleaned = await TxnHarness(log=clean_copy(h.log, tmp_path, "__transaction_state", h.clock.now, {})).start()
    assert txn_state(cleaned) == txn_state(full)
    assert "tx10" not in full.coordinator.txns
    assert full.coordinator.txns["tx4"].state is TransactionState.COMPLETE_ABORT
    assert full.coordinator.txns["tx2"].state is TransactionState.ONGOING
