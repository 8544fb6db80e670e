"""The controller's shared machinery: its context, event queue, state machines and request batch.

:class:`ControllerCore` is the base of :class:`~odradek.controller.controller.KafkaController`
and of the parts it is assembled from (``operations.py``, ``reassignment.py``, ``log_dirs.py``,
``topic_deletion.py``), which change partitions only through these members, all built once:

- ``partition_state_machine`` (:class:`~odradek.controller.zk_state_machines.ZkPartitionStateMachine`):
  elections with a strategy, written conditionally to the state znodes; the new state replaces
  the old one in ``ctx.states`` (states are immutable: a request built from one keeps what it was
  built with);
- ``replica_state_machine`` (:class:`~odradek.controller.zk_state_machines.ZkReplicaStateMachine`);
- ``batch`` (:class:`~odradek.controller.batch.ControllerBrokerRequestBatch`): what the state
  machines and the handlers add while an event runs, sent once when it ends.

Runs on the broker's event loop; everything but :meth:`put` runs on the controller's event task.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

from odradek.controller.batch import ControllerBrokerRequestBatch
from odradek.controller.channel import ControllerChannelManager, response_errors
from odradek.controller.context import ControllerContext
from odradek.controller.events import ControllerEvent, LeaderAndIsrResponseReceived, Reassignment
from odradek.controller.requests import LeaderAndIsrRequest
from odradek.controller.zk_client import ControllerZkClient
from odradek.controller.zk_state_machines import ZkPartitionStateMachine, ZkReplicaStateMachine
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.storage import TopicPartition
from odradek.storage.topic_partition import parse_topic_partition_dir

log = logging.getLogger("odradek.controller.controller")


class ControllerCore:
    """State and shared helpers of the controller (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        zk: ControllerZkClient,
        channel: ControllerChannelManager,
        unclean_leader_election: bool = False,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.channel = channel
        self.unclean_leader_election = unclean_leader_election
        self.ctx = ControllerContext()
        """Built once; emptied in place (``ctx.reset()``) when the controller resigns."""
        self.batch = ControllerBrokerRequestBatch(broker_id, self.ctx, channel, self.leader_and_isr_answered)
        """The current event's requests, sent once when the event is processed."""
        self.replica_state_machine = ZkReplicaStateMachine(broker_id, self.ctx, self.batch)
        self.partition_state_machine = ZkPartitionStateMachine(
            broker_id, self.ctx, zk, self.batch, self.replica_state_machine, unclean_leader_election
        )
        self.reassignments: dict[TopicPartition, Reassignment] = {}
        self.active = False
        self.initialized = False
        """Active and done with the failover (context, reassignments and deletions loaded): what the
        controller answers from its state before that would be incomplete."""
        self.active_controller_id: int | None = None
        self.broker_change_times_ms: collections.deque[float] = collections.deque(maxlen=1024)
        """How long the last broker changes took to handle (Kafka's ``LeaderElectionRateAndTimeMs``)."""
        self.broker_changes = 0
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._idle = asyncio.Event()

    def set_unclean_leader_election_default(self, enabled: bool) -> None:
        """The broker's ``unclean.leader.election.enable`` changed (a dynamic broker config): the
        default of every later offline election of a topic without its own override."""
        self.unclean_leader_election = enabled
        self.partition_state_machine.unclean_default = enabled

    # --- event queue -------------------------------------------------------------------------

    def put(self, event: ControllerEvent) -> None:
        """Queue ``event`` for the event task (callable from any coroutine on the loop)."""
        self._idle.clear()
        self._queue.put_nowait(event)

    async def wait_idle(self) -> None:
        """Wait until every queued event has been processed (tests and admin calls use it)."""
        await self._idle.wait()

    # --- state machines ----------------------------------------------------------------------

    @property
    def unclean_leader_elections(self) -> int:
        """Leaders elected from outside the ISR (Kafka's ``UncleanLeaderElectionsPerSec``)."""
        return self.partition_state_machine.unclean_leader_elections

    def live_for(self, tp: TopicPartition, live: set[int]) -> set[int]:
        """``live`` without the brokers on which ``tp``'s replica is offline."""
        return self.ctx.live_for(tp, live)

    def _hosted_by(self, broker_id: int) -> dict[TopicPartition, list[int]]:
        """The partitions with a replica on ``broker_id``, with their replicas."""
        return {
            TopicPartition(topic, partition): replicas
            for topic, assignment in self.ctx.assignments.items()
            for partition, replicas in assignment.items()
            if broker_id in replicas
        }

    # --- requests ----------------------------------------------------------------------------

    def leader_and_isr_answered(self, request: LeaderAndIsrRequest, broker_id: int, response: Any) -> None:
        """The channel's callback: queue the partitions ``broker_id`` answered KAFKA_STORAGE_ERROR
        (Kafka's LeaderAndIsrResponseReceived); see :mod:`odradek.controller.log_dirs`."""
        names = {str(topic_id): topic for topic, topic_id in request.topic_ids.items()}
        _error, failed = response_errors(ApiKey.LEADER_AND_ISR, response, names)
        offline = set()
        for name, code in failed.items():
            tp = parse_topic_partition_dir(name)
            if code == ErrorCode.kafka_storage_error and tp is not None:
                offline.add(tp)
        if offline:
            self.put(LeaderAndIsrResponseReceived(broker_id, frozenset(offline)))

    def _send_all_metadata(self) -> None:
        """Every partition to its live replicas (LeaderAndIsr) and to every live broker (UpdateMetadata)."""
        self.batch.add_leader_and_isr_for_replicas(self.ctx.states)
        self.batch.add_update_metadata(self.ctx.states)  # also without partitions: the live brokers
