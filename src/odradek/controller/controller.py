"""The controller: one broker, elected through ``/controller``, that manages partition leadership.

As in Kafka 2.x (``KafkaController``): every broker tries to create the ephemeral ``/controller``
znode; the winner increments ``/controller_epoch`` and becomes the controller, the others watch
``/controller`` and try again when it disappears. The controller

- watches ``/brokers/ids`` (brokers joining and leaving), ``/brokers/topics`` (new topics and
  partitions) and ``/admin/delete_topics`` (deletions);
- elects partition leaders (``election.py``), writes leader, ISR, ``leader_epoch`` and
  ``controller_epoch`` to each partition's state znode;
- sends LeaderAndIsr to the replicas and UpdateMetadata to every live broker, through
  :class:`ControllerChannelManager` (one connection and ordered queue per live broker, added when
  ``/brokers/ids/<id>`` appears and dropped when it goes; a broker that re-registers with a new
  start timestamp counts as new and gets the full state again);
- handles ControlledShutdown requests (:meth:`controlled_shutdown`): moves leadership of the
  partitions the broker leads to another live ISR replica and answers with those it still leads.

All work goes through ONE event queue processed by one task (``ControllerEventManager``): watch
callbacks only enqueue events, so the controller's state is touched by one coroutine at a time.
Every request it sends carries its ``controller_epoch``; brokers refuse older epochs.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from odradek.controller.channel import ControllerChannelManager
from odradek.controller.election import (
    initial_leader_and_isr,
    offline_partition_leader_election,
)
from odradek.controller.events import ControllerContext, ControllerEvent
from odradek.controller.log_dirs import ControllerLogDirs
from odradek.controller.messages.update_metadata import LEADER_DURING_DELETE
from odradek.controller.operations import ControllerOperations
from odradek.controller.reassignment import ControllerReassignment, Reassignment
from odradek.controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from odradek.metadata.errors import BadVersionError
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.metadata.znodes import LeaderAndIsr
from odradek.replication.partition import PartitionState
from odradek.storage import TopicPartition

log = logging.getLogger(__name__)


class KafkaController(ControllerOperations, ControllerReassignment, ControllerLogDirs):
    """Controller election and, while active, partition leadership for the whole cluster."""

    def __init__(
        self,
        broker_id: int,
        zk: KafkaZkClient,
        channel: ControllerChannelManager,
        unclean_leader_election: bool = False,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.channel = channel
        self.unclean_leader_election = unclean_leader_election
        self.ctx = ControllerContext()
        self.reassignments: dict[TopicPartition, Reassignment] = {}
        self.active = False
        self.active_controller_id: int | None = None
        self._queue: asyncio.Queue[tuple[ControllerEvent, object]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._watches: list[object] = []
        self._topic_watches: dict[str, object] = {}
        """Data watch on ``/brokers/topics/<t>`` per known topic (Kafka's PartitionModificationsHandler)."""
        self._idle = asyncio.Event()

    # --- lifecycle ---------------------------------------------------------------------------

    async def startup(self) -> None:
        """Start the event loop and run the first election; returns once it has been decided."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-{self.broker_id}")
        store = self.zk.store
        self._watches.append(store.watch_data("/controller", self._on_controller_change))
        self.put(ControllerEvent.ELECT)
        await self.wait_idle()

    async def shutdown(self) -> None:
        for handle in [*self._watches, *self._topic_watches.values()]:
            handle.cancel()  # type: ignore[attr-defined]
        self._watches.clear()
        self._topic_watches.clear()
        if self._task is not None:
            self.put(ControllerEvent.SHUTDOWN)
            try:
                await asyncio.wait_for(self._task, 5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
            self._task = None
        self.active = False
        self.channel.shutdown()

    def put(self, event: ControllerEvent, payload: object = None) -> None:
        self._idle.clear()
        self._queue.put_nowait((event, payload))

    async def wait_idle(self) -> None:
        """Wait until every queued event has been processed (tests and admin calls use it)."""
        await self._idle.wait()

    async def _on_controller_change(self, _path: str) -> None:
        self.put(ControllerEvent.CONTROLLER_CHANGE)

    async def _on_broker_change(self, _path: str) -> None:
        self.put(ControllerEvent.BROKER_CHANGE)

    async def _on_topic_change(self, _path: str) -> None:
        self.put(ControllerEvent.TOPIC_CHANGE)

    async def _on_isr_change(self, _path: str) -> None:
        self.put(ControllerEvent.ISR_CHANGE)

    async def _on_config_change(self, _path: str) -> None:
        self.put(ControllerEvent.TOPIC_CONFIG_CHANGE)

    async def _on_topic_deletion(self, _path: str) -> None:
        self.put(ControllerEvent.TOPIC_DELETION)

    async def _on_reassign_partitions(self, _path: str) -> None:
        self.put(ControllerEvent.REASSIGN_PARTITIONS)

    async def _on_log_dir_event(self, _path: str) -> None:
        self.put(ControllerEvent.LOG_DIR_EVENT)

    async def _on_preferred_replica_election(self, _path: str) -> None:
        self.put(ControllerEvent.PREFERRED_REPLICA_ELECTION)

    async def _on_partition_modification(self, path: str) -> None:
        self.put(ControllerEvent.PARTITION_MODIFICATION, path.rsplit("/", 1)[1])

    async def _run(self) -> None:
        while True:
            event, payload = await self._queue.get()
            if event is ControllerEvent.SHUTDOWN:
                self._idle.set()
                return
            try:
                await self._process(event, payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller %d failed processing %s", self.broker_id, event.value)
            if self._queue.empty():
                self._idle.set()

    async def _process(self, event: ControllerEvent, payload: object) -> None:
        if event in (ControllerEvent.ELECT, ControllerEvent.CONTROLLER_CHANGE):
            await self._elect()
        elif not self.active:
            return
        elif event is ControllerEvent.BROKER_CHANGE:
            await self._on_brokers_changed()
        elif event is ControllerEvent.TOPIC_CHANGE:
            await self._on_topics_changed(None)
        elif event is ControllerEvent.PARTITION_MODIFICATION:
            await self._on_topics_changed({str(payload)})
        elif event is ControllerEvent.ISR_CHANGE:
            await self._on_isr_change_notification()
        elif event is ControllerEvent.TOPIC_CONFIG_CHANGE:
            await self._on_topic_config_change()
        elif event is ControllerEvent.ELECT_LEADERS:
            assert isinstance(payload, tuple)
            await self._on_elect_leaders(*payload)
        elif event is ControllerEvent.TOPIC_DELETION:
            await self._on_topic_deletion_requested()
        elif event is ControllerEvent.CONTROLLED_SHUTDOWN:
            assert isinstance(payload, tuple)
            await self._on_controlled_shutdown(*payload)
        elif event is ControllerEvent.ALTER_REASSIGNMENTS:
            assert isinstance(payload, tuple)
            await self._on_alter_reassignments(*payload)
        elif event is ControllerEvent.REASSIGN_PARTITIONS:
            await self._on_reassign_partitions_znode()
        elif event is ControllerEvent.PREFERRED_REPLICA_ELECTION:
            await self._on_preferred_replica_election_znode()
        elif event is ControllerEvent.LOG_DIR_EVENT:
            await self._on_log_dir_event_notification()
        elif event is ControllerEvent.REPLICAS_OFFLINE:
            assert isinstance(payload, tuple)
            await self._on_replicas_offline(*payload)

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
        if await self.zk.try_create_controller(self.broker_id):
            self.ctx.epoch = await self.zk.increment_controller_epoch()
            self.active = True
            self.active_controller_id = self.broker_id
            log.info("broker %d is the controller (controller_epoch %d)", self.broker_id, self.ctx.epoch)
            await self._on_controller_failover()
        else:
            self.active_controller_id = await self.zk.get_controller_id()

    def _resign(self) -> None:
        log.info("broker %d is no longer the controller", self.broker_id)
        self.active = False
        for handle in [*self._watches[1:], *self._topic_watches.values()]:
            handle.cancel()  # type: ignore[attr-defined]
        del self._watches[1:]
        self._topic_watches.clear()
        self.channel.shutdown()
        self.ctx = ControllerContext()
        self.reassignments = {}

    async def _on_controller_failover(self) -> None:
        store = self.zk.store
        self._watches.append(store.watch_children("/brokers/ids", self._on_broker_change))
        self._watches.append(store.watch_children("/brokers/topics", self._on_topic_change))
        self._watches.append(store.watch_children("/admin/delete_topics", self._on_topic_deletion))
        self._watches.append(store.watch_children("/isr_change_notification", self._on_isr_change))
        self._watches.append(store.watch_children("/config/changes", self._on_config_change))
        self._watches.append(store.watch_data("/admin/reassign_partitions", self._on_reassign_partitions))
        self._watches.append(store.watch_data("/admin/preferred_replica_election", self._on_preferred_replica_election))
        self._watches.append(store.watch_children("/log_dir_event_notification", self._on_log_dir_event))
        await self._refresh_brokers()
        await self._load_topics()
        await self._elect_where_needed(set(self.ctx.assignments))
        await self._send_all_metadata()
        await self._on_topic_deletion_requested()
        await self._resume_reassignments()
        await self._on_preferred_replica_election_znode()
        await self._on_log_dir_event_notification()

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
            if i not in old or (old[i].timestamp, old[i].endpoints) != (b.timestamp, b.endpoints)
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
        same however many exist."""
        topics = set(await self.zk.get_all_topics())
        for gone in set(self.ctx.assignments) - topics:
            self._forget_topic(gone)
        new_or_changed: set[str] = set()
        for topic in sorted(topics if candidates is None else candidates & topics):
            if topic not in self._topic_watches:
                self._topic_watches[topic] = self.zk.store.watch_data(
                    f"/brokers/topics/{topic}", self._on_partition_modification
                )
            assignment, topic_id = await self.zk.get_topic_assignment(topic)
            if assignment is None:
                continue
            if self.ctx.assignments.get(topic) != assignment:
                new_or_changed.add(topic)
                self.ctx.assignments[topic] = assignment
                self.ctx.topic_ids[topic] = topic_id
                for partition in assignment:
                    tp = TopicPartition(topic, partition)
                    if tp not in self.ctx.states:
                        state = await self.zk.get_partition_state(tp)
                        if state is not None:
                            self.ctx.states[tp] = _to_state(state, assignment[partition])
        return new_or_changed

    def _forget_topic(self, topic: str) -> None:
        handle = self._topic_watches.pop(topic, None)
        if handle is not None:
            handle.cancel()  # type: ignore[attr-defined]
        self.ctx.assignments.pop(topic, None)
        self.ctx.topic_ids.pop(topic, None)
        for tp in [tp for tp in self.ctx.states if tp.topic == topic]:
            del self.ctx.states[tp]
        for tp in [tp for tp in self.reassignments if tp.topic == topic]:
            del self.reassignments[tp]  # a topic deleted while it moved

    async def _elect_where_needed(self, topics: set[str]) -> dict[TopicPartition, PartitionState]:
        """Initialise new partitions and re-elect partitions whose leader is not alive.

        New partitions of a topic get their state znodes in one multi (a 1,000-partition topic
        is one write, not 1,000); re-elections are conditional updates, one per partition.
        """
        live = set(self.ctx.live_brokers) - self.ctx.shutting_down
        changed: dict[TopicPartition, PartitionState] = {}
        for topic in sorted(topics):
            created: dict[int, PartitionState] = {}
            unclean: bool | None = None
            for partition, replicas in sorted(self.ctx.assignments[topic].items()):
                tp = TopicPartition(topic, partition)
                state = self.ctx.states.get(tp)
                if state is None:
                    initial = initial_leader_and_isr(replicas, live)
                    if initial is not None:
                        first_leader, isr = initial
                        created[partition] = PartitionState(first_leader, 0, isr, list(replicas), self.ctx.epoch, 0)
                    continue
                live_tp = self.live_for(tp, live)
                if state.leader in live_tp and all(r in live_tp for r in state.isr):
                    state.replicas = list(replicas)
                    continue
                if unclean is None:
                    unclean = await self._unclean_election_enabled(topic)
                new = await self._update_state(tp, replicas, live_tp, unclean)
                if new is not None:
                    self.ctx.states[tp] = changed[tp] = new
            if created:
                await self.zk.create_partition_states(topic, {p: _to_zk(s) for p, s in created.items()})
                for partition, new in created.items():
                    tp = TopicPartition(topic, partition)
                    self.ctx.states[tp] = changed[tp] = new
        return changed

    async def _rewrite_state(
        self,
        tp: TopicPartition,
        replicas: list[int],
        decide: Callable[[PartitionState], tuple[int, list[int]] | None],
    ) -> PartitionState | None:
        """Read ``tp``'s state znode, let ``decide`` pick (leader, isr) from it (None: no change),
        and write that with the leader epoch + 1, conditionally on the version read; re-reads and
        decides again when a leader changed the ISR meanwhile. Returns the new state, or None."""
        for _attempt in range(5):
            current = await self.zk.get_partition_state(tp)
            if current is None:
                return None
            state = _to_state(current, replicas)
            decision = decide(state)
            if decision is None:
                self.ctx.states[tp] = state
                return None
            leader, isr = decision
            new = PartitionState(leader, state.leader_epoch + 1, isr, list(replicas), self.ctx.epoch, state.zk_version)
            try:
                new.zk_version = await self.zk.update_leader_and_isr(tp, _to_zk(new), state.zk_version)
            except BadVersionError:
                continue
            self.ctx.states[tp] = new
            return new
        log.warning("controller %d: %s-%d's state kept changing; leaving it", self.broker_id, tp.topic, tp.partition)
        return None

    async def _unclean_election_enabled(self, topic: str) -> bool:
        """The topic's ``unclean.leader.election.enable``, or the broker default (Kafka's controller
        reads the topic config at each election)."""
        try:
            value = (await self.zk.get_entity_configs("topics", topic)).get("unclean.leader.election.enable")
        except Exception:
            value = None
        return self.unclean_leader_election if value is None else value.strip().lower() == "true"

    async def _on_topic_config_change(self) -> None:
        """A topic config changed (``/config/changes``): partitions without a leader are elected
        again, so ``unclean.leader.election.enable=true`` on an offline topic takes effect at once
        (Kafka's TopicUncleanLeaderElectionEnable)."""
        live = set(self.ctx.live_brokers)
        offline = {tp.topic for tp, s in self.ctx.states.items() if s.leader not in live}
        changed = await self._elect_where_needed(offline & set(self.ctx.assignments))
        if changed:
            await self._send_leader_and_isr(changed)
            await self._send_update_metadata(changed)

    async def _update_state(
        self, tp: TopicPartition, replicas: list[int], live: set[int], unclean: bool
    ) -> PartitionState | None:
        """Elect a new leader for ``tp`` if its leader is not alive, and drop dead replicas from its
        ISR (Kafka's OnlinePartition election and OfflineReplica transition)."""

        def decide(state: PartitionState) -> tuple[int, list[int]] | None:
            if state.leader in live:
                if all(r in live for r in state.isr):
                    return None
                return state.leader, [r for r in state.isr if r in live]
            elected = offline_partition_leader_election(replicas, state.isr, live, unclean)
            if elected is None:
                return (-1, state.isr) if state.leader != -1 else None  # offline: keep the last ISR, as Kafka
            if elected not in state.isr:
                log.warning(
                    "controller %d: unclean leader election for %s-%d: broker %d was not in the ISR %s; "
                    "records acknowledged by the old ISR may be lost",
                    self.broker_id,
                    tp.topic,
                    tp.partition,
                    elected,
                    state.isr,
                )
            return elected, [r for r in state.isr if r in live] or [elected]

        return await self._rewrite_state(tp, replicas, decide)

    async def _on_isr_change_notification(self) -> None:
        """Leaders changed ISRs: read the partitions' states and tell every broker (UpdateMetadata)."""
        changed: dict[TopicPartition, PartitionState] = {}
        for raw in await self.zk.pop_isr_change_notifications():
            tp = TopicPartition(raw.topic, raw.partition)
            replicas = self.ctx.assignments.get(tp.topic, {}).get(tp.partition)
            current = await self.zk.get_partition_state(tp) if replicas is not None else None
            if current is not None and replicas is not None:
                self.ctx.states[tp] = changed[tp] = _to_state(current, replicas)
        if changed:
            await self._send_update_metadata(changed)
            await self._on_reassignment_progress(set(changed))

    async def _send_leader_and_isr(
        self, states: dict[TopicPartition, PartitionState], only: set[int] | None = None
    ) -> None:
        """LeaderAndIsr to every live replica of ``states`` (or only to the brokers in ``only``)."""
        by_broker: dict[int, dict[TopicPartition, PartitionState]] = {}
        for tp, state in states.items():
            for replica in state.replicas:
                if replica in self.ctx.live_brokers and (only is None or replica in only):
                    by_broker.setdefault(replica, {})[tp] = state
        for broker_id, partitions in by_broker.items():
            topic_ids = {tp.topic: self.ctx.topic_ids[tp.topic] for tp in partitions}
            request = LeaderAndIsrRequest(self.broker_id, self.ctx.epoch, partitions, topic_ids)
            await self.channel.send_leader_and_isr(broker_id, request, functools.partial(self._answered, request))

    def _answered(self, request: LeaderAndIsrRequest, broker_id: int, response: Any) -> None:
        self.leader_and_isr_answered(broker_id, response, request)

    async def _send_update_metadata(
        self, states: dict[TopicPartition, PartitionState], deleted: set[str] | None = None
    ) -> None:
        offline: dict[TopicPartition, set[int]] = {}
        for broker_id, tps in self.ctx.offline_replicas.items():
            for tp in tps & states.keys():
                offline.setdefault(tp, set()).add(broker_id)
        request = UpdateMetadataRequest(
            self.broker_id,
            self.ctx.epoch,
            list(self.ctx.live_brokers.values()),
            states,
            dict(self.ctx.topic_ids),
            deleted or set(),
            offline,
        )
        for broker_id in list(self.ctx.live_brokers):
            await self.channel.send_update_metadata(broker_id, request)

    async def _send_all_metadata(self) -> None:
        await self._send_leader_and_isr(dict(self.ctx.states))
        await self._send_update_metadata(dict(self.ctx.states))

    # --- events ------------------------------------------------------------------------------

    async def _on_brokers_changed(self) -> None:
        new, dead = await self._refresh_brokers()
        if new or dead:
            log.info("controller %d: brokers joined %s, left %s", self.broker_id, sorted(new), sorted(dead))
        changed = await self._elect_where_needed(set(self.ctx.assignments))
        if new:
            # a (re)joining broker gets every partition it hosts; every broker the full metadata
            if changed:
                await self._send_leader_and_isr(changed, set(self.ctx.live_brokers) - new)
            await self._send_leader_and_isr(dict(self.ctx.states), new)
            await self._send_update_metadata(dict(self.ctx.states))
        elif changed:
            await self._send_leader_and_isr(changed)
            await self._send_update_metadata(changed)
        else:
            await self._send_update_metadata({})
        await self._on_reassignment_progress(set(self.reassignments))

    async def _on_topics_changed(self, modified: set[str] | None) -> None:
        """A topic was created or deleted (``modified`` None: read the topics not known yet), or
        the partitions of the ``modified`` topics changed."""
        if modified is None:
            modified = set(await self.zk.get_all_topics()) - set(self.ctx.assignments)
        changed_topics = await self._load_topics(modified)
        changed = await self._elect_where_needed(changed_topics)
        if changed:
            await self._send_leader_and_isr(changed)
            await self._send_update_metadata(changed)

    async def _on_topic_deletion_requested(self) -> None:
        for topic in await self.zk.get_topic_deletions():
            assignment = self.ctx.assignments.get(topic) or {}
            replicas = {r for rs in assignment.values() for r in rs}
            tps = [TopicPartition(topic, p) for p in assignment]
            deleted_states = {
                tp: PartitionState(
                    LEADER_DURING_DELETE, s.leader_epoch, s.isr, s.replicas, self.ctx.epoch, s.zk_version
                )
                for tp in tps
                if (s := self.ctx.states.get(tp)) is not None
            }
            for broker_id in replicas:
                await self.channel.send_stop_replica(
                    broker_id, StopReplicaRequest(self.broker_id, self.ctx.epoch, tps, True)
                )
            await self.zk.delete_topic(topic)
            self._forget_topic(topic)
            await self.zk.delete_topic_deletion(topic)
            log.info("controller %d deleted topic %s", self.broker_id, topic)
            await self._send_update_metadata(deleted_states, {topic})

    # --- controlled shutdown -----------------------------------------------------------------


def _to_state(state: LeaderAndIsr, replicas: list[int]) -> PartitionState:
    return PartitionState(
        state.leader, state.leader_epoch, list(state.isr), list(replicas), state.controller_epoch, state.zk_version
    )


def _to_zk(state: PartitionState) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=list(state.isr),
        controller_epoch=state.controller_epoch,
        zk_version=state.zk_version,
    )
