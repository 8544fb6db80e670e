"""Controllers without processes: brokers as sessions on one in-memory :class:`EmbeddedStore`, and a
channel that records what each controller would send to each broker.

A "broker" here is a session (its ``/brokers/ids/<id>`` registration) plus a
:class:`KafkaController`; killing it stops the controller and closes the session, so its ephemeral
znodes go and the other controllers' watches fire, as when a broker process dies.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from odradek.controller.channel import ControllerChannelManager, ResponseCallback
from odradek.controller.controller import KafkaController
from odradek.controller.messages import stop_replica
from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.errors import ErrorCode
from odradek.metadata.embedded import EmbeddedSession, EmbeddedStore
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.znodes import BrokerInfo, LeaderAndIsr
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

Request = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
R = TypeVar("R", LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)


class RecordingChannel(ControllerChannelManager):
    """The controller's channel as a list of requests per broker; nothing is sent. Like the real
    channel, a broker not added (not registered) gets nothing and the send returns False."""

    def __init__(self, controller_id: int) -> None:
        super().__init__(controller_id)
        self.requests: dict[int, list[Request]] = defaultdict(list)
        self.stop_replica_errors: dict[int, ErrorCode] = {}
        """Broker -> the error it answers every StopReplica partition with (default: none)."""
        self.unanswered: list[tuple[int, StopReplicaRequest, ResponseCallback]] = []
        """StopReplica requests of brokers in ``silent`` (they never answer)."""
        self.silent: set[int] = set()

    def add_broker(self, info: BrokerInfo) -> None:
        self.brokers[info.id] = info

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def shutdown(self) -> None:
        self.brokers.clear()

    def has_broker(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    async def wait_sent(self, timeout_s: float = 10.0) -> bool:
        return True

    def _record(self, broker_id: int, request: Request) -> bool:
        if broker_id not in self.brokers:
            return False
        self.requests[broker_id].append(request)
        return True

    async def send_leader_and_isr(
        self, broker_id: int, request: LeaderAndIsrRequest, callback: ResponseCallback | None = None
    ) -> bool:
        return self._record(broker_id, request)

    async def send_update_metadata(
        self, broker_id: int, request: UpdateMetadataRequest, callback: ResponseCallback | None = None
    ) -> bool:
        return self._record(broker_id, request)

    async def send_stop_replica(
        self, broker_id: int, request: StopReplicaRequest, callback: ResponseCallback | None = None
    ) -> bool:
        """Recorded, and answered as a broker would (every partition with
        ``stop_replica_errors.get(broker_id, none)``) unless the broker is ``silent``."""
        if not self._record(broker_id, request):
            return False
        if callback is not None:
            if broker_id in self.silent:
                self.unanswered.append((broker_id, request, callback))
            else:
                code = self.stop_replica_errors.get(broker_id, ErrorCode.none)
                errors = dict.fromkeys(request.partitions, code)
                callback(broker_id, stop_replica.encode_response(stop_replica.MAX_VERSION, ErrorCode.none, errors))
        return True

    def sent(self, broker_id: int, kind: type[R]) -> list[R]:
        return [r for r in self.requests.get(broker_id, []) if isinstance(r, kind)]

    def clear(self) -> None:
        self.requests.clear()


class ControllerCluster:
    """Brokers 1..n as store sessions with a controller each (see the module docstring)."""

    def __init__(self, unclean_leader_election: bool = False) -> None:
        self.store = EmbeddedStore(None)
        self.unclean = unclean_leader_election
        self.sessions: dict[int, EmbeddedSession] = {}
        self.controllers: dict[int, KafkaController] = {}
        self.channels: dict[int, RecordingChannel] = {}
        self.admin = KafkaZkClient(self.store.session())

    async def start(self, *broker_ids: int) -> None:
        await self.admin.create_top_level_paths()
        for broker_id in broker_ids:
            await self.start_broker(broker_id)

    async def start_broker(self, broker_id: int) -> KafkaController:
        session = self.store.session()
        zk = KafkaZkClient(session)
        await zk.register_broker(BrokerInfo(broker_id, "localhost", 9000 + broker_id))
        channel = RecordingChannel(broker_id)
        controller = KafkaController(broker_id, zk, channel, self.unclean)
        self.sessions[broker_id], self.channels[broker_id], self.controllers[broker_id] = session, channel, controller
        await controller.startup()
        await self.settle()
        return controller

    async def kill(self, broker_id: int) -> None:
        """The broker process dies: its controller stops and its session ends."""
        await self.controllers.pop(broker_id).shutdown()
        await self.sessions.pop(broker_id).close()
        self.channels.pop(broker_id)
        await self.settle()

    async def settle(self) -> None:
        """Let watch callbacks run and every controller process its queued events."""
        for _ in range(3):
            for _ in range(10):
                await asyncio.sleep(0)
            for controller in list(self.controllers.values()):
                await controller.wait_idle()

    @property
    def active(self) -> KafkaController:
        (controller,) = [c for c in self.controllers.values() if c.active]
        return controller

    @property
    def channel(self) -> RecordingChannel:
        return self.channels[self.active.broker_id]

    async def create_topic(self, topic: str, assignment: Mapping[int, list[int]]) -> uuid.UUID:
        topic_id = await self.admin.create_topic_assignment(topic, assignment)
        await self.settle()
        return topic_id

    async def state(self, topic: str, partition: int) -> LeaderAndIsr:
        znode = await self.admin.get_partition_state(TopicPartition(topic, partition))
        assert znode is not None
        return znode

    async def leader_writes_isr(self, tp: TopicPartition, isr: list[int]) -> None:
        """What a partition leader does when its ISR changes: a conditional write of the state
        znode, then an ISR change notification."""
        current = await self.state(tp.topic, tp.partition)
        await self.admin.update_leader_and_isr(
            tp, LeaderAndIsr(current.leader, current.leader_epoch, isr, current.controller_epoch), current.zk_version
        )
        await self.admin.propagate_isr_changes([tp])
        await self.settle()

    async def close(self) -> None:
        for controller in self.controllers.values():
            await controller.shutdown()
        await self.store.close()


def run_scenario(fn: Callable[[ControllerCluster], Awaitable[None]], *broker_ids: int) -> None:
    """Run ``fn`` on a started cluster of ``broker_ids`` (closed afterwards), in a fresh event loop."""

    async def main() -> None:
        cluster = ControllerCluster()
        try:
            await cluster.start(*broker_ids)
            await fn(cluster)
        finally:
            await cluster.close()

    asyncio.run(main())


def last_state(channel: RecordingChannel, broker_id: int, tp: TopicPartition) -> PartitionState:
    """The state of ``tp`` in the last LeaderAndIsr ``broker_id`` was sent for it."""
    for request in reversed(channel.sent(broker_id, LeaderAndIsrRequest)):
        if tp in request.partition_states:
            return request.partition_states[tp]
    raise AssertionError(f"broker {broker_id} got no LeaderAndIsr for {tp}")
