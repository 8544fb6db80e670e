"""The controller: one broker, elected through ``/controller``, that manages partition leadership.

As in Kafka 2.x (``KafkaController``): every broker tries to create the ephemeral ``/controller``
znode; the winner increments ``/controller_epoch`` and becomes the controller, the others watch
``/controller`` and try again when it disappears. The controller

- watches ``/brokers/ids`` (brokers joining and leaving), ``/brokers/topics`` (new topics and
  partitions) and ``/admin/delete_topics`` (deletions);
- elects partition leaders through its partition state machine (``zk_state_machines.py``, with
  the strategies over ``election.py``), which writes leader, ISR, ``leader_epoch`` and
  ``controller_epoch`` to each partition's state znode;
- sends LeaderAndIsr to the replicas and UpdateMetadata to every live broker, gathered in one
  ``ControllerBrokerRequestBatch`` per event (``batch.py``) and sent when the event ends, through
  :class:`ControllerChannelManager` (one connection and ordered queue per live broker, added when
  ``/brokers/ids/<id>`` appears and dropped when it goes; a broker that re-registers with a new
  start timestamp counts as new and gets the full state again);
- deletes topics once every replica answered its StopReplica (``topic_deletion.py``);
- handles ControlledShutdown requests (:meth:`controlled_shutdown`): moves leadership of the
  partitions the broker leads to another live ISR replica and answers with those it still leads.

All work goes through ONE event queue processed by one task (``ControllerEventManager``): watch
callbacks only enqueue events, so the controller's state is touched by one coroutine at a time.
Every request it sends carries its ``controller_epoch``; brokers refuse older epochs.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import assert_never

from odradek.controller.channel import ControllerChannelManager
from odradek.controller.events import (
    ApiPartitionReassignment,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    IsrChangeNotification,
    LeaderAndIsrResponseReceived,
    LogDirEventNotification,
    PartitionModifications,
    Reelect,
    ReplicaLeaderElection,
    ShutdownEventThread,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    TopicUncleanLeaderElectionEnable,
    ZkPartitionReassignment,
    ZkPreferredReplicaLeaderElection,
)
from odradek.controller.log_dirs import ControllerLogDirs
from odradek.controller.operations import ControllerOperations
from odradek.controller.reassignment import ControllerReassignment
from odradek.controller.state_machines import PartitionLifecycle, ReplicaLifecycle
from odradek.controller.topic_deletion import ControllerTopicDeletion
from odradek.controller.zk_client import ControllerZkClient
from odradek.metadata.errors import ControllerMovedError
from odradek.metadata.store import WatchHandle
from odradek.metadata.znodes import LeaderAndIsr
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

log = logging.getLogger(__name__)


class KafkaController(ControllerOperations, ControllerReassignment, ControllerLogDirs, ControllerTopicDeletion):
    """Controller election and, while active, partition leadership for the whole cluster."""

    def __init__(
        self,
        broker_id: int,
        zk: ControllerZkClient,
        channel: ControllerChannelManager,
        unclean_leader_election: bool = False,
    ) -> None:
        super().__init__(broker_id, zk, channel, unclean_leader_election)
        self.batch.on_stop_replica = self.stop_replica_answered
        self._task: asyncio.Task[None] | None = None
        self._watches: list[WatchHandle] = []
        self._topic_watches: dict[str, WatchHandle] = {}
        """Data watch on ``/brokers/topics/<t>`` per known topic (Kafka's PartitionModificationsHandler)."""

    # --- lifecycle ---------------------------------------------------------------------------

    async def startup(self) -> None:
        """Start the event loop and run the first election; returns once it has been decided."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-{self.broker_id}")
        self._watches.append(self.zk.watch_data("/controller", self._queue_on(ControllerChange())))
        self.put(Startup())
        await self.wait_idle()

    async def shutdown(self) -> None:
        for handle in [*self._watches, *self._topic_watches.values()]:
            handle.cancel()
        self._watches.clear()
        self._topic_watches.clear()
        if self._task is not None:
            self.put(ShutdownEventThread())
            try:
                await asyncio.wait_for(self._task, 5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
            self._task = None
        self.active = self.initialized = False
        self.channel.shutdown()

    def _queue_on(self, event: ControllerEvent) -> Callable[[str], Awaitable[None]]:
        """A watch callback that queues ``event``."""

        async def callback(_path: str) -> None:
            self.put(event)

        return callback

    async def _on_partition_modification(self, path: str) -> None:
        self.put(PartitionModifications(path.rsplit("/", 1)[1]))

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            if isinstance(event, ShutdownEventThread):
                self._idle.set()
                return
            self.batch.new_batch()
            try:
                await self._process(event)
            except asyncio.CancelledError:
                raise
            except ControllerMovedError as exc:
                log.warning(
                    "controller %d was deposed while processing %s: %s", self.broker_id, type(event).__name__, exc
                )
                if self.active:
                    self._resign()
                self.put(Reelect())
            except Exception:
                log.exception("controller %d failed processing %s", self.broker_id, type(event).__name__)
            # the event's requests, at most one of each kind per broker; a controller that resigned
            # meanwhile sends nothing (its batch was cleared)
            try:
                if self.active:
                    await self.batch.send_requests_to_brokers()
                else:
                    self.batch.clear()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller %d failed sending the requests of %s", self.broker_id, type(event).__name__)
            if self._queue.empty():
                self._idle.set()

    async def _process(self, event: ControllerEvent) -> None:
        """The one dispatch: each event class to its handler. Only the election runs on an
        inactive controller; the events that answer a request are handed to their handlers,
        which answer "not the controller"; the rest are dropped."""
        match event:
            case Startup() | ControllerChange() | Reelect():
                await self._elect()
            case ControlledShutdown(broker_id, future, broker_epoch):
                await self._on_controlled_shutdown(broker_id, future, broker_epoch)
            case ReplicaLeaderElection(partitions, unclean, future):
                await self._on_elect_leaders(partitions, unclean, future)
            case ApiPartitionReassignment(targets, future):
                await self._on_alter_reassignments(targets, future)
            case _ if not self.active:
                return
            case BrokerChange():
                started = time.perf_counter()
                await self._on_brokers_changed()
                self.broker_change_times_ms.append((time.perf_counter() - started) * 1000)
                self.broker_changes += 1
            case TopicChange():
                await self._on_topics_changed(None)
            case PartitionModifications(topic):
                await self._on_topics_changed({topic})
            case IsrChangeNotification():
                await self._on_isr_change_notification()
            case TopicUncleanLeaderElectionEnable():
                await self._on_topic_config_change()
            case TopicDeletion():
                await self._on_topic_deletion_requested()
            case ZkPartitionReassignment():
                await self._on_reassign_partitions_znode()
            case ZkPreferredReplicaLeaderElection():
                await self._on_preferred_replica_election_znode()
            case LogDirEventNotification():
                await self._on_log_dir_event_notification()
            case LeaderAndIsrResponseReceived(broker_id, partitions):
                await self._on_replicas_offline(broker_id, set(partitions))
            case TopicDeletionStopReplicaResponseReceived(broker_id, partitions, failed):
                await self._on_stop_replica_deletion_answered(broker_id, partitions, failed)
            case ShutdownEventThread():
                pass
            case _:
                assert_never(event)

    # --- election ----------------------------------------------------------------------------

    async def _elect(self) -> None:
        current = await self.zk.get_controller_id()
        if current is not None:
            self.active_controller_id = current
            if current != self.broker_id and self.active:
                self._resign()
            return
        if self.active:  # our /controller vanished (session expiry): start over with a new epoch
            self._resign()
        elected = await self.zk.try_elect_controller(self.broker_id)
        if elected is not None:
            self.ctx.epoch, self.ctx.epoch_zk_version = elected
            self.active, self.initialized = True, False
            self.active_controller_id = self.broker_id
            log.info("broker %d is the controller (controller_epoch %d)", self.broker_id, self.ctx.epoch)
            await self._on_controller_failover()
        else:
            self.active_controller_id = await self.zk.get_controller_id()

    def _resign(self) -> None:
        log.info("broker %d is no longer the controller", self.broker_id)
        self.active = self.initialized = False
        for handle in [*self._watches[1:], *self._topic_watches.values()]:
            handle.cancel()
        del self._watches[1:]
        self._topic_watches.clear()
        self.channel.shutdown()
        self.batch.clear()
        self.ctx.reset()
        self.reassignments = {}

    async def _on_controller_failover(self) -> None:
        zk = self.zk
        for path, event in (
            ("/brokers/ids", BrokerChange()),
            ("/brokers/topics", TopicChange()),
            ("/admin/delete_topics", TopicDeletion()),
            ("/isr_change_notification", IsrChangeNotification()),
            ("/config/changes", TopicUncleanLeaderElectionEnable()),
            ("/log_dir_event_notification", LogDirEventNotification()),
        ):
            self._watches.append(zk.watch_children(path, self._queue_on(event)))
        self._watches.append(zk.watch_data("/admin/reassign_partitions", self._queue_on(ZkPartitionReassignment())))
        self._watches.append(
            zk.watch_data("/admin/preferred_replica_election", self._queue_on(ZkPreferredReplicaLeaderElection()))
        )
        started = time.monotonic()
        await self._refresh_brokers()
        await self._load_topics()
        loaded = time.monotonic()
        await self._queue_topic_deletions()  # before any election: queued topics get none
        elected = await self.partition_state_machine.trigger_online_partition_state_change(
            set(self.ctx.assignments), "controller failover"
        )
        self._send_all_metadata()
        log.info(
            "controller %d: failover read %d brokers, %d topics and %d partition states in %.0f ms, "
            "then wrote %d partition states in %.0f ms",
            self.broker_id,
            len(self.ctx.live_brokers),
            len(self.ctx.assignments),
            len(self.ctx.states),
            (loaded - started) * 1000,
            len(elected),
            (time.monotonic() - loaded) * 1000,
        )
        await self._resume_deletions()
        await self._resume_reassignments()
        await self._on_preferred_replica_election_znode()
        await self._on_log_dir_event_notification()
        self.initialized = True

    async def _refresh_brokers(self) -> tuple[set[int], set[int]]:
        """Read ``/brokers/ids``; returns (new, dead) broker ids and keeps the channel's queues in
        step. A broker whose registration changed (new start timestamp or endpoints: it restarted
        between two watch events) counts as new (Kafka's bounced brokers)."""
        brokers = {b.id: b for b in await self.zk.get_all_brokers()}
        old = self.ctx.live_brokers
        self.ctx.live_brokers = brokers
        dead = set(old) - set(brokers)
        new = {
            i
            for i, b in brokers.items()
            if i not in old or (old[i].timestamp, old[i].endpoints, old[i].epoch) != (b.timestamp, b.endpoints, b.epoch)
        }
        for broker_id in dead:
            self.channel.remove_broker(broker_id)
            self.ctx.shutting_down.discard(broker_id)
            self.ctx.offline_replicas.pop(broker_id, None)
        for broker_id in new:
            self.ctx.shutting_down.discard(broker_id)
            self.ctx.offline_replicas.pop(broker_id, None)
            self.channel.add_broker(brokers[broker_id])
        return new, dead

    async def _load_topics(self, candidates: set[str] | None = None) -> set[str]:
        """Forget deleted topics and read the assignments (and partition states) of
        ``candidates`` (default: every topic); returns the topics whose assignment is new or
        changed. A topic change reads only topics not known yet, a partition modification only
        its topic (Kafka's TopicChange and PartitionModifications), so creating a topic costs the
        same however many exist.

        The reads are pipelined batches as Kafka's ``KafkaZkClient`` sends them (every assignment
        at once, then every new partition's state at once), not one round trip after another: a new controller's
        failover reads every partition, and its elections wait for that. The results are applied in
        topic and partition order, as before."""
        topics = set(await self.zk.get_all_topics())
        for gone in set(self.ctx.assignments) - topics:
            self._forget_topic(gone)
        wanted = sorted(topics if candidates is None else candidates & topics)
        for topic in wanted:
            if topic not in self._topic_watches:
                self._topic_watches[topic] = self.zk.watch_data(
                    f"/brokers/topics/{topic}", self._on_partition_modification
                )
        assignments = await self.zk.get_topic_assignments(wanted)
        new_or_changed: set[str] = set()
        unknown: list[tuple[TopicPartition, list[int]]] = []
        for topic, (assignment, topic_id) in zip(wanted, assignments, strict=True):
            if assignment is None or self.ctx.assignments.get(topic) == assignment:
                continue
            new_or_changed.add(topic)
            self.ctx.assignments[topic] = assignment
            self.ctx.topic_ids[topic] = topic_id
            for partition, replicas in assignment.items():
                tp = TopicPartition(topic, partition)
                if tp not in self.ctx.states:
                    unknown.append((tp, replicas))
        znodes = await self.zk.get_partition_states_of([tp for tp, _ in unknown])
        for (tp, replicas), znode in zip(unknown, znodes, strict=True):
            self._load_partition(tp, replicas, znode)
        return new_or_changed

    def _load_partition(self, tp: TopicPartition, replicas: list[int], znode: LeaderAndIsr | None) -> None:
        """A partition this controller does not know yet: with a state znode (a new controller,
        or a partition another controller created) its state is read and its state machines
        start at Online/Offline as its leader and replicas are alive or not (Kafka's
        ``initializePartitionState``); without one it becomes NewPartition with NewReplica replicas."""
        partitions, replica_states = self.partition_state_machine, self.replica_state_machine
        if znode is not None:
            state = self.ctx.states[tp] = PartitionState.from_znode(znode, replicas)
            online = state.leader >= 0 and self.ctx.replica_online(tp, state.leader)
            partitions.initialize(
                tp, PartitionLifecycle.OnlinePartition if online else PartitionLifecycle.OfflinePartition
            )
            for replica in replicas:
                alive = self.ctx.replica_online(tp, replica)
                replica_states.initialize(
                    tp, replica, ReplicaLifecycle.OnlineReplica if alive else ReplicaLifecycle.OfflineReplica
                )
        elif partitions.state(tp) is PartitionLifecycle.NonExistentPartition:
            partitions.transition(tp, PartitionLifecycle.NewPartition, cause="new partition")
            for replica in replicas:
                replica_states.transition(tp, replica, ReplicaLifecycle.NewReplica, "new partition")

    def _forget_topic(self, topic: str) -> None:
        super()._forget_topic(topic)
        handle = self._topic_watches.pop(topic, None)
        if handle is not None:
            handle.cancel()
        self.ctx.assignments.pop(topic, None)
        self.ctx.topic_ids.pop(topic, None)
        for tp in [tp for tp in self.ctx.states if tp.topic == topic]:
            del self.ctx.states[tp]
        for tp in [tp for tp in self.ctx.partition_lifecycle if tp.topic == topic]:
            del self.ctx.partition_lifecycle[tp]
        for key in [key for key in self.ctx.replica_lifecycle if key[0].topic == topic]:
            del self.ctx.replica_lifecycle[key]
        for tp in [tp for tp in self.reassignments if tp.topic == topic]:
            del self.reassignments[tp]  # a topic deleted while it moved

    async def _on_topic_config_change(self) -> None:
        """A topic config changed (``/config/changes``): OfflinePartition partitions are elected
        again, so ``unclean.leader.election.enable=true`` on an offline topic takes effect at once
        (Kafka's TopicUncleanLeaderElectionEnable)."""
        lifecycle = self.ctx.partition_lifecycle
        offline = {tp.topic for tp, st in lifecycle.items() if st is PartitionLifecycle.OfflinePartition}
        await self.partition_state_machine.trigger_online_partition_state_change(
            offline & set(self.ctx.assignments), "topic config change"
        )

    async def _on_isr_change_notification(self) -> None:
        """Leaders changed ISRs: read the partitions' states and tell every broker (UpdateMetadata)."""
        changed: dict[TopicPartition, PartitionState] = {}
        for raw in await self.zk.pop_isr_change_notifications():
            tp = TopicPartition(raw.topic, raw.partition)
            replicas = self.ctx.assignments.get(tp.topic, {}).get(tp.partition)
            current = await self.zk.get_partition_state(tp) if replicas is not None else None
            if current is not None and replicas is not None:
                self.ctx.states[tp] = changed[tp] = PartitionState.from_znode(current, replicas)
        if changed:
            self.batch.add_update_metadata(changed)
            await self._on_reassignment_progress(set(changed))

    # --- events ------------------------------------------------------------------------------

    async def _on_brokers_changed(self) -> None:
        new, dead = await self._refresh_brokers()
        if new or dead:
            log.info("controller %d: brokers joined %s, left %s", self.broker_id, sorted(new), sorted(dead))
        for broker_id, what in [*((b, "failed") for b in sorted(dead)), *((b, "registered") for b in sorted(new))]:
            for tp, replicas in self._hosted_by(broker_id).items():
                if tp.topic not in self.ctx.topics_to_be_deleted:  # their replicas are the deletion's
                    self.replica_state_machine.settle(tp, replicas, f"broker {broker_id} {what}")
        # the elections add LeaderAndIsr for their partitions' live replicas and UpdateMetadata to the batch
        await self.partition_state_machine.trigger_online_partition_state_change(
            set(self.ctx.assignments), "broker change"
        )
        if new:
            # a (re)joining broker gets every partition it hosts; every broker the full metadata
            for tp, state in self.ctx.states.items():
                self.batch.add_leader_and_isr(new & set(state.replicas), (tp,))
            self.batch.add_update_metadata(self.ctx.states)
        else:
            self.batch.add_update_metadata()  # the live brokers changed
        await self._on_reassignment_progress(set(self.reassignments))
        await self._on_deletion_brokers_changed(new, dead)

    async def _on_topics_changed(self, modified: set[str] | None) -> None:
        """A topic was created or deleted (``modified`` None: read the topics not known yet), or
        the partitions of the ``modified`` topics changed."""
        cause = "topic change" if modified is None else "partition modification"
        if modified is None:
            modified = set(await self.zk.get_all_topics()) - set(self.ctx.assignments)
        changed_topics = await self._load_topics(modified)
        await self.partition_state_machine.trigger_online_partition_state_change(changed_topics, cause)
