"""The group APIs at every version we advertise, and bad input, spoken raw (odradek's client)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.client.connection import KafkaConnection, RequestBuilder
from odradek.coordinator.group.schemas import encode_subscription
from odradek.errors import ErrorCode
from odradek.protocol import legacy_messages as legacy
from odradek.server.apis import API_HANDLERS
from odradek.testing import BrokerRunner

from .group_support import create_topic

FIND, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE = 10, 11, 12, 13, 14, 15, 16, 42
COMMIT, FETCH, OFFSET_DELETE = 8, 9, 47
SUB = encode_subscription(["proto"])
E = ErrorCode


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def run(broker: BrokerRunner, scenario: Callable[[KafkaConnection], Awaitable[None]]) -> None:
    host, port = broker.bootstrap_servers.split(":")

    async def main() -> None:
        conn = await KafkaConnection(host, int(port), client_id="proto-test").connect()
        try:
            await scenario(conn)
        finally:
            await conn.close()

    asyncio.run(main())


def clip(api: int, version: int) -> int:
    module = API_HANDLERS[api]
    return max(module.MIN_VERSION, min(version, module.MAX_VERSION))


async def find(conn: KafkaConnection, v: int, key: str) -> Any:
    rb = RequestBuilder(FIND, v)
    return await conn.send(rb(key=key, key_type=0, coordinator_keys=(key,)))


async def join(
    conn: KafkaConnection, v: int, group: str, member_id: str = "", instance: str | None = None, session: int = 6000
) -> Any:
    rb = RequestBuilder(JOIN, v)
    return await conn.send(
        rb(
            group_id=group,
            session_timeout=ms(session),
            rebalance_timeout=ms(10000),
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            reason="test",
            protocols=(rb.make("JoinGroupRequestProtocol", name="range", metadata=SUB),),
        )
    )


async def join_fully(conn: KafkaConnection, v: int, group: str, instance: str | None = None) -> Any:
    res = await join(conn, v, group, instance=instance)
    if res.error_code == E.member_id_required:
        res = await join(conn, v, group, res.member_id, instance)
    assert res.error_code == E.none, res
    return res


async def sync(
    conn: KafkaConnection,
    v: int,
    group: str,
    generation: int,
    member_id: str,
    assignment: bytes = b"",
    instance: str | None = None,
) -> Any:
    rb = RequestBuilder(SYNC, v)
    return await conn.send(
        rb(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(rb.make("SyncGroupRequestAssignment", member_id=member_id, assignment=assignment),),
        )
    )


async def commit(
    conn: KafkaConnection,
    v: int,
    group: str,
    generation: int,
    member_id: str,
    offset: int,
    topic: str = "proto",
    metadata: str = "md",
    instance: str | None = None,
) -> E:
    if v == 1:
        req: Any = legacy.OffsetCommitRequestV1(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            topics=(
                legacy.OffsetCommitRequestTopicV1(
                    name=topic,
                    partitions=(
                        legacy.OffsetCommitRequestPartitionV1(
                            partition_index=0, committed_offset=offset, commit_timestamp=-1, committed_metadata=metadata
                        ),
                    ),
                ),
            ),
        )
    else:
        rb = RequestBuilder(COMMIT, v)
        req = rb(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=instance,
            topics=(
                rb.make(
                    "OffsetCommitRequestTopic",
                    name=topic,
                    partitions=(
                        rb.make(
                            "OffsetCommitRequestPartition",
                            partition_index=0,
                            committed_offset=offset,
                            committed_leader_epoch=-1,
                            committed_metadata=metadata,
                        ),
                    ),
                ),
            ),
        )
    res = await conn.send(req)
    return E(res.topics[0].partitions[0].error_code)


async def fetch(conn: KafkaConnection, v: int, group: str, topic: str = "proto") -> tuple[int, str]:
    rb = RequestBuilder(FETCH, v)
    if v >= 8:
        res = await conn.send(
            rb(
                groups=(
                    rb.make(
                        "OffsetFetchRequestGroup",
                        group_id=group,
                        topics=(rb.make("OffsetFetchRequestTopics", name=topic, partition_indexes=(0,)),),
                    ),
                ),
                require_stable=True,
            )
        )
        part = res.groups[0].topics[0].partitions[0]
    else:
        res = await conn.send(
            rb(
                group_id=group,
                require_stable=True,
                topics=(rb.make("OffsetFetchRequestTopic", name=topic, partition_indexes=(0,)),),
            )
        )
        part = res.topics[0].partitions[0]
    assert part.error_code == E.none, part
    return int(part.committed_offset), part.metadata


def offset_delete(group: str, topic: str) -> Any:
    od = RequestBuilder(OFFSET_DELETE, 0)
    partitions = (od.make("OffsetDeleteRequestPartition", partition_index=0),)
    return od(group_id=group, topics=(od.make("OffsetDeleteRequestTopic", name=topic, partitions=partitions),))


def test_every_version_of_every_group_api(odradek_broker: BrokerRunner) -> None:
    create_topic(odradek_broker.bootstrap_servers, "proto", 1)

    async def scenario(conn: KafkaConnection) -> None:
        for key in (FIND, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE, COMMIT, FETCH, OFFSET_DELETE):
            assert conn.api_versions[key] == (API_HANDLERS[key].MIN_VERSION, API_HANDLERS[key].MAX_VERSION)
        for i in range(10):
            group = f"sweep-{i}"
            res = await find(conn, clip(FIND, i), group)
            coordinator = res.coordinators[0] if clip(FIND, i) >= 4 else res
            assert coordinator.error_code == E.none and coordinator.node_id == 0
            joined = await join_fully(conn, clip(JOIN, i), group)
            gen, member = joined.generation_id, joined.member_id
            assert joined.leader == member
            synced = await sync(conn, clip(SYNC, i), group, gen, member, b"asg")
            assert synced.error_code == E.none and synced.assignment == b"asg"
            hb = RequestBuilder(HEARTBEAT, clip(HEARTBEAT, i))
            res = await conn.send(hb(group_id=group, generation_id=gen, member_id=member))
            assert res.error_code == E.none
            cv, fv = max(1, clip(COMMIT, i)), max(1, clip(FETCH, i))
            assert await commit(conn, cv, group, gen, member, 10 + i, metadata=f"v{cv}") == E.none
            assert await fetch(conn, fv, group) == (10 + i, f"v{cv}")
            d = RequestBuilder(DESCRIBE, clip(DESCRIBE, i))
            desc = (await conn.send(d(groups=(group,), include_authorized_operations=True))).groups[0]
            assert (desc.error_code, desc.group_state, desc.protocol_data) == (E.none, "Stable", "range")
            assert desc.members[0].member_id == member and desc.members[0].member_assignment == b"asg"
            lg = RequestBuilder(LIST, clip(LIST, i))
            listed = await conn.send(lg(states_filter=("Stable",) if clip(LIST, i) >= 4 else ()))
            assert group in [g.group_id for g in listed.groups]
            lv = RequestBuilder(LEAVE, clip(LEAVE, i))
            if clip(LEAVE, i) >= 3:
                leave = lv(group_id=group, members=(lv.make("MemberIdentity", member_id=member),))
            else:
                leave = lv(group_id=group, member_id=member)
            res = await conn.send(leave)
            assert res.error_code == E.none
            dg = RequestBuilder(DELETE, clip(DELETE, i))
            res = await conn.send(dg(groups_names=(group,)))
            assert res.results[0].error_code == E.none
            res = await conn.send(offset_delete(group, "proto"))
            assert res.error_code == E.group_id_not_found

    run(odradek_broker, scenario)


def test_stale_and_unknown_commits_are_rejected_and_change_nothing(odradek_broker: BrokerRunner) -> None:
    create_topic(odradek_broker.bootstrap_servers, "proto", 1)
    create_topic(odradek_broker.bootstrap_servers, "other", 1)

    async def scenario(conn: KafkaConnection) -> None:
        await find(conn, 3, "guarded")
        a = await join_fully(conn, 5, "guarded")
        await sync(conn, 5, "guarded", a.generation_id, a.member_id)
        assert await commit(conn, 8, "guarded", a.generation_id, a.member_id, 42) == E.none
        bad = [
            (a.generation_id, "intruder", None, E.unknown_member_id),
            (a.generation_id - 1, a.member_id, None, E.illegal_generation),
            (a.generation_id + 5, a.member_id, None, E.illegal_generation),
            (-1, "", None, E.unknown_member_id),
            (a.generation_id, a.member_id, "no-such-instance", E.unknown_member_id),
        ]
        for generation, member, instance, expected in bad:
            assert await commit(conn, 8, "guarded", generation, member, 7, instance=instance) == expected
        assert (
            await commit(conn, 8, "guarded", a.generation_id, a.member_id, 1, metadata="x" * 5000)
            == E.offset_metadata_too_large
        )
        assert await commit(conn, 8, "guarded", a.generation_id, a.member_id, 1, "no-such-topic") == (
            E.unknown_topic_or_partition
        )
        assert await fetch(conn, 7, "guarded") == (42, "md")
        res = await conn.send(offset_delete("guarded", "proto"))
        assert res.error_code == E.none and res.topics[0].partitions[0].error_code == E.group_subscribed_to_topic
        assert await commit(conn, 8, "guarded", a.generation_id, a.member_id, 5, topic="other") == E.none
        res = await conn.send(offset_delete("guarded", "other"))
        assert res.error_code == E.none and res.topics[0].partitions[0].error_code == E.none
        res = await conn.send(offset_delete("guarded", "no-such-topic"))
        assert res.topics[0].partitions[0].error_code == E.unknown_topic_or_partition
        hb = RequestBuilder(HEARTBEAT, 4)
        res = await conn.send(hb(group_id="guarded", generation_id=a.generation_id + 1, member_id=a.member_id))
        assert res.error_code == E.illegal_generation
        res = await conn.send(hb(group_id="guarded", generation_id=a.generation_id, member_id="ghost"))
        assert res.error_code == E.unknown_member_id
        assert (await sync(conn, 5, "guarded", a.generation_id + 1, a.member_id)).error_code == E.illegal_generation
        res = await join(conn, 5, "guarded", session=10)
        assert res.error_code == E.invalid_session_timeout
        res = await join(conn, 5, "", session=6000)
        assert res.error_code == E.invalid_group_id

    run(odradek_broker, scenario)


def test_group_max_size_rejects_the_extra_member(odradek_broker_factory: Any) -> None:
    broker = odradek_broker_factory(overrides={"group.max.size": "2"})
    create_topic(broker.bootstrap_servers, "proto", 1)
    host, port = broker.bootstrap_servers.split(":")

    async def scenario(_conn: KafkaConnection) -> None:
        conns = [await KafkaConnection(host, int(port)).connect() for _ in range(3)]
        try:
            await find(conns[0], 3, "capped")
            a = await join_fully(conns[0], 5, "capped")
            await sync(conns[0], 5, "capped", a.generation_id, a.member_id)
            b_first = await join(conns[1], 5, "capped")
            b_task = asyncio.ensure_future(join(conns[1], 5, "capped", b_first.member_id))
            await asyncio.sleep(0.2)
            a2 = await join(conns[0], 5, "capped", a.member_id)
            b2 = await b_task
            assert a2.error_code == b2.error_code == E.none and a2.generation_id == b2.generation_id
            c = await join(conns[2], 5, "capped")
            assert c.error_code == E.group_max_size_reached
            c_old = await join(conns[2], 3, "capped")  # without KIP-394 too
            assert c_old.error_code == E.group_max_size_reached
        finally:
            for conn in conns:
                await conn.close()

    run(broker, scenario)


def test_static_member_fencing(odradek_broker: BrokerRunner) -> None:
    create_topic(odradek_broker.bootstrap_servers, "proto", 1)

    async def scenario(conn: KafkaConnection) -> None:
        await find(conn, 3, "fenced")
        first = await join_fully(conn, 5, "fenced", instance="inst")
        await sync(conn, 5, "fenced", first.generation_id, first.member_id, b"mine", instance="inst")
        second = await join(conn, 5, "fenced", instance="inst")
        assert second.error_code == E.none and second.member_id != first.member_id
        assert second.generation_id == first.generation_id
        hb = RequestBuilder(HEARTBEAT, 4)
        res = await conn.send(
            hb(
                group_id="fenced",
                generation_id=first.generation_id,
                member_id=first.member_id,
                group_instance_id="inst",
            )
        )
        assert res.error_code == E.fenced_instance_id
        assert await commit(conn, 8, "fenced", first.generation_id, first.member_id, 3, instance="inst") == (
            E.fenced_instance_id
        )
        synced = await sync(conn, 5, "fenced", second.generation_id, second.member_id, instance="inst")
        assert synced.error_code == E.none and synced.assignment == b"mine"
        lv = RequestBuilder(LEAVE, 4)
        res = await conn.send(
            lv(group_id="fenced", members=(lv.make("MemberIdentity", member_id="", group_instance_id="inst"),))
        )
        assert res.error_code == E.none and res.members[0].error_code == E.none

    run(odradek_broker, scenario)
