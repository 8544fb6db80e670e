"""The campaign's clients (confluent-kafka), each on its own thread, recording into a History.

- :class:`ProducerWorkload`: an idempotent ``acks=all`` producer writing ``<name>:<seq>`` values
  round-robin over the partitions at a fixed rate; every send, acknowledgement (with offset) and
  error is recorded. A fatal error (the idempotent producer's sequence state lost) ends that
  producer instance; a new one (``<name>.<n>``) takes over, so values stay unique.
- :class:`GroupConsumerWorkload`: a member of a consumer group, committing after each poll;
  every poll, and every assignment (a new session), is recorded.
- :class:`OffsetMonitor`: asks the group coordinator for the group's committed offsets every
  second (OffsetFetch), so the checker can see them go backwards.
- :class:`TransactionalWorkload`: a transactional producer writing one value to each of several
  partitions per transaction, committing most and aborting some, one transaction at a time; its
  topic is read by a read_committed group consumer.
- :func:`final_read`: every partition from its beginning to its high watermark, read_committed.

- :class:`ZkGroupWorkload` / :class:`ZkOffsetMonitor`: seed 004's ZooKeeper consumer group
  (offsets in ZooKeeper) and the watch on its committed offsets.
librdkafka cannot bind a source address, so every client connects from 127.0.0.1 (the proxy's
``client`` node).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from chaos.history import Ack, Fail, History, OffsetObservation, Poll, Send, Txn

__all__ = [
    "GroupConsumerWorkload",
    "OffsetMonitor",
    "ProducerWorkload",
    "TransactionalWorkload",
    "Worker",
    "ZkGroupWorkload",
    "ZkOffsetMonitor",
    "client_config",
    "epoch_bumps",
    "final_read",
    "records_of",
]


FAILOVER_OPTIONS: dict[str, Any] = {
    "topic.metadata.refresh.interval.ms": 500,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 250,
    "topic.metadata.refresh.fast.interval.ms": 50,
    "socket.connection.setup.timeout.ms": 2000,
}
"""librdkafka options a Kafka operator sets for fast leader failover (docs/reliability.md says why):

- ``retry.backoff.ms`` 50 / ``retry.backoff.max.ms`` 250 (defaults 100 / 1000): the backoff of
  retried requests and of the metadata refreshes that look for a partition's new leader grows
  exponentially to the maximum; after the seconds a leader takes to be replaced it sat at 1 s, so
  the new leader was found up to 1 s late. 250 ms bounds that at the cost of a few more Metadata
  requests while a partition has no usable leader.
- ``topic.metadata.refresh.interval.ms`` 500 (default 300000; 2000 before): librdkafka's fast
  refreshes appear to stop once every partition names a leader, and until ZooKeeper expires a lost
  broker's session its partitions still name it, so the refresh that finds the new leader is often
  a periodic one (measured: the median client share of a leader-loss window fell from 0.6-1 s to
  0.3-0.45 s).
- ``topic.metadata.refresh.fast.interval.ms`` 50 (default 100): the first of those refreshes.
- ``socket.connection.setup.timeout.ms`` 2000 (default 30000): a paused broker's kernel still
  completes the TCP handshake, so a new connection to it would wait 30 s for ApiVersions.

``request.timeout.ms`` stays at 5000, above ``replica.lag.time.max.ms`` (3000) plus its check
interval: an acks=all Produce legitimately waits that long for the ISR to shrink after a follower
is lost, and a shorter timeout would only retry it."""


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """The campaign clients' common librdkafka configuration (:data:`FAILOVER_OPTIONS` among it)."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 500,
        "log_level": 2,
        **FAILOVER_OPTIONS,
    }
    config.update(extra)
    return config


def read_committed_member(bootstrap: str, group: str) -> Consumer:
    """A read_committed member of consumer group ``group`` that commits by hand, from the
    earliest offset where the group has none; sessions short enough for the campaign's faults."""
    return Consumer(
        client_config(
            bootstrap,
            **{
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": 60000,
            },
        )
    )


def records_of(messages: list[Message]) -> tuple[tuple[str, int, int, str], ...]:
    """The ``(topic, partition, offset, value)`` of the messages that are records (not errors)."""
    return tuple(
        (str(m.topic()), int(m.partition() or 0), int(m.offset() or 0), (m.value() or b"").decode())
        for m in messages
        if m.error() is None
    )


class Worker(threading.Thread):
    """A workload's thread: ``stop()`` asks it to finish; what went wrong is in ``errors``."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.errors: list[str] = []

    def stop(self) -> None:
        self.stopping.set()


IDEMPOTENCE_DEBUG = "eos,msg"
"""librdkafka debug contexts an idempotent producer logs into the report (``log_dir``): ``eos``
(producer id, epoch bumps and drains with their reason) and ``msg`` (each produce batch's
partition, base sequence, and error with the actions librdkafka takes)."""


def librdkafka_logger(path: Path) -> logging.Logger:
    """A logger of its own writing librdkafka's log lines to ``path`` (not propagated)."""
    logger = logging.getLogger(f"chaos.librdkafka.{path}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
    return logger


def epoch_bumps(log_dir: Path) -> list[str]:
    """The epoch bumps and producer id resets the producers' librdkafka logs in ``log_dir`` record,
    each as ``<log file>: <time> <librdkafka's line, with its reason>``: a bump renumbers every
    partition from 0, so a batch possibly persisted before it and sent again after it is a duplicate
    no broker can recognise; the campaign notes them in its report."""
    found = []
    for path in sorted(log_dir.glob("*.librdkafka.log")):
        with path.open(errors="replace") as lines:
            for line in lines:
                if "epoch bump" in line or "bumped epoch" in line or ("drain for" in line and "reset" in line):
                    found.append(f"{path.name}: {line.strip()}")
    return found


class ProducerWorkload(Worker):
    """``log_dir``: where each producer instance writes librdkafka's :data:`IDEMPOTENCE_DEBUG`
    log (``<name>.librdkafka.log``), so an epoch bump or a retry the checker questions can be
    traced to its cause; None: errors only, to stderr. ``max_in_flight``: librdkafka's
    ``max.in.flight.requests.per.connection`` (see ``CampaignConfig.max_in_flight``)."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        partitions: int,
        name: str,
        rate: float = 100.0,
        log_dir: Path | None = None,
        max_in_flight: int = 1,
    ) -> None:
        super().__init__(f"producer-{name}")
        self.history, self.bootstrap, self.topic, self.partitions = history, bootstrap, topic, partitions
        self.base_name, self.rate, self.log_dir, self.max_in_flight = name, rate, log_dir, max_in_flight
        self.instance = 0
        self.pending = 0
        self._loggers: list[logging.Logger] = []

    def _producer(self) -> tuple[Producer, str]:
        self.instance += 1
        name = f"{self.base_name}.{self.instance}"
        extra: dict[str, Any] = {}
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            logger = librdkafka_logger(self.log_dir / f"{name}.librdkafka.log")
            self._loggers.append(logger)
            extra = {"debug": IDEMPOTENCE_DEBUG, "log_level": 7, "logger": logger}
        config = client_config(
            self.bootstrap,
            **{
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 5000,
                "max.in.flight.requests.per.connection": self.max_in_flight,
                **extra,
            },
        )
        return Producer(config), name

    def run(self) -> None:
        history = self.history
        producer, name = self._producer()
        fatal = threading.Event()
        seq = 0
        interval = 1.0 / self.rate
        next_at = time.monotonic()

        def delivered(err: Any, msg: Any) -> None:
            self.pending -= 1
            value = msg.value().decode()
            if err is None:
                history.acks.append(Ack(value, msg.topic(), msg.partition(), msg.offset(), history.now()))
            else:
                history.fails.append(Fail(value, history.now(), str(err)))
                if err.fatal():
                    fatal.set()

        while not self.stopping.is_set():
            if fatal.is_set():
                history.notes.append(f"{name}: fatal error at {history.now():.3f}; a new producer takes over")
                with contextlib.suppress(KafkaException):
                    producer.flush(5)
                producer, name = self._producer()
                fatal.clear()
                seq = 0
            value = f"{name}:{seq}"
            partition = seq % self.partitions
            try:
                history.sends.append(Send(value, self.topic, partition, history.now()))
                producer.produce(self.topic, value.encode(), partition=partition, on_delivery=delivered)
                self.pending += 1
                seq += 1
            except BufferError:
                history.sends.pop()
            except KafkaException as exc:
                history.fails.append(Fail(value, history.now(), str(exc)))
                seq += 1
                if exc.args and exc.args[0].fatal():
                    fatal.set()
            next_at += interval
            try:
                producer.poll(max(0.0, next_at - time.monotonic()))
            except KafkaException as exc:  # librdkafka raises its fatal errors from poll()
                self.errors.append(str(exc))
                fatal.set()
            if next_at < time.monotonic():
                next_at = time.monotonic()
        with contextlib.suppress(KafkaException):
            producer.flush(60)
        for logger in self._loggers:  # the log files are complete: close them
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
                handler.close()


class GroupConsumerWorkload(Worker):
    def __init__(self, history: History, bootstrap: str, topics: list[str], group: str, name: str) -> None:
        super().__init__(f"consumer-{name}")
        self.history, self.bootstrap, self.topics, self.group, self.consumer_name = (
            history,
            bootstrap,
            topics,
            group,
            name,
        )
        self.session = 0

    def run(self) -> None:
        history = self.history
        consumer = read_committed_member(self.bootstrap, self.group)

        def assigned(_consumer: Any, _partitions: Any) -> None:
            self.session += 1

        consumer.subscribe(self.topics, on_assign=assigned, on_revoke=assigned)
        try:
            while not self.stopping.is_set():
                try:
                    messages = consumer.consume(500, 0.2)
                except KafkaException as exc:
                    self.errors.append(str(exc))
                    continue
                records = records_of(messages)
                if records:
                    history.polls.append(Poll(self.consumer_name, self.session, history.now(), records))
                    with contextlib.suppress(KafkaException):
                        consumer.commit(asynchronous=True)
        finally:
            with contextlib.suppress(Exception):
                consumer.close()


class OffsetMonitor(Worker):
    def __init__(self, history: History, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        super().__init__(f"offsets-{group}")
        self.history, self.bootstrap, self.group = history, bootstrap, group
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def run(self) -> None:
        consumer = Consumer(client_config(self.bootstrap, **{"group.id": self.group, "enable.auto.commit": False}))
        try:
            while not self.stopping.wait(1.0):
                try:
                    answer = consumer.committed(self.partitions, timeout=3)
                except KafkaException:
                    continue
                t = self.history.now()
                for tp in answer:
                    if tp.error is None and tp.offset >= 0:
                        self.history.offsets.append(OffsetObservation(self.group, tp.topic, tp.partition, tp.offset, t))
        finally:
            with contextlib.suppress(Exception):
                consumer.close()


class TransactionalWorkload(Worker):
    """One transaction at a time: a value to each partition, then commit (4 in 5) or abort."""

    def __init__(self, history: History, bootstrap: str, topic: str, partitions: int, name: str = "txn") -> None:
        super().__init__(f"transactions-{name}")
        self.history, self.bootstrap, self.topic, self.partitions, self.base_name = (
            history,
            bootstrap,
            topic,
            partitions,
            name,
        )
        self.instance = 0

    def _producer(self) -> tuple[Producer, str]:
        self.instance += 1
        producer = Producer(
            client_config(
                self.bootstrap,
                **{
                    "transactional.id": f"chaos-{self.base_name}",
                    "transaction.timeout.ms": 20000,
                    "message.timeout.ms": 20000,
                    "request.timeout.ms": 5000,
                },
            )
        )
        return producer, f"{self.base_name}.{self.instance}"

    def run(self) -> None:
        history = self.history
        producer: Producer | None = None
        name = ""
        seq = 0
        n = 0
        while not self.stopping.is_set():
            if producer is None:
                try:
                    producer, name = self._producer()
                    producer.init_transactions(30)
                except KafkaException as exc:
                    self.errors.append(f"init: {exc}")
                    producer = None
                    self.stopping.wait(1.0)
                    continue
                seq = 0
            txn = Txn(f"{name}#{n}", t_start=history.now())
            n += 1
            history.txns.append(txn)
            try:
                producer.begin_transaction()
                for partition in range(self.partitions):
                    value = f"{name}:{seq}"
                    seq += 1
                    txn.values.append(value)
                    history.sends.append(Send(value, self.topic, partition, history.now()))
                    producer.produce(self.topic, value.encode(), partition=partition)
                producer.flush(20)
                commit = n % 5 != 0
                txn.t_end_start = history.now()
                if commit:
                    producer.commit_transaction(20)
                    txn.outcome = "committed"
                else:
                    producer.abort_transaction(20)
                    txn.outcome = "aborted"
                txn.t_end = history.now()
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                self.errors.append(str(error))
                if error.txn_requires_abort():
                    with contextlib.suppress(KafkaException):
                        producer.abort_transaction(20)
                        txn.outcome = "aborted"
                        txn.t_end = history.now()
                elif not error.retriable() or error.fatal():
                    producer = None  # a new instance; the outcome of this one stays unknown
            self.stopping.wait(0.05)


class ZkGroupWorkload(Worker):
    """A member of a ZooKeeper-coordinated consumer group (seed 004's ``ZookeeperConsumerConnector``,
    offsets in ZooKeeper, committed every second); each rebalance starts a new session. A member
    whose rebalance failed for good is closed and replaced by a new one. Its own event loop."""

    def __init__(self, history: History, bootstrap_zk: str, topic: str, group: str, name: str) -> None:
        super().__init__(f"zk-consumer-{name}")
        self.history, self.zookeeper_connect, self.topic, self.group, self.consumer_name = (
            history,
            bootstrap_zk,
            topic,
            group,
            name,
        )

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        from odradek.zkclients.consumer_connector import ConsumerConfig, ZookeeperConsumerConnector

        generation = 0
        while not self.stopping.is_set():
            generation += 1
            config = ConsumerConfig(
                self.group,
                self.zookeeper_connect,
                auto_offset_reset="smallest",
                auto_commit_interval_ms=1000,
                rebalance_backoff_ms=500,
                rebalance_max_retries=20,
            )
            connector = ZookeeperConsumerConnector(config, {self.topic: 1})
            try:
                await connector.start()
                while not self.stopping.is_set():
                    batch = await connector.poll(200)
                    records = tuple((r.topic, r.partition, r.offset, (r.value or b"").decode()) for r in batch)
                    if records:
                        session = generation * 10_000 + connector.rebalances
                        self.history.polls.append(Poll(self.consumer_name, session, self.history.now(), records))
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(connector.close(), 10)


class ZkOffsetMonitor(Worker):
    """Reads the ZooKeeper group's committed offsets (``/consumers/<group>/offsets/<t>/<p>``) every second."""

    def __init__(self, history: History, zookeeper_connect: str, group: str, topic: str, partitions: int) -> None:
        super().__init__(f"zk-offsets-{group}")
        self.history, self.zookeeper_connect, self.group, self.topic, self.partitions = (
            history,
            zookeeper_connect,
            group,
            topic,
            partitions,
        )

    def run(self) -> None:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper_connect, timeout=5)
        try:
            zk.start(10)
            while not self.stopping.wait(1.0):
                for p in range(self.partitions):
                    path = f"/consumers/{self.group}/offsets/{self.topic}/{p}"
                    try:
                        data, _ = zk.get(path)
                    except Exception:
                        continue
                    t = self.history.now()
                    self.history.offsets.append(OffsetObservation(f"zk:{self.group}", self.topic, p, int(data), t))
        except Exception as exc:
            self.errors.append(str(exc))
        finally:
            with contextlib.suppress(Exception):
                zk.stop()
                zk.close()


def final_read(history: History, bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[Poll]:
    """Read every partition from its beginning to its high watermark (read_committed); the
    reads are appended to ``history.final_reads``. Partitions not read to the end within
    ``timeout_s`` are noted in ``history.notes``."""
    consumer = Consumer(
        client_config(
            bootstrap,
            **{"group.id": f"chaos-final-{topic}", "enable.auto.commit": False, "isolation.level": "read_committed"},
        )
    )
    deadline = time.monotonic() + timeout_s
    ends: dict[int, int] = {}
    for p in range(partitions):
        while p not in ends and time.monotonic() < deadline:
            try:
                ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)[1]
            except KafkaException:
                time.sleep(0.5)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    done = {p for p, end in ends.items() if end == 0}
    polls: list[Poll] = []
    while len(done) < len(ends) and time.monotonic() < deadline:
        records = records_of(consumer.consume(1000, 1.0))
        for p, end in ends.items():
            if p in done:
                continue
            position = consumer.position([TopicPartition(topic, p)])[0].offset
            if position >= end:
                done.add(p)
        if records:
            polls.append(Poll("final", 0, history.now(), records))
    missing = sorted(set(range(partitions)) - done)
    if missing:
        history.notes.append(f"final read of {topic} did not reach the end of partitions {missing}")
    consumer.close()
    history.final_reads.extend(polls)
    return polls
