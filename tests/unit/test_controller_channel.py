"""The controller's channel encodes a request when it is queued, from an immutable snapshot.

A sender task blocked on its first request (a fake connection that holds ``send`` until released)
stands in for a slow broker: whatever the controller changes after queuing must not reach what
is sent. No sockets: ``RequestSendTask._connect`` returns the fake.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.controller.channel import MAX_VERSIONS, ControllerChannelManager, RequestSendTask
from odradek.controller.messages import leader_and_isr
from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.metadata.znodes import BrokerInfo
from odradek.protocol.api_keys import ApiKey
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

TP = TopicPartition("t", 0)
BROKER = BrokerInfo(1, "h1", 9091, endpoints=["PLAINTEXT://h1:9091"])


class BlockingConnection:
    """A connection whose ``send`` records the message and waits for :attr:`release`."""

    closed = False

    def __init__(self, max_version: int | None = None) -> None:
        self.sent: list[Any] = []
        self.release = asyncio.Event()
        self.max_version = max_version

    def version_for(self, api_key: int, min_version: int = 0, max_version: int | None = None) -> int:
        assert max_version is not None
        return max_version if self.max_version is None else min(self.max_version, max_version)

    async def send(self, message: Any, timeout_ms: int | None = None) -> Any:
        self.sent.append(message)
        await self.release.wait()
        return None

    async def close(self) -> None:
        self.closed = True


def _leader_epochs(message: Any) -> list[int]:
    return [int(p.leader_epoch) for t in message.topic_states for p in t.partition_states]


async def _channel(monkeypatch: pytest.MonkeyPatch, connection: BlockingConnection) -> ControllerChannelManager:
    async def connect(self: RequestSendTask) -> Any:
        return connection

    monkeypatch.setattr(RequestSendTask, "_connect", connect)
    channel = ControllerChannelManager(0)
    channel.add_broker(BROKER)
    return channel


def test_a_queued_leader_and_isr_carries_the_state_of_when_it_was_queued(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> list[int]:
        connection = BlockingConnection()
        channel = await _channel(monkeypatch, connection)
        state = PartitionState(1, 3, [1], [1, 2], 1, 7)
        assert await channel.send_leader_and_isr(1, LeaderAndIsrRequest(0, 1, {TP: state}, {}))
        assert await channel.send_leader_and_isr(1, LeaderAndIsrRequest(0, 1, {TP: state}, {}))
        await asyncio.sleep(0.01)  # the first one is being sent, the second waits in the queue
        # the state changes after it was queued (frozen now, so forced: the channel must not depend on it)
        for name, value in (("leader_epoch", 9), ("leader", 2)):
            object.__setattr__(state, name, value)
        state.isr[:] = [2]
        connection.release.set()
        assert await channel.wait_sent(5)
        channel.shutdown()
        return [epoch for message in connection.sent for epoch in _leader_epochs(message)]

    assert asyncio.run(main()) == [3, 3]


def test_requests_are_snapshots_of_what_they_were_built_from() -> None:
    state = PartitionState(1, 3, [1], [1, 2], 1, 7)
    states = {TP: state}
    request = LeaderAndIsrRequest(0, 1, states, {})
    state.isr.append(2)
    states[TopicPartition("t", 1)] = state
    assert dict(request.partition_states) == {TP: PartitionState(1, 3, [1], [1, 2], 1, 7)}
    with pytest.raises(TypeError):
        request.partition_states[TP] = state  # type: ignore[index]
    tps = [TP]
    stop = StopReplicaRequest(0, 1, tps, False, {TP: 3})
    tps.append(TopicPartition("t", 1))
    assert stop.partitions == (TP,)
    deleted = {"x"}
    update = UpdateMetadataRequest(0, 1, [BROKER], {}, {}, deleted, {TP: {2}})
    deleted.add("y")
    assert update.deleted_topics == frozenset({"x"}) and update.offline_replicas[TP] == frozenset({2})


def test_a_request_is_encoded_at_the_version_the_broker_negotiated_last(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> tuple[list[int], int, int]:
        connection = BlockingConnection(max_version=4)
        channel = await _channel(monkeypatch, connection)
        sender = channel._senders[1]
        assert sender.version_for(ApiKey.LEADER_AND_ISR) == MAX_VERSIONS[ApiKey.LEADER_AND_ISR] == 7
        state = PartitionState(1, 3, [1], [1, 2], 1, 7)
        await channel.send_leader_and_isr(1, LeaderAndIsrRequest(0, 1, {TP: state}, {}))
        await asyncio.sleep(0.01)  # queued at v7, sent at v4: the same snapshot encoded again
        await channel.send_leader_and_isr(1, LeaderAndIsrRequest(0, 1, {TP: state}, {}))
        queued = sender.queue._queue[0]  # type: ignore[attr-defined]
        connection.release.set()
        assert await channel.wait_sent(5)
        channel.shutdown()
        return (
            [int(type(m).__version__) for m in connection.sent],
            queued.version,
            int(type(queued.message).__version__),
        )

    sent_versions, queued_version, message_version = asyncio.run(main())
    assert sent_versions == [4, 4]
    assert queued_version == message_version == 4


def test_stop_replica_and_update_metadata_wait_in_the_queue_already_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> list[Any]:
        connection = BlockingConnection()
        channel = await _channel(monkeypatch, connection)
        state = PartitionState(1, 3, [1], [1], 1, 0)
        await channel.send_leader_and_isr(1, LeaderAndIsrRequest(0, 1, {TP: state}, {}))
        await asyncio.sleep(0.01)  # the sender is blocked on the first request
        await channel.send_update_metadata(1, UpdateMetadataRequest(0, 1, [BROKER], {TP: state}, {}, set()))
        await channel.send_stop_replica(1, StopReplicaRequest(0, 1, [TP], False, {TP: 3}))
        queued = [item.message for item in channel._senders[1].queue._queue]  # type: ignore[attr-defined]
        channel.shutdown()
        return queued

    update, stop = asyncio.run(main())
    assert (int(type(update).__api_key__), int(type(update).__version__)) == (ApiKey.UPDATE_METADATA, 8)
    assert [(p.leader, p.leader_epoch) for t in update.topic_states for p in t.partition_states] == [(1, 3)]
    assert (int(type(stop).__api_key__), int(type(stop).__version__)) == (ApiKey.STOP_REPLICA, 4)
    assert [(p.partition_index, p.leader_epoch) for t in stop.topic_states for p in t.partition_states] == [(0, 3)]


def test_leader_and_isr_live_leaders_come_from_the_brokers_known_when_queued() -> None:
    state = PartitionState(1, 3, [1], [1, 2], 1, 7)
    message = leader_and_isr.encode(LeaderAndIsrRequest(0, 1, {TP: state}, {}), 7, {1: BROKER}, "PLAINTEXT")
    assert [(x.broker_id, x.host_name, x.port) for x in message.live_leaders] == [(1, "h1", 9091)]
