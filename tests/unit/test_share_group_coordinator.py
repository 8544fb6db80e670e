"""Share groups (KIP-932) through the group coordinator (fakes: manual clock, in-memory
``__consumer_offsets``, a persister in memory): records written and loaded by a new coordinator,
one kind of group per id, ListGroups and DeleteGroups, share-partition state initialized off the
request path and deleted with the group, and the member-removed hook."""

from __future__ import annotations

import uuid

from odradek.coordinator.group.config import GroupCoordinatorConfig
from odradek.coordinator.group.consumer_membership import ConsumerHeartbeat
from odradek.coordinator.group.coordinator import GroupCoordinator, GroupCoordinatorDeps
from odradek.coordinator.group.schemas import OffsetAndMetadata
from odradek.coordinator.group.share_group import ShareTopic
from odradek.coordinator.group.share_membership import ShareGroupConfig, ShareHeartbeat, ShareHeartbeatResult
from odradek.errors import ErrorCode
from odradek.protocol.records import decode_records
from odradek.share.state import SharePartitionKey, ShareStateError, StateBatch
from odradek.storage.topic_partition import TopicPartition

from .coordinator_fakes import ManualClock, MemoryOffsetsLog, run, runtime_deps, settle


class MemoryPersister:
    """Initialize/delete calls recorded; ``fail_with`` makes them raise ShareStateError."""

    def __init__(self) -> None:
        self.initialized: dict[SharePartitionKey, tuple[int, int]] = {}
        self.deleted: list[SharePartitionKey] = []
        self.fail_with: ErrorCode | None = None

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        if self.fail_with is not None:
            raise ShareStateError(self.fail_with)
        self.initialized[key] = (state_epoch, start_offset)

    async def delete_state(self, key: SharePartitionKey) -> None:
        if self.fail_with is not None:
            raise ShareStateError(self.fail_with)
        self.deleted.append(key)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> None:
        return None

    async def write_state(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch]
    ) -> None:
        return None

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> None:
        return None


class Share:
    """A coordinator leading every ``__consumer_offsets`` partition, with share groups."""

    def __init__(
        self, log: MemoryOffsetsLog | None = None, clock: ManualClock | None = None, persister: object = None
    ) -> None:
        self.clock = clock or ManualClock()
        self.log = log or MemoryOffsetsLog()
        self.removed: list[tuple[str, str]] = []
        deps, self.metadata, _ = runtime_deps(self.log, self.clock)
        self.metadata.add_topic("t", 2)
        self.coordinator = GroupCoordinator(
            GroupCoordinatorDeps(
                GroupCoordinatorConfig(initial_rebalance_delay_ms=0, offsets_partitions=3),
                deps,
                topic_ids=self.metadata,
                share=ShareGroupConfig(),
                share_persister=persister,  # type: ignore[arg-type]
                share_member_removed=lambda g, m: self.removed.append((g, m)),
            )
        )
        self.shares = self.coordinator.share_groups

    async def start(self) -> Share:
        await self.coordinator.startup()
        await settle()
        return self

    def topics(self) -> dict[str, ShareTopic]:
        out = {}
        for name, count in self.metadata.partitions.items():
            tid = self.metadata.topic_id(name)
            assert tid is not None
            out[name] = ShareTopic(tid, count)
        return out

    async def beat(self, member: str, epoch: int, group: str = "g", **kw: object) -> ShareHeartbeatResult:
        if epoch == 0:
            kw.setdefault("subscribed_topic_names", ("t",))
        return await self.shares.heartbeat(ShareHeartbeat(group, member, epoch, **kw), self.topics())  # type: ignore[arg-type]

    def share_records(self) -> list[tuple[int, bool]]:
        """(record type, is a tombstone) of every share record written, in order."""
        out = []
        for batches in self.log.batches.values():
            for batch in batches:
                for rec in decode_records(memoryview(batch)):
                    if rec.key is not None and rec.key[0] == 0 and 10 <= rec.key[1] <= 15:
                        out.append((rec.key[1], rec.value is None))
        return out


T_ID = uuid.uuid5(uuid.NAMESPACE_DNS, "t")


@run
async def test_a_new_coordinator_loads_epochs_members_and_assignments() -> None:
    s = await Share().start()
    assert (await s.beat("m1", 0)).assignment == {T_ID: frozenset({0, 1})}
    await s.beat("m2", 0)
    moved = await s.beat("m1", 1)
    assert moved.member_epoch == 2 and moved.assignment is not None and len(moved.assignment[T_ID]) == 1
    await s.beat("gone", 0)
    await s.beat("gone", -1)  # its records get tombstones
    group = s.shares.group("g")
    assert group is not None
    snapshot = {m.member_id: (m.member_epoch, m.previous_member_epoch, m.assigned) for m in group.members.values()}
    epochs = (group.group_epoch, group.assignment_epoch, dict(group.target))
    assert ({t for t, _ in s.share_records()}) == set(range(10, 15))
    await s.coordinator.shutdown()

    s2 = Share(log=s.log, clock=s.clock)
    await s2.start()
    after = s2.shares.group("g")
    assert after is not None and set(after.members) == {"m1", "m2"}
    assert {m.member_id: (m.member_epoch, m.previous_member_epoch, m.assigned) for m in after.members.values()} == (
        snapshot
    )
    assert (after.group_epoch, after.assignment_epoch, dict(after.target)) == epochs
    assert after.members["m1"].client_host == group.members["m1"].client_host
    resumed = await s2.beat("m1", 2)  # no rejoin: it carries on to the latest assignment epoch
    assert resumed.error is ErrorCode.none and resumed.member_epoch == after.assignment_epoch == 4
    assert s2.shares.member_assignment("g", "m1") == after.members["m1"].assigned
    assert s2.shares.member_assignment("g", "ghost") is None


@run
async def test_a_group_id_is_one_kind_at_a_time() -> None:
    s = await Share().start()
    await s.beat("m1", 0, group="sg")
    await s.coordinator.consumer_group_heartbeat(
        ConsumerHeartbeat("cg", "c1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={}),
        {"t": 2},
    )
    refused = await s.beat("m1", 0, group="cg")
    assert refused.error is ErrorCode.group_id_not_found and "not a share group" in (refused.message or "")
    not_consumer = await s.coordinator.consumer_group_heartbeat(
        ConsumerHeartbeat("sg", "c1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), owned={}),
        {"t": 2},
    )
    assert not_consumer.error is ErrorCode.group_id_not_found
    tp = TopicPartition("t", 0)
    assert await s.coordinator.commit_offsets("sg", "", None, -1, {tp: OffsetAndMetadata(1)}) == {
        tp: ErrorCode.group_id_not_found
    }
    assert await s.coordinator.txn_commit_offsets("sg", 1, 0, {tp: OffsetAndMetadata(1)}) == {
        tp: ErrorCode.group_id_not_found
    }
    assert (await s.coordinator.delete_offsets("sg", [tp]))[0] is ErrorCode.group_id_not_found
    assert s.coordinator.describe_group("sg", 6)[0] is ErrorCode.group_id_not_found
    assert s.coordinator.describe_group("sg", 5)[0:2] == (ErrorCode.none, None)  # Dead, as Kafka before v6
    assert s.shares.describe("cg")[0:2] == (ErrorCode.group_id_not_found, "Group cg is not a share group.")
    assert s.shares.describe("nope")[0:2] == (ErrorCode.group_id_not_found, "Group nope not found.")


@run
async def test_a_classic_join_to_a_share_group_is_an_inconsistent_protocol() -> None:
    from .group_fakes import Harness

    h = Harness()
    h.coordinator.share_groups.membership.heartbeat(
        ShareHeartbeat("sg", "m1", 0, subscribed_topic_names=("t",)), {"t": ShareTopic(T_ID, 2)}
    )
    await h.start()
    joined = await h.join("sg")
    assert joined.error is ErrorCode.inconsistent_group_protocol


@run
async def test_list_shows_share_groups_and_delete_refuses_them_while_they_have_members() -> None:
    s = await Share().start()
    await s.beat("m1", 0, group="a")
    await s.beat("m1", 0, group="b")
    await s.beat("m1", -1, group="b")
    _, listed = s.coordinator.list_groups()
    assert {(g.group_id, g.group_type, g.protocol_type, g.state) for g in listed} == {
        ("a", "share", "share", "Stable"),
        ("b", "share", "share", "Empty"),
    }
    assert [g.group_id for g in s.coordinator.list_groups(states=["EMPTY"], types=["Share"])[1]] == ["b"]
    assert s.coordinator.list_groups(types=["consumer"])[1] == []
    assert await s.coordinator.delete_groups(["a", "b"]) == {"a": ErrorCode.non_empty_group, "b": ErrorCode.none}
    assert s.shares.group("b") is None and s.share_records()[-1][1]  # tombstones written
    await s.coordinator.shutdown()
    s2 = await Share(log=s.log, clock=s.clock).start()
    assert s2.shares.group("b") is None and s2.shares.group("a") is not None


@run
async def test_share_state_is_initialized_off_the_request_path_then_assigned() -> None:
    persister = MemoryPersister()
    s = await Share(persister=persister).start()
    joined = await s.beat("m1", 0)
    assert joined.member_epoch == 1 and joined.assignment == {}  # nothing initialized yet
    await settle()
    assert persister.initialized == {SharePartitionKey("g", T_ID, p): (1, -1) for p in (0, 1)}
    group = s.shares.group("g")
    assert group is not None and set(group.initialized[T_ID].partitions) == {0, 1} and not group.initializing
    assigned = await s.beat("m1", 1)
    assert assigned.member_epoch == 2 and assigned.assignment == {T_ID: frozenset({0, 1})}
    s.metadata.add_topic("t", 3)  # a new partition: initialized, then assigned
    grown = await s.beat("m1", 2)
    assert grown.member_epoch == 3 and grown.assignment is None
    await settle()
    assert (await s.beat("m1", 3)).assignment == {T_ID: frozenset({0, 1, 2})}
    await s.coordinator.shutdown()
    s2 = await Share(log=s.log, clock=s.clock, persister=persister).start()
    loaded = s2.shares.group("g")
    assert loaded is not None and loaded.initialized[T_ID].partitions == frozenset({0, 1, 2})


@run
async def test_a_failed_initialization_is_retried_and_deletion_needs_the_state_gone() -> None:
    persister = MemoryPersister()
    persister.fail_with = ErrorCode.coordinator_not_available
    s = await Share(persister=persister).start()
    await s.beat("m1", 0)
    await settle()
    group = s.shares.group("g")
    assert group is not None and not group.initializing and not group.initialized
    persister.fail_with = None
    await s.beat("m1", 1)  # tries again
    await settle()
    assert group.initialized[T_ID].partitions == frozenset({0, 1})
    await s.beat("m1", 1, subscribed_topic_names=("t",))
    await s.beat("m1", -1)
    persister.fail_with = ErrorCode.coordinator_load_in_progress
    assert await s.coordinator.delete_groups(["g"]) == {"g": ErrorCode.coordinator_load_in_progress}
    assert s.shares.group("g") is not None and set(group.deleting) == {T_ID}
    persister.fail_with = None
    assert await s.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert sorted(k.partition for k in persister.deleted) == [0, 1]
    assert s.shares.group("g") is None


@run
async def test_leaves_and_expiries_are_told_to_the_hook_and_written() -> None:
    s = await Share().start()
    await s.beat("m1", 0)
    await s.beat("m2", 0)
    await s.beat("m1", -1)
    assert s.removed == [("g", "m1")]
    s.clock.advance(ShareGroupConfig().session_timeout_ms)
    await settle()
    assert s.removed == [("g", "m1"), ("g", "m2")]
    group = s.shares.group("g")
    assert group is not None and group.state == "Empty"
    await s.coordinator.shutdown()
    s2 = await Share(log=s.log, clock=s.clock).start()
    reloaded = s2.shares.group("g")
    assert reloaded is not None and not reloaded.members and reloaded.group_epoch == group.group_epoch


@run
async def test_heartbeats_wait_for_the_coordinator() -> None:
    log = MemoryOffsetsLog()
    log.epochs.update(dict.fromkeys(range(3)))  # leads nothing
    s = await Share(log=log).start()
    assert (await s.beat("m1", 0)).error is ErrorCode.not_coordinator
    assert (await s.beat("", 0)).error is ErrorCode.invalid_request  # the request is checked first
    log.epochs.clear()
    assert (await s.beat("m1", 0)).error is ErrorCode.coordinator_load_in_progress
    await settle()
    log.fail_with = ErrorCode.not_leader_or_follower
    assert (await s.beat("m1", 0)).error is ErrorCode.not_coordinator  # the write failed
