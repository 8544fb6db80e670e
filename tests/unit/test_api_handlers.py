"""Request handlers on fakes of their services: each test builds the kio request object, calls the
handler's ``handle(ctx)`` and checks the response's fields and per-partition error codes."""

from __future__ import annotations

import dataclasses
import datetime

from kio.schema.join_group.v7 import request as join_v7
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.offset_commit.v8 import request as commit_v8
from kio.schema.offset_fetch.v7 import request as fetch_v7
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.sync_group.v5 import request as sync_v5

from odradek.coordinator.group.manager import OffsetFetchEntry
from odradek.coordinator.group.member import JoinGroupResult, SyncGroupResult
from odradek.errors import ErrorCode, NotLeaderOrFollowerError
from odradek.server.apis import join_group, list_offsets, offset_commit, offset_fetch, produce, sync_group
from odradek.storage import TopicPartition

from .api_fakes import FakeMetadataCache, FakeServices, call


def _produce(acks: int, *topics: tuple[str, list[int]]) -> produce_v9.ProduceRequest:
    return produce_v9.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=tuple(
            produce_v9.TopicProduceData(
                name=name,
                partition_data=tuple(produce_v9.PartitionProduceData(index=p, records=b"batch") for p in parts),
            )
            for name, parts in topics
        ),
    )


def test_produce_appends_each_partition_and_answers_its_error() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 2}))
    services.replica_manager.offsets[TopicPartition("t", 0)] = 41
    services.replica_manager.errors[TopicPartition("t", 1)] = NotLeaderOrFollowerError("not here")
    response = call(produce, services, 9, _produce(1, ("t", [0, 1])))
    (topic,) = response.responses
    assert topic.name == "t"
    ok, refused = topic.partition_responses
    assert (ok.index, ok.error_code, ok.base_offset) == (0, ErrorCode.none, 41)
    assert (refused.index, refused.error_code, refused.base_offset) == (1, ErrorCode.not_leader_or_follower, -1)
    assert services.replica_manager.appended == [(TopicPartition("t", 0), b"batch", 1)]
    assert services.admin.auto_created == []


def test_produce_refuses_internal_topics_and_bad_acks_and_answers_nothing_for_acks_0() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"__consumer_offsets": 1, "t": 1}))
    response = call(produce, services, 9, _produce(1, ("__consumer_offsets", [0])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_topic_exception
    response = call(produce, services, 9, _produce(2, ("t", [0])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks
    assert call(produce, services, 9, _produce(0, ("t", [0]))) is None
    assert [tp for tp, _, _ in services.replica_manager.appended] == [TopicPartition("t", 0)]


def test_produce_to_an_unknown_topic_asks_for_its_auto_creation() -> None:
    services = FakeServices()
    call(produce, services, 9, _produce(1, ("new", [0])))
    assert services.admin.auto_created == ["new"]


def test_list_offsets_answers_offset_and_leader_epoch_or_the_partitions_error() -> None:
    services = FakeServices()
    services.replica_manager.offsets[TopicPartition("t", 0)] = 17
    services.replica_manager.errors[TopicPartition("t", 1)] = NotLeaderOrFollowerError()
    request = list_offsets_v7.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            list_offsets_v7.ListOffsetsTopic(
                name="t",
                partitions=tuple(
                    list_offsets_v7.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                    for p in (0, 1)
                ),
            ),
        ),
    )
    response = call(list_offsets, services, 7, request)
    ok, refused = response.topics[0].partitions
    assert (ok.error_code, ok.offset, ok.leader_epoch) == (ErrorCode.none, 17, 3)
    assert (refused.error_code, refused.offset) == (ErrorCode.not_leader_or_follower, -1)


def _commit(*parts: tuple[str, int]) -> commit_v8.OffsetCommitRequest:
    return commit_v8.OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=4,
        member_id="m-1",
        group_instance_id=None,
        topics=tuple(
            commit_v8.OffsetCommitRequestTopic(
                name=name,
                partitions=(
                    commit_v8.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=100, committed_leader_epoch=2, committed_metadata="x"
                    ),
                ),
            )
            for name, p in parts
        ),
    )


def test_offset_commit_hands_known_partitions_to_the_group_coordinator() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 1}))
    response = call(offset_commit, services, 8, _commit(("t", 0), ("t", 5)))
    errors = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    assert errors == {("t", 0): ErrorCode.none, ("t", 5): ErrorCode.unknown_topic_or_partition}
    ((kind, (group, member, instance, generation, offsets)),) = services.group_coordinator.calls
    assert (kind, group, member, instance, generation) == ("commit", "g", "m-1", None, 4)
    (committed,) = offsets.values()
    assert (committed.offset, committed.metadata, committed.leader_epoch) == (100, "x", 2)


def test_offset_commit_answers_the_coordinators_error_per_partition() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 1}))
    services.group_coordinator.commit_error = ErrorCode.illegal_generation
    response = call(offset_commit, services, 8, _commit(("t", 0)))
    assert response.topics[0].partitions[0].error_code == ErrorCode.illegal_generation


def _join() -> join_v7.JoinGroupRequest:
    return join_v7.JoinGroupRequest(
        group_id="g",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(join_v7.JoinGroupRequestProtocol(name="range", metadata=b"meta"),),
    )


def test_join_group_passes_the_request_to_the_coordinator_and_answers_its_result() -> None:
    services = FakeServices()
    services.group_coordinator.join_result = JoinGroupResult(
        "m-1", generation_id=1, protocol_type="consumer", protocol_name="range", leader_id="m-1",
        members=(("m-1", None, b"meta"),),
    )  # fmt: skip
    response = call(join_group, services, 7, _join())
    assert (response.error_code, response.generation_id, response.member_id) == (ErrorCode.none, 1, "m-1")
    assert (response.protocol_name, response.leader) == ("range", "m-1")
    assert [(m.member_id, m.metadata) for m in response.members] == [("m-1", b"meta")]
    ((_, join),) = services.group_coordinator.calls
    assert (join.session_timeout_ms, join.rebalance_timeout_ms) == (10_000, 30_000)
    assert join.protocols == (("range", b"meta"),) and join.require_known_member_id


def test_join_group_answers_the_coordinators_error() -> None:
    services = FakeServices()
    services.group_coordinator.join_result = JoinGroupResult("", error=ErrorCode.not_coordinator)
    response = call(join_group, services, 7, _join())
    assert (response.error_code, response.generation_id, response.members) == (ErrorCode.not_coordinator, -1, ())


def _sync(protocol_name: str | None) -> sync_v5.SyncGroupRequest:
    return sync_v5.SyncGroupRequest(
        group_id="g",
        generation_id=1,
        member_id="m-1",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name=protocol_name,
        assignments=(sync_v5.SyncGroupRequestAssignment(member_id="m-1", assignment=b"a"),),
    )


def test_sync_group_hands_the_leaders_assignments_to_the_coordinator() -> None:
    services = FakeServices()
    services.group_coordinator.sync_result = SyncGroupResult(ErrorCode.none, b"a", "consumer", "range")
    response = call(sync_group, services, 5, _sync("range"))
    assert (response.error_code, response.assignment, response.protocol_name) == (ErrorCode.none, b"a", "range")
    ((_, args),) = services.group_coordinator.calls
    assert args == ("g", 1, "m-1", "consumer", "range", None, {"m-1": b"a"})


def test_sync_group_v5_without_a_protocol_name_is_inconsistent() -> None:
    services = FakeServices()
    response = call(sync_group, services, 5, _sync(None))
    assert response.error_code == ErrorCode.inconsistent_group_protocol
    assert services.group_coordinator.calls == []


def test_join_group_v0_rebalances_within_the_session_timeout_and_has_no_instance_id() -> None:
    from kio.schema.join_group.v0 import request as join_v0

    services = FakeServices()
    services.group_coordinator.join_result = JoinGroupResult("m-1", generation_id=1, protocol_name="range")
    request = join_v0.JoinGroupRequest(
        group_id="g",
        session_timeout=datetime.timedelta(seconds=10),
        member_id="",
        protocol_type="consumer",
        protocols=(join_v0.JoinGroupRequestProtocol(name="range", metadata=b"meta"),),
    )
    response = call(join_group, services, 0, request)
    assert (response.error_code, response.protocol_name) == (ErrorCode.none, "range")
    ((_, join),) = services.group_coordinator.calls
    assert (join.rebalance_timeout_ms, join.group_instance_id, join.reason) == (10_000, None, None)
    assert not join.require_known_member_id


def test_offset_commit_v8_passes_the_static_members_instance_id() -> None:
    services = FakeServices(metadata_cache=FakeMetadataCache({"t": 1}))
    request = dataclasses.replace(_commit(("t", 0)), group_instance_id="instance-1")
    call(offset_commit, services, 8, request)
    ((_, (_, _, instance, _, _)),) = services.group_coordinator.calls
    assert instance == "instance-1"


def test_offset_fetch_answers_committed_offsets_and_minus_one_without_a_commit() -> None:
    services = FakeServices()
    services.group_coordinator.committed = {TopicPartition("t", 0): OffsetFetchEntry(42, 3, "m")}
    request = fetch_v7.OffsetFetchRequest(
        group_id="g",
        topics=(fetch_v7.OffsetFetchRequestTopic(name="t", partition_indexes=(0, 1)),),
        require_stable=True,
    )
    response = call(offset_fetch, services, 7, request)
    assert response.error_code == ErrorCode.none
    got = {
        p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for p in response.topics[0].partitions
    }
    assert got == {0: (42, 3, "m", ErrorCode.none), 1: (-1, -1, "", ErrorCode.none)}
    assert services.group_coordinator.calls == [
        ("fetch", ("g", True, [TopicPartition("t", 0), TopicPartition("t", 1)]))
    ]


def test_offset_fetch_gives_a_group_error_per_group_from_v8_and_top_level_before() -> None:
    services = FakeServices()
    services.group_coordinator.fetch_error = ErrorCode.coordinator_load_in_progress
    v7 = call(offset_fetch, services, 7, fetch_v7.OffsetFetchRequest(group_id="g", topics=None, require_stable=False))
    assert (v7.error_code, v7.topics) == (ErrorCode.coordinator_load_in_progress, ())
    groups = (
        fetch_v8.OffsetFetchRequestGroup(group_id="a", topics=None),
        fetch_v8.OffsetFetchRequestGroup(group_id="b", topics=None),
    )
    v8 = call(offset_fetch, services, 8, fetch_v8.OffsetFetchRequest(groups=groups, require_stable=False))
    assert [(g.group_id, g.error_code, g.topics) for g in v8.groups] == [
        ("a", ErrorCode.coordinator_load_in_progress, ()),
        ("b", ErrorCode.coordinator_load_in_progress, ()),
    ]
