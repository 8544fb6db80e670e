"""Offsets: commit validation, durability, the __consumer_offsets records, load, expiry, deletion."""

from __future__ import annotations

import asyncio
import struct

from odradek.coordinator.group.schemas import (
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_key,
    decode_offset_commit_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from odradek.coordinator.group.state import GroupState
from odradek.errors import ErrorCode
from odradek.protocol.records import Record, build_batch, iter_all_records
from odradek.storage.topic_partition import TopicPartition

from .group_fakes import Harness, MemoryOffsetsLog, assignment_for, run, settle

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def _records(log: MemoryOffsetsLog) -> list[tuple[object, bytes | None]]:
    out = []
    for batches in log.batches.values():
        for rec in iter_all_records(b"".join(batches)):
            assert rec.key is not None
            out.append((decode_key(rec.key), rec.value))
    return out


async def _stable_member(h: Harness, group: str = "g") -> str:
    a = await h.join_fully(group)
    await h.sync(group, a.generation_id, a.member_id, assignment_for([a.member_id]))
    return a.member_id


@run
async def test_member_commit_is_stored_and_fetched() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    res = await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(5, "m\u00e9ta", 1, 3)})
    assert res == {T0: ErrorCode.none}
    error, offsets = h.coordinator.fetch_offsets("g", False, [T0, T1])
    assert error == ErrorCode.none
    assert (offsets[T0].offset, offsets[T0].metadata, offsets[T0].leader_epoch) == (5, "m\u00e9ta", 3)
    assert offsets[T1].offset == -1 and offsets[T1].error == ErrorCode.none
    _, everything = h.coordinator.fetch_offsets("g", False, None)
    assert list(everything) == [T0]
    keys = [k for k, _ in _records(h.log)]
    assert OffsetCommitKey("g", "t", 0) in keys
    assert list(h.log.batches) == [partition_for("g", 3)]


@run
async def test_rejected_commits_write_nothing() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    before = _records(h.log)
    c = h.coordinator
    value = {T0: OffsetAndMetadata(9)}
    assert await c.commit_offsets("g", "stranger", None, 1, value) == {T0: ErrorCode.unknown_member_id}
    assert await c.commit_offsets("g", member, None, 0, value) == {T0: ErrorCode.illegal_generation}
    assert await c.commit_offsets("g", "", None, -1, value) == {T0: ErrorCode.unknown_member_id}
    assert await c.commit_offsets("g", member, "inst", 1, value) == {T0: ErrorCode.unknown_member_id}
    assert await c.commit_offsets("nogroup", "m", None, 3, value) == {T0: ErrorCode.illegal_generation}
    big = {T0: OffsetAndMetadata(9, "x" * 5000)}
    assert await c.commit_offsets("g", member, None, 1, big) == {T0: ErrorCode.offset_metadata_too_large}
    assert _records(h.log) == before
    assert c.fetch_offsets("g", False, [T0])[1][T0].offset == -1


@run
async def test_commit_during_completing_rebalance_is_refused() -> None:
    h = await Harness().start()
    a = await h.join_fully("g")
    group = h.coordinator.group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    res = await h.coordinator.commit_offsets("g", a.member_id, None, 1, {T0: OffsetAndMetadata(1)})
    assert res == {T0: ErrorCode.rebalance_in_progress}


@run
async def test_simple_commit_creates_empty_group() -> None:
    h = await Harness().start()
    res = await h.coordinator.commit_offsets("simple", "", None, -1, {T0: OffsetAndMetadata(3)})
    assert res == {T0: ErrorCode.none}
    group = h.coordinator.group("simple")
    assert group is not None and group.state is GroupState.EMPTY and group.protocol_type is None


@run
async def test_failed_write_maps_errors_and_keeps_old_offset() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(1)})
    h.log.fail_with = ErrorCode.not_enough_replicas
    res = await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(2)})
    assert res == {T0: ErrorCode.coordinator_not_available}
    h.log.fail_with = ErrorCode.not_leader_or_follower
    res = await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(2)})
    assert res == {T0: ErrorCode.not_coordinator}
    assert h.coordinator.fetch_offsets("g", False, [T0])[1][T0].offset == 1


@run
async def test_commit_is_visible_only_once_durable() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    h.log.hold = asyncio.Event()
    task = asyncio.get_running_loop().create_task(
        h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(7)})
    )
    await settle()
    assert not task.done()
    assert h.coordinator.fetch_offsets("g", False, [T0])[1][T0].offset == -1
    assert h.coordinator.fetch_offsets("g", True, [T0])[1][T0].error == ErrorCode.unstable_offset_commit
    h.log.hold.set()
    assert await task == {T0: ErrorCode.none}
    assert h.coordinator.fetch_offsets("g", True, [T0])[1][T0].offset == 7


@run
async def test_restart_loads_groups_and_offsets() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(11, "keep me", 5)})
    await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(12, "newer", 5)})
    await h.coordinator.commit_offsets("s", "", None, -1, {T1: OffsetAndMetadata(4)})
    await h.coordinator.shutdown()

    h2 = await Harness(log=h.log, clock=h.clock).start()
    group = h2.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE and group.generation_id == 1
    assert list(group.members) == [member] and group.protocol_name == "range"
    assert h2.coordinator.fetch_offsets("g", False, [T0])[1][T0].metadata == "newer"
    assert h2.coordinator.fetch_offsets("s", False, [T1])[1][T1].offset == 4
    # the loaded member carries on without a rebalance, until its session expires
    assert h2.coordinator.heartbeat("g", member, None, 1) == ErrorCode.none
    h2.clock.advance(10001)
    assert group.state is GroupState.PREPARING_REBALANCE or group.state is GroupState.EMPTY


@run
async def test_transactional_offsets_count_only_after_commit_marker() -> None:
    log = MemoryOffsetsLog()
    partition = partition_for("tx", 3)

    def offset_record(offset: int) -> Record:
        return Record(encode_offset_commit_key("tx", "t", 0), encode_offset_commit_value(OffsetAndMetadata(offset)))

    def marker(commit: bool) -> bytes:
        key = struct.pack(">hh", 0, 1 if commit else 0)
        return build_batch(
            [Record(key, struct.pack(">hi", 0, 0))],
            producer_id=7,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
        )

    log.append(partition, build_batch([offset_record(10)], producer_id=7, producer_epoch=0, is_transactional=True))
    log.append(partition, marker(commit=True))
    log.append(partition, build_batch([offset_record(20)], producer_id=7, producer_epoch=0, is_transactional=True))
    log.append(partition, marker(commit=False))
    h = await Harness(log=log).start()
    assert h.coordinator.fetch_offsets("tx", False, [T0])[1][T0].offset == 10


@run
async def test_unreadable_records_are_skipped_on_load() -> None:
    log = MemoryOffsetsLog()
    partition = partition_for("g", 3)
    log.append(partition, build_batch([Record(b"\x00\x09junk", b"x"), Record(None, b"y")]))
    good = Record(encode_offset_commit_key("g", "t", 0), encode_offset_commit_value(OffsetAndMetadata(3)))
    log.append(partition, build_batch([Record(encode_offset_commit_key("g", "t", 1), b"\x00\x03\x00"), good]))
    h = await Harness(log=log).start()
    _, offsets = h.coordinator.fetch_offsets("g", False, None)
    assert {tp: e.offset for tp, e in offsets.items()} == {T0: 3}


@run
async def test_delete_groups_writes_tombstones() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(1)})
    assert await h.coordinator.delete_groups(["g", "missing"]) == {
        "g": ErrorCode.non_empty_group,
        "missing": ErrorCode.group_id_not_found,
    }
    h.coordinator.leave_group("g", [(member, None, None)])
    await settle()
    assert await h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert h.coordinator.group("g") is None
    tombstones = [k for k, v in _records(h.log) if v is None]
    assert OffsetCommitKey("g", "t", 0) in tombstones and len(tombstones) == 2
    h2 = await Harness(log=h.log).start()
    assert h2.coordinator.group("g") is None


@run
async def test_offsets_of_empty_group_expire() -> None:
    h = await Harness(retention_ms=60000).start()
    member = await _stable_member(h)
    await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(1)})
    assert await h.coordinator.expire_offsets() == 0  # stable and subscribed to t: kept
    h.coordinator.leave_group("g", [(member, None, None)])
    await settle()
    h.clock.advance(59000)
    assert await h.coordinator.expire_offsets() == 0
    h.clock.advance(2000)
    assert await h.coordinator.expire_offsets() == 1
    assert h.coordinator.group("g") is None
    h2 = await Harness(log=h.log).start()
    assert h2.coordinator.group("g") is None


@run
async def test_explicit_retention_time_expires_at_its_own_time() -> None:
    h = await Harness(retention_ms=10**9).start()
    now = h.clock.now
    await h.coordinator.commit_offsets("s", "", None, -1, {T0: OffsetAndMetadata(1, "", now, -1, now + 5000)})
    h.clock.advance(6000)
    assert await h.coordinator.expire_offsets() == 1
    value = next(v for _, v in _records(h.log) if v is not None)
    assert decode_offset_commit_value(value).expire_timestamp_ms == now + 5000


@run
async def test_delete_offsets() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    other = TopicPartition("other", 0)
    await h.coordinator.commit_offsets("g", member, None, 1, {T0: OffsetAndMetadata(1), other: OffsetAndMetadata(2)})
    error, res = await h.coordinator.delete_offsets("g", [T0, other])
    assert error == ErrorCode.none
    assert res == {T0: ErrorCode.group_subscribed_to_topic, other: ErrorCode.none}
    assert await h.coordinator.delete_offsets("nope", [T0]) == (ErrorCode.group_id_not_found, {})


@run
async def test_describe_and_list() -> None:
    h = await Harness().start()
    member = await _stable_member(h)
    await h.coordinator.commit_offsets("s", "", None, -1, {T0: OffsetAndMetadata(1)})
    error, _, summary = h.coordinator.describe_group("g", 5)
    assert error == ErrorCode.none and summary.state == "Stable" and summary.protocol == "range"
    (m,) = summary.members
    assert m.member_id == member and m.client_host == "/127.0.0.1" and m.assignment
    assert h.coordinator.describe_group("zzz", 5)[2].state == "Dead"
    assert h.coordinator.describe_group("zzz", 6)[0] == ErrorCode.group_id_not_found
    error, groups = h.coordinator.list_groups()
    assert error == ErrorCode.none and sorted(g.group_id for g in groups) == ["g", "s"]
    assert [g.group_id for g in h.coordinator.list_groups(["stable"])[1]] == ["g"]
    assert [g.group_id for g in h.coordinator.list_groups(["Empty"])[1]] == ["s"]
    assert h.coordinator.list_groups([], ["consumer"])[1] == []


def _txn_offset_batch(group: str, offset: int, producer_id: int = 7) -> bytes:
    record = Record(encode_offset_commit_key(group, "t", 0), encode_offset_commit_value(OffsetAndMetadata(offset)))
    return build_batch([record], producer_id=producer_id, producer_epoch=0, is_transactional=True)


async def _loaded_with_an_open_transaction() -> tuple[Harness, int]:
    """A coordinator that loaded a partition ending with producer 7's transactional commit of
    offset 30 for group ``tx`` (no marker yet); and that partition."""
    log = MemoryOffsetsLog()
    partition = partition_for("tx", 3)
    log.append(partition, _txn_offset_batch("tx", 30))
    return await Harness(log=log).start(), partition


@run
async def test_open_transaction_offsets_stay_pending_after_load() -> None:
    h, partition = await _loaded_with_an_open_transaction()
    group = h.coordinator.group("tx")
    assert group is not None and group.state is GroupState.EMPTY
    assert h.coordinator.fetch_offsets("tx", False, [T0])[1][T0].offset == -1
    assert h.coordinator.fetch_offsets("tx", True, [T0])[1][T0].error == ErrorCode.unstable_offset_commit
    # an Empty group whose only offsets are pending does not go Dead on expiry
    h.clock.advance(10**9)
    await h.coordinator.expire_offsets()
    assert h.coordinator.group("tx") is group
    await h.coordinator.handle_txn_completion(7, {partition}, commit=True)
    assert h.coordinator.fetch_offsets("tx", True, [T0])[1][T0].offset == 30


@run
async def test_aborted_open_transaction_after_load_leaves_no_offset() -> None:
    h, partition = await _loaded_with_an_open_transaction()
    await h.coordinator.handle_txn_completion(7, {partition}, commit=False)
    assert h.coordinator.fetch_offsets("tx", True, [T0])[1][T0].offset == -1
