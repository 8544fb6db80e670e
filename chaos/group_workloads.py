"""The campaign's workloads of Kafka 4's groups (confluent-kafka), each on its own thread.

- :class:`ConsumerProtocolGroupWorkload`: a member of a KIP-848 consumer group
  (``group.protocol=consumer``: the coordinator assigns, no ``partition.assignment.strategy``,
  sessions and heartbeats set by the brokers), committing after each poll like
  :class:`~chaos.workloads.GroupConsumerWorkload`. librdkafka calls the rebalance callbacks
  incrementally (``on_assign`` with the partitions added, ``on_revoke`` with those taken away,
  ``on_lost`` when the member was fenced); each is recorded as an
  :class:`~chaos.history.AssignmentChange`, and the member's last partitions as ``closed`` when it
  closes. Its polls are recorded per partition, each with the number of that partition's current
  ownership as the poll's session, so the checker's skip and rewind checks apply within one
  ownership exactly (a partition kept across another's assignment keeps its session).
- :class:`ShareGroupWorkload`: a KIP-932 ``ShareConsumer`` in explicit acknowledgement mode. Per
  delivery it sends ACCEPT, RELEASE (about 1 in 20) or REJECT (about 1 in 50), chosen by
  :func:`share_ack_choice` from the campaign's seed, the value and the delivery count; after each
  poll it commits the acknowledgements (``commit_sync``). Every delivery (with the broker's
  delivery count), every acknowledgement and the broker's answer to it (the acknowledgement-commit
  callback, or ``commit_sync``'s per-partition result) is recorded.
- :func:`prepare_share_group`: the share group's ``share.auto.offset.reset=earliest`` (a GROUP
  config, IncrementalAlterConfigs), set before its consumers start so no record written before
  their first fetch is skipped.
- :func:`drain_share_group`: after the heal, the share consumers keep polling until every
  acknowledged record of their topics was delivered and nothing new came for a few seconds, or
  nothing new came for longer than a record lock (a record acquired by a fetch whose answer was
  lost comes back when its lock expires).
"""

from __future__ import annotations

import contextlib
import time
import zlib
from collections.abc import Sequence
from typing import Any

from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    IllegalStateException,
    KafkaException,
    Message,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from chaos.history import AssignmentChange, History, Poll, ShareAck, ShareDelivery
from chaos.workloads import Worker, client_config, records_of

__all__ = [
    "ConsumerProtocolGroupWorkload",
    "ShareGroupWorkload",
    "drain_share_group",
    "prepare_share_group",
    "share_ack_choice",
]

TP = tuple[str, int]


class ConsumerProtocolGroupWorkload(Worker):
    def __init__(self, history: History, bootstrap: str, topics: list[str], group: str, name: str) -> None:
        super().__init__(f"consumer-protocol-{name}")
        self.history, self.bootstrap, self.topics, self.group, self.consumer_name = (
            history,
            bootstrap,
            topics,
            group,
            name,
        )
        self.assignments = 0
        self.owned: dict[TP, int] = {}
        """Each partition the member owns -> the number of its ownership (its polls' session)."""
        self.closing = False

    def _change(self, kind: str, partitions: Sequence[TopicPartition]) -> None:
        tps = tuple(sorted((str(tp.topic), int(tp.partition)) for tp in partitions))
        if not tps or self.closing:
            return
        self.history.assignments.append(AssignmentChange(self.consumer_name, self.group, kind, self.history.now(), tps))
        for tp in tps:
            if kind == "assigned":
                self.assignments += 1
                self.owned[tp] = self.assignments
            else:
                self.owned.pop(tp, None)

    def run(self) -> None:
        history = self.history
        consumer = Consumer(
            client_config(
                self.bootstrap,
                **{
                    "group.id": self.group,
                    "group.protocol": "consumer",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "isolation.level": "read_committed",
                    "max.poll.interval.ms": 60000,
                },
            )
        )
        consumer.subscribe(
            self.topics,
            on_assign=lambda _c, ps: self._change("assigned", ps),
            on_revoke=lambda _c, ps: self._change("revoked", ps),
            on_lost=lambda _c, ps: self._change("lost", ps),
        )
        try:
            while not self.stopping.is_set():
                try:
                    messages = consumer.consume(500, 0.2)
                except KafkaException as exc:
                    self.errors.append(str(exc))
                    continue
                records = records_of(messages)
                if not records:
                    continue
                t = history.now()
                by_partition: dict[TP, list[tuple[str, int, int, str]]] = {}
                for record in records:
                    by_partition.setdefault((record[0], record[1]), []).append(record)
                for tp, part in by_partition.items():
                    history.polls.append(Poll(self.consumer_name, self.owned.get(tp, 0), t, tuple(part)))
                with contextlib.suppress(KafkaException):
                    consumer.commit(asynchronous=True)
        finally:
            if self.owned:  # it stops consuming them now; the leave follows in close()
                history.assignments.append(
                    AssignmentChange(self.consumer_name, self.group, "closed", history.now(), tuple(sorted(self.owned)))
                )
            self.closing = True
            with contextlib.suppress(Exception):
                consumer.close()


SHARE_ACK_TYPES = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}


def share_ack_choice(seed: int, value: str, delivery: int) -> str:
    """``reject`` for 2 in 100 deliveries (about 1 in 50), ``release`` for 5 in 100 (1 in 20),
    else ``accept``: a hash of the campaign's ``seed``, the record's ``value`` and its
    ``delivery`` number, so a run repeats its choices and a released record is, on its next
    delivery, most likely accepted."""
    bucket = zlib.crc32(f"{seed}/{value}/{delivery}".encode()) % 100
    if bucket < 2:
        return "reject"
    if bucket < 7:
        return "release"
    return "accept"


class ShareGroupWorkload(Worker):
    """A share consumer of ``group`` on ``topics``; ``last_delivery`` is the campaign time of the
    last record it was delivered (the drain watches it)."""

    def __init__(
        self, history: History, bootstrap: str, topics: list[str], group: str, name: str, seed: int = 0
    ) -> None:
        super().__init__(f"share-{name}")
        self.history, self.bootstrap, self.topics, self.group, self.consumer_name, self.seed = (
            history,
            bootstrap,
            topics,
            group,
            name,
            seed,
        )
        self.last_delivery = 0.0
        self.deliveries = 0
        self._pending: dict[tuple[str, int, int], ShareAck] = {}
        self._seen: dict[tuple[str, int, int], int] = {}

    def _resolve(self, ack: ShareAck, error: Any, t: float) -> None:
        """An answer to ``ack``: ``confirmed`` only if no answer said otherwise (an error wins)."""
        self._pending.pop((ack.topic, ack.partition, ack.offset), None)
        if ack.t_outcome is None:
            ack.t_outcome = t
        if error is not None:
            ack.outcome, ack.error = "failed", str(error)
        elif ack.outcome == "pending":
            ack.outcome = "confirmed"

    def _committed(self, offsets: dict[Any, Any], error: Any) -> None:
        """The acknowledgement-commit callback: ``{TopicPartition: {offset, ...}}`` and an error or None."""
        t = self.history.now()
        for tp, acked in offsets.items():
            for offset in acked:
                ack = self._pending.get((str(tp.topic), int(tp.partition), int(offset)))
                if ack is not None:
                    self._resolve(ack, error, t)

    def _acknowledge(self, consumer: ShareConsumer, message: Message) -> ShareAck:
        history = self.history
        topic, partition, offset = str(message.topic()), int(message.partition() or 0), int(message.offset() or 0)
        value = (message.value() or b"").decode()
        t = history.now()
        count = message.delivery_count()
        key = (topic, partition, offset)
        self._seen[key] = self._seen.get(key, 0) + 1
        history.share_deliveries.append(
            ShareDelivery(self.consumer_name, self.group, topic, partition, offset, value, t, count)
        )
        self.last_delivery = t
        self.deliveries += 1
        kind = share_ack_choice(self.seed, value, count if count is not None else self._seen[key])
        ack = ShareAck(self.consumer_name, self.group, topic, partition, offset, value, kind, history.now())
        history.share_acks.append(ack)
        try:
            consumer.acknowledge(message, SHARE_ACK_TYPES[kind])
        except (IllegalStateException, KafkaException, ValueError) as exc:
            ack.outcome, ack.t_outcome, ack.error = "failed", history.now(), f"acknowledge: {exc}"
            return ack
        self._pending[key] = ack
        return ack

    def run(self) -> None:
        history = self.history
        consumer = ShareConsumer(
            client_config(self.bootstrap, **{"group.id": self.group, "share.acknowledgement.mode": "explicit"})
        )
        consumer.set_acknowledgement_commit_callback(self._committed)
        consumer.subscribe(self.topics)
        try:
            while not self.stopping.is_set():
                try:
                    messages = consumer.poll(0.5)
                except (IllegalStateException, KafkaException) as exc:
                    self.errors.append(f"poll: {exc}")
                    self.stopping.wait(0.2)
                    continue
                batch = []
                for message in messages:
                    if message.error() is not None:
                        self.errors.append(f"poll: {message.error()}")
                        continue
                    ack = self._acknowledge(consumer, message)
                    if ack.outcome == "pending":
                        batch.append(ack)
                if not batch:
                    continue
                try:
                    answers = consumer.commit_sync(10.0)
                except (IllegalStateException, KafkaException) as exc:
                    self.errors.append(f"commit_sync: {exc}")
                    continue
                t = history.now()
                results = {(str(tp.topic), int(tp.partition)): error for tp, error in answers.items()}
                for ack in batch:
                    key = (ack.topic, ack.partition)
                    if key in results:
                        self._resolve(ack, results[key], t)
        finally:
            with contextlib.suppress(Exception):
                consumer.close()


def prepare_share_group(bootstrap: str, group: str, timeout_s: float = 30.0) -> str | None:
    """Set ``share.auto.offset.reset=earliest`` on share group ``group`` and wait until
    DescribeConfigs shows it; None when done, else what went wrong."""
    admin = AdminClient(client_config(bootstrap))
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    deadline = time.monotonic() + timeout_s
    problem: str | None = "not tried"
    while time.monotonic() < deadline:
        try:
            resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(10)
            for future in admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values():
                described = future.result(10)
                value = getattr(described.get("share.auto.offset.reset"), "value", None)
                problem = None if value == "earliest" else f"share.auto.offset.reset described as {value!r}"
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            return None
        time.sleep(1.0)
    return f"share group {group}: {problem}"


def drain_share_group(
    history: History,
    workers: Sequence[ShareGroupWorkload],
    group: str,
    quiet_s: float = 3.0,
    idle_s: float = 20.0,
    timeout_s: float = 120.0,
) -> str:
    """Let ``workers`` (the running consumers of share group ``group``) poll until every
    acknowledged record of the group's topics was delivered and nothing new came for ``quiet_s``,
    or nothing new came for ``idle_s`` (longer than a record lock), or ``timeout_s`` passed; the
    producers must have stopped. Returns what ended it (the campaign notes it)."""
    topics = set(history.share_groups.get(group, ()))
    acked = {a.value for a in history.acks if a.topic in topics}
    started = history.now()
    delivered: set[str] = set()
    seen = 0
    while True:
        deliveries = history.share_deliveries[seen:]
        seen += len(deliveries)
        delivered.update(d.value for d in deliveries if d.group == group)
        now = history.now()
        idle = now - max([started, *(w.last_delivery for w in workers)])
        missing = len(acked - delivered)
        took = f"share group {group}: drain of {now - started:.1f} s"
        if missing == 0 and idle >= quiet_s:
            return f"{took}, every acknowledged record delivered"
        if idle >= idle_s:
            return f"{took}, nothing new for {idle_s:.0f} s, {missing} acknowledged records never delivered"
        if now - started >= timeout_s:
            return f"{took} (the limit), {missing} acknowledged records not delivered yet"
        time.sleep(0.25)
