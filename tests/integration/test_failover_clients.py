"""Clients through a leader change, and unclean leader election, on three broker processes.

One 3-broker cluster on a real ZooKeeper for the module (``replica.lag.time.max.ms`` 2000,
ZooKeeper session 6000 ms from ``odradek.testing.CLUSTER_DEFAULTS``; ``__consumer_offsets`` with
replication factor 3 here, so the groups outlive a broker).

Leader change: librdkafka (confluent-kafka), kafka-python and aiokafka each produce (acks=all,
retries, idempotence off, one request in flight) to a topic of their own and consume it (in a
consumer group; kafka-python by assignment, see ``KafkaPythonClient``). The three topics are led
by the same broker, which is killed with SIGKILL while the clients keep producing; its partitions
get a new leader when its ZooKeeper session expires. Each client must carry on by itself (errors,
metadata refresh, retries) and every acknowledged record must be read back in order; duplicates
can only be producer retries and are counted. The killed broker is restarted and must rejoin
every ISR with a log equal to the leader's. Then the latency of acks=all with three replicas.

Unclean leader election: a partition with replicas [a, b] whose ISR has shrunk to [a] (b paused
past ``replica.lag.time.max.ms`` while a takes writes) stays offline when a dies, even with b back,
while ``unclean.leader.election.enable`` is false; setting it to true on the topic makes Kafka's
controller elect b. A second, two-broker cluster with the broker setting true elects b at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from odradek.cli.cluster import LocalCluster
from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.testing_zk import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow, pytest.mark.timeout(240)]

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
BEFORE_KILL = 100
"""Records each client has acknowledged and consumed before the leader is killed."""
TOTAL = 300
"""Records each client sends in all."""
UNCLEAN = "unclean.leader.election.enable"


class PartitionView(NamedTuple):
    error: int
    leader: int
    replicas: list[int]
    isr: list[int]


# --- cluster views --------------------------------------------------------------------------


def _metadata(cluster: LocalCluster, topics: list[str]) -> dict[tuple[str, int], PartitionView]:
    """(topic, partition) -> what the first live broker that answers says in Metadata v12."""

    async def fetch() -> Any:
        last: Exception | None = None
        for address in cluster.bootstrap_servers.split(","):
            host, port = address.split(":")
            try:
                async with KafkaConnection(host, int(port), request_timeout_ms=2000, connect_timeout_ms=1000) as conn:
                    rb = conn.builder(3, max_version=12)
                    return await conn.send(
                        rb(
                            topics=tuple(rb.make("MetadataRequestTopic", name=t, topic_id=None) for t in topics),
                            allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False,
                        )
                    )
            except Exception as exc:
                last = exc
        raise AssertionError(f"no broker answered Metadata: {last!r}")

    out: dict[tuple[str, int], PartitionView] = {}
    for t in asyncio.run(fetch()).topics:
        for p in t.partitions:
            out[(t.name, int(p.partition_index))] = PartitionView(
                int(p.error_code), int(p.leader_id), list(p.replica_nodes), sorted(p.isr_nodes)
            )
    return out


def _partition(cluster: LocalCluster, topic: str) -> PartitionView | None:
    """Partition 0 of ``topic`` in Metadata, or None when no broker answers."""
    try:
        return _metadata(cluster, [topic]).get((topic, 0))
    except AssertionError:
        return None


def _state_znode(cluster: LocalCluster, topic: str) -> dict[str, Any]:
    data = cluster.read_znode(f"/brokers/topics/{topic}/partitions/0/state")
    return json.loads(data) if data else {}


def _controller_id(cluster: LocalCluster) -> int:
    data = cluster.read_znode("/controller")
    assert data is not None, "no controller"
    return int(json.loads(data)["brokerid"])


def _log_bytes(cluster: LocalCluster, broker_id: int, topic: str) -> bytes:
    """All segments of the replica, concatenated. Replicas are byte-identical only because this
    module's topics use ``cleanup.policy=delete``: each replica cleans a compacted topic on its own
    (docs/replication.md), so compacted replicas are compared by offsets and values instead."""
    directory = Path(cluster.broker(broker_id).data_dir) / f"{topic}-0"
    return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))


def _eventually(condition: Callable[[], object], timeout_s: float, interval_s: float = 0.05) -> bool:
    """True once ``condition`` is true, False after ``timeout_s``; never raises from a timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return False


def _holds_for(condition: Callable[[], bool], seconds: float, interval_s: float = 0.1) -> None:
    """Assert ``condition`` is true on every check during ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), "condition stopped holding"
        time.sleep(interval_s)


def _create_topic(cluster: LocalCluster, topic: str, replicas: list[int], config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new_topic = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=config)
    admin.create_topics([new_topic])[topic].result(30)
    cluster.wait_until(
        lambda: (v := _partition(cluster, topic)) is not None and v.leader == replicas[0] and v.isr == sorted(replicas),
        timeout_s=20,
        message=f"{topic} led by {replicas[0]} with every replica in sync",
    )


# --- the clients ----------------------------------------------------------------------------


class _ClientLog(logging.Handler):
    """Collects the warnings a client library logs (its view of the errors it retried)."""

    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage()[:200])


@dataclass
class Outcome:
    """What one client did: values are the record numbers 0..TOTAL-1, sent in that order."""

    sent: int = 0
    acked: list[int] = field(default_factory=list)
    """Acknowledged values in the order the acknowledgements came."""
    failed: list[str] = field(default_factory=list)
    consumed: list[tuple[int, int]] = field(default_factory=list)
    """(offset, value) in the order the consumer received them."""
    errors: list[str] = field(default_factory=list)
    """Errors and warnings the client reported along the way (retried, not failures)."""
    during_outage: list[int] = field(default_factory=list)
    """Values sent after the kill and before Metadata named a new leader."""


class FailoverClient:
    """A producer and a consumer of one library on one single-partition topic."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = f"{topic}-group"
        self.out = Outcome()
        self._halt = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        raise NotImplementedError

    def send(self, value: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _spawn(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, daemon=True, name=f"{self.topic}-{target.__name__}")
        thread.start()
        self._threads.append(thread)

    def _join(self) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(15)


class ConfluentClient(FailoverClient):
    def start(self) -> None:
        common = {"bootstrap.servers": self.bootstrap, "error_cb": lambda e: self.out.errors.append(str(e))}
        self.producer = Producer(
            {
                **common,
                "acks": "all",
                "enable.idempotence": False,
                "retries": 1_000_000,
                "retry.backoff.ms": 100,
                "max.in.flight.requests.per.connection": 1,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
            }
        )
        self.consumer = Consumer(
            {
                **common,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        self.consumer.subscribe([self.topic])
        self._spawn(self._poll_producer)
        self._spawn(self._consume)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            self.out.acked.append(int(msg.value()))
        else:
            self.out.failed.append(str(err))

    def send(self, value: int) -> None:
        self.producer.produce(self.topic, str(value).encode(), partition=0, on_delivery=self._on_delivery)
        self.out.sent += 1

    def _poll_producer(self) -> None:
        while not self._halt.is_set():
            self.producer.poll(0.05)

    def _consume(self) -> None:
        while not self._halt.is_set():
            msg: Any = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    self.out.errors.append(str(msg.error()))
                continue
            self.out.consumed.append((msg.offset(), int(msg.value())))

    def close(self) -> None:
        self._join()
        self.producer.flush(10)
        self.consumer.close()


class KafkaPythonClient(FailoverClient):
    def start(self) -> None:
        self._log = _ClientLog(self.out.errors)
        logging.getLogger("kafka").addHandler(self._log)
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=False,
            retries=1_000_000,
            retry_backoff_ms=100,
            max_in_flight_requests_per_connection=1,
            linger_ms=5,
            request_timeout_ms=5000,
            delivery_timeout_ms=60_000,
        )
        self._ready = threading.Event()
        self._spawn(self._consume)
        assert self._ready.wait(20), "kafka-python consumer did not start"

    def send(self, value: int) -> None:
        future = self.producer.send(self.topic, value=str(value).encode(), partition=0)
        future.add_callback(lambda _metadata: self.out.acked.append(value))
        future.add_errback(lambda exc: self.out.failed.append(repr(exc)))
        self.out.sent += 1

    def _consume(self) -> None:
        """Assigned, not subscribed: kafka-python 3.0.12's group consumer can block for good in
        ``poll`` (``Fetcher.send_fetches``) after a first rebalance that assigned nothing because
        its metadata did not list the topic yet, whatever the broker. KafkaConsumer is not
        thread-safe, so it is created and used on this thread only."""
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        consumer.assign([KafkaTopicPartition(self.topic, 0)])
        self._ready.set()
        try:
            while not self._halt.is_set():
                for records in consumer.poll(timeout_ms=200).values():
                    self.out.consumed.extend((r.offset, int(r.value)) for r in records)
        finally:
            consumer.close()

    def close(self) -> None:
        self.producer.flush(10)
        self.producer.close(10)
        self._join()
        logging.getLogger("kafka").removeHandler(self._log)


class AiokafkaClient(FailoverClient):
    """Producer and consumer on an event loop of their own thread; ``send`` queues onto it."""

    def start(self) -> None:
        self._log = _ClientLog(self.out.errors)
        logging.getLogger("aiokafka").addHandler(self._log)
        self.loop = asyncio.new_event_loop()
        self._spawn(self.loop.run_forever)
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    async def _start(self) -> None:
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self.producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=False,
            linger_ms=5,
            retry_backoff_ms=100,
            request_timeout_ms=60_000,
        )
        self.consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        await self.producer.start()
        await self.consumer.start()
        self.tasks = [asyncio.create_task(self._send_in_order()), asyncio.create_task(self._consume())]

    def send(self, value: int) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, value)
        self.out.sent += 1

    async def _send_in_order(self) -> None:
        """One sender, so records enter the producer in the order they were sent."""
        while True:
            value = await self.queue.get()
            try:
                delivery = await self.producer.send(self.topic, str(value).encode(), partition=0)
            except Exception as exc:
                self.out.failed.append(repr(exc))
                continue
            delivery.add_done_callback(lambda f, v=value: self._on_delivery(f, v))

    def _on_delivery(self, delivery: asyncio.Future[Any], value: int) -> None:
        if delivery.cancelled() or delivery.exception() is not None:
            self.out.failed.append(repr(None if delivery.cancelled() else delivery.exception()))
        else:
            self.out.acked.append(value)

    async def _consume(self) -> None:
        while True:
            try:
                batches = await self.consumer.getmany(timeout_ms=200)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.out.errors.append(repr(exc))
                await asyncio.sleep(0.1)
                continue
            for records in batches.values():
                self.out.consumed.extend((r.offset, int(r.value)) for r in records)

    async def _stop(self) -> None:
        await asyncio.wait_for(self.producer.flush(), 10)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.consumer.stop()
        await self.producer.stop()

    def close(self) -> None:
        done: Future[None] = asyncio.run_coroutine_threadsafe(self._stop(), self.loop)
        try:
            done.result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._join()
            self.loop.close()
            logging.getLogger("aiokafka").removeHandler(self._log)


CLIENT_CLASSES: dict[str, type[FailoverClient]] = {
    "confluent-kafka": ConfluentClient,
    "kafka-python": KafkaPythonClient,
    "aiokafka": AiokafkaClient,
}


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> Iterator[LocalCluster]:
    yield odradek_cluster_module(
        3, zookeeper_connect=zookeeper_server.chroot_connect(), overrides={"offsets.topic.replication.factor": "3"}
    )


@dataclass
class Failover:
    victim: int
    topics: dict[str, str]
    outcomes: dict[str, Outcome]
    outage_s: float
    first_leader_view: dict[str, PartitionView]


@pytest.fixture(scope="module")
def failover(cluster: LocalCluster) -> Failover:
    """The three clients produce and consume while the leader of their partitions is killed; the
    killed broker is restarted once every client has settled. Records what happened for the tests
    to judge; fails itself only if the clients do not get going before the kill."""
    victim = next(b for b in (1, 2, 3) if b != _controller_id(cluster))
    others = [b for b in (1, 2, 3) if b != victim]
    topics = {name: f"failover-{name}" for name in CLIENTS}
    for topic in topics.values():
        _create_topic(cluster, topic, [victim, *others], {"min.insync.replicas": "2"})
    clients = {name: CLIENT_CLASSES[name](cluster.bootstrap_servers, topics[name]) for name in CLIENTS}
    for client in clients.values():
        client.start()
    try:
        for client in clients.values():
            for value in range(BEFORE_KILL):
                client.send(value)
        if not _eventually(
            lambda: all(
                len(c.out.acked) == BEFORE_KILL and len({v for _, v in c.out.consumed}) == BEFORE_KILL
                for c in clients.values()
            ),
            30,
        ):
            counts = {n: (len(c.out.acked), len({v for _, v in c.out.consumed})) for n, c in clients.items()}
            raise AssertionError(f"before the kill, (acknowledged, consumed) per client: {counts}")

        cluster.kill9(victim)
        killed_at = time.monotonic()

        def keep_sending_until_new_leaders() -> bool:
            for c in clients.values():
                if c.out.sent < TOTAL - 50:
                    c.out.during_outage.append(c.out.sent)
                    c.send(c.out.sent)
            try:
                view = _metadata(cluster, list(topics.values()))
            except AssertionError:
                return False
            return all(view[(t, 0)].leader not in (victim, -1) for t in topics.values())

        cluster.wait_until(keep_sending_until_new_leaders, timeout_s=30, message="new leaders after the kill")
        outage_s = time.monotonic() - killed_at
        view = _metadata(cluster, list(topics.values()))
        for client in clients.values():
            while client.out.sent < TOTAL:
                client.send(client.out.sent)
        _eventually(lambda: all(len(c.out.acked) + len(c.out.failed) == TOTAL for c in clients.values()), 60)
        _eventually(lambda: all({v for _, v in c.out.consumed} >= set(c.out.acked) for c in clients.values()), 30, 0.1)
    finally:
        for client in clients.values():
            client.close()
        cluster.restart(victim)
    return Failover(
        victim,
        topics,
        {name: c.out for name, c in clients.items()},
        outage_s,
        {name: view[(topics[name], 0)] for name in CLIENTS},
    )


# --- leader change under clients ------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_client_keeps_producing_and_consuming_through_a_leader_kill(failover: Failover, client: str) -> None:
    out = failover.outcomes[client]
    assert failover.first_leader_view[client].isr == sorted(b for b in (1, 2, 3) if b != failover.victim)
    assert out.failed == [], out.failed[:5]
    assert out.sent == TOTAL
    assert sorted(out.acked) == list(range(TOTAL)), f"{TOTAL - len(out.acked)} records not acknowledged"
    assert out.acked == list(range(TOTAL)), "acknowledgements out of send order"
    assert len(out.during_outage) >= 10, "too few records were sent while the partition had no leader"

    # a consumer may be handed an offset again (a rebalance before any commit): it must
    # hold the same record; a value at two offsets is a producer retry
    by_offset: dict[int, int] = {}
    for offset, value in out.consumed:
        assert by_offset.setdefault(offset, value) == value, f"offset {offset} read with two different values"
    redelivered = len(out.consumed) - len(by_offset)
    values = [by_offset[offset] for offset in sorted(by_offset)]
    first_seen: list[int] = []
    copies: dict[int, int] = {}
    for value in values:
        copies[value] = copies.get(value, 0) + 1
        if copies[value] == 1:
            first_seen.append(value)
    assert set(first_seen) <= set(range(TOTAL)), "records nobody sent"
    assert first_seen == list(range(TOTAL)), "acknowledged records missing or out of order"
    duplicates = len(values) - len(first_seen)
    assert max(copies.values()) <= 3, "a record stored more often than producer retries explain"
    print(
        f"{client}: {TOTAL} acknowledged, {len(out.during_outage)} sent while leaderless "
        f"({failover.outage_s:.1f} s), {duplicates} stored twice by producer retries, {redelivered} offsets "
        f"delivered again, {len(out.errors)} client errors reported, most often {Counter(out.errors).most_common(2)}"
    )


def test_killed_leader_rejoins_every_isr_with_the_leaders_log(cluster: LocalCluster, failover: Failover) -> None:
    topics = list(failover.topics.values())
    cluster.wait_until(
        lambda: all(v.isr == [1, 2, 3] for v in _metadata(cluster, topics).values()),
        timeout_s=30,
        message=f"broker {failover.victim} back in the ISR of {topics}",
    )
    view = _metadata(cluster, topics)
    assert all(v.leader not in (-1, failover.victim) and v.error == ErrorCode.none for v in view.values()), view
    cluster.wait_until(
        lambda: all(len({_log_bytes(cluster, b, t) for b in (1, 2, 3)}) == 1 for t in topics),
        timeout_s=20,
        message="every replica's log identical",
    )


def test_acks_all_does_not_wait_out_the_followers_long_poll(cluster: LocalCluster) -> None:
    """Kafka completes the followers' delayed fetches when the leader appends, so an acks=all
    produce to three in-sync replicas takes about one fetch round trip, not replica.fetch.wait.max.ms."""
    topic = "acks-all-latency"
    _create_topic(cluster, topic, [1, 2, 3], {"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
    latencies_ms: list[float] = []
    for i in range(10):
        acked: list[bytes] = []
        started = time.monotonic()
        producer.produce(topic, b"%d" % i, partition=0, on_delivery=_collect_into(acked))
        producer.flush(10)
        latencies_ms.append((time.monotonic() - started) * 1000)
        assert acked == [b"%d" % i]
    median = statistics.median(latencies_ms)
    print(f"acks=all to 3 replicas: median {median:.0f} ms, max {max(latencies_ms):.0f} ms")
    assert median < 150, f"median acks=all latency {median:.0f} ms ({[round(x) for x in latencies_ms]})"


# --- unclean leader election ----------------------------------------------------------------


class UncleanLeaderNotElected(AssertionError):
    """The controller left the partition offline after unclean election was enabled."""


def _collect_into(sink: list[bytes]) -> Callable[[Any, Any], None]:
    """A delivery callback appending the value of every acknowledged record to ``sink``."""

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            sink.append(msg.value())

    return on_delivery


def _produce(bootstrap: str, topic: str, values: list[bytes], acks: str, timeout_ms: int = 10_000) -> list[bytes]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "message.timeout.ms": timeout_ms}
    )
    acked: list[bytes] = []
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=_collect_into(acked))
    producer.flush(15)
    return acked


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of partition 0, from offset 0 to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 20
        while (not out or out[-1][0] < high - 1) and high > 0 and time.monotonic() < deadline:
            batch: list[Any] = consumer.consume(500, 0.5)
            for m in batch:
                if m.error() is None:
                    out.append((m.offset(), m.value()))
        return [v for _, v in out]
    finally:
        consumer.close()


@dataclass
class OutOfSync:
    """A partition [a, b] whose ISR shrank to [a], then a killed and b resumed."""

    topic: str
    a: int
    b: int
    committed: list[bytes]
    leader_only: list[bytes]
    """Acknowledged (acks=1) by a while b was paused: records b never got."""


def _shrink_isr_then_kill_leader(cluster: LocalCluster, topic: str, a: int, b: int) -> OutOfSync:
    """Records in sync, then b paused while a takes acks=1 writes until the ISR (state znode) is
    [a], then a killed with SIGKILL and b resumed."""
    committed = _produce(cluster.bootstrap_servers, topic, [b"committed-%d" % i for i in range(20)], "all")
    assert len(committed) == 20
    cluster.wait_until(
        lambda: _log_bytes(cluster, a, topic) == _log_bytes(cluster, b, topic), timeout_s=10, message="b caught up"
    )
    producer = Producer(
        {"bootstrap.servers": cluster.broker(a).bootstrap_servers, "acks": "1", "message.timeout.ms": 5000}
    )
    leader_only: list[bytes] = []
    sent = [0]

    def write_one_and_check_isr() -> bool:
        producer.produce(
            topic,
            b"leader-only-%d" % sent[0],
            partition=0,
            on_delivery=_collect_into(leader_only),
        )
        sent[0] += 1
        producer.poll(0)
        return bool(_state_znode(cluster, topic).get("isr") == [a])

    cluster.sigstop(b)
    try:
        cluster.wait_until(write_one_and_check_isr, timeout_s=15, interval_s=0.1, message=f"ISR of {topic} shrunk")
        producer.flush(5)
        cluster.kill9(a)
    finally:
        cluster.sigcont(b)
    assert leader_only, "a acknowledged nothing while b was paused"
    return OutOfSync(topic, a, b, committed, leader_only)


def _assert_lost_the_leaders_tail(stored: list[bytes], out: OutOfSync) -> None:
    """b's log after its unclean election: every record committed while both were in sync, then
    at most what a fetch already under way when b was paused carried; the rest of what a alone
    acknowledged is gone."""
    assert stored[: len(out.committed)] == out.committed
    tail = stored[len(out.committed) :]
    assert tail == out.leader_only[: len(tail)], "b holds records a never acknowledged in that order"
    assert len(tail) < len(out.leader_only), f"b holds all {len(out.leader_only)} records a acknowledged alone"


@pytest.fixture(scope="module")
def offline(cluster: LocalCluster) -> Iterator[OutOfSync]:
    """A topic [a, b] (neither the controller) with unclean
    election off, left offline; a is restarted at the end."""
    controller = _controller_id(cluster)
    a, b = (x for x in (1, 2, 3) if x != controller)
    topic = "unclean-topic"
    _create_topic(cluster, topic, [a, b], {UNCLEAN: "false", "min.insync.replicas": "1"})
    try:
        yield _shrink_isr_then_kill_leader(cluster, topic, a, b)
    finally:
        if not cluster.broker(a).alive():
            cluster.restart(a)
        cluster.wait_until(
            lambda: (v := _partition(cluster, topic)) is not None and v.isr == sorted([a, b]),
            timeout_s=30,
            message=f"{topic} back in sync after broker {a} restarted",
        )


def test_an_out_of_sync_replica_is_not_elected_while_unclean_election_is_off(
    cluster: LocalCluster, offline: OutOfSync
) -> None:
    a, b, topic = offline.a, offline.b, offline.topic
    cluster.wait_until(
        lambda: _state_znode(cluster, topic).get("leader") == -1,
        timeout_s=20,
        message=f"the controller marking {topic} offline after broker {a}'s session expired",
    )
    state = _state_znode(cluster, topic)
    assert state["isr"] == [a], state  # the last ISR is kept, as Kafka does
    assert cluster.read_znode(f"/brokers/ids/{b}") is not None, f"broker {b} is not registered"
    view = _partition(cluster, topic)
    assert view is not None and view.leader == -1 and view.error == ErrorCode.leader_not_available, view
    _holds_for(lambda: (v := _partition(cluster, topic)) is not None and v.leader == -1, 3.0)
    assert _state_znode(cluster, topic)["leader"] == -1
    refused = _produce(cluster.broker(b).bootstrap_servers, topic, [b"while-offline"], "1", timeout_ms=2000)
    assert refused == [], "a write was acknowledged while the partition had no leader"


def test_enabling_unclean_election_on_the_topic_elects_the_out_of_sync_replica(
    cluster: LocalCluster, offline: OutOfSync
) -> None:
    b, topic = offline.b, offline.topic
    assert _state_znode(cluster, topic).get("leader") == -1, "precondition: the partition is offline"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(UNCLEAN, "true", incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    (configs,) = (f.result(15) for f in described.values())
    assert configs[UNCLEAN].value == "true"
    overrides = cluster.read_znode(f"/config/topics/{topic}")
    assert overrides is not None and json.loads(overrides)["config"][UNCLEAN] == "true"
    try:
        cluster.wait_until(
            lambda: (v := _partition(cluster, topic)) is not None and v.leader == b,
            timeout_s=10,
            message=f"broker {b} elected leader of {topic} after {UNCLEAN}=true",
        )
    except AssertionError as exc:
        raise UncleanLeaderNotElected(str(exc)) from exc
    state = _state_znode(cluster, topic)
    assert state["leader"] == b and state["isr"] == [b], state
    _assert_lost_the_leaders_tail(_read_all(cluster.broker(b).bootstrap_servers, topic), offline)


def test_broker_setting_elects_the_out_of_sync_replica(
    odradek_cluster_module: Callable[..., LocalCluster], zookeeper_server: ZooKeeperServer
) -> None:
    """unclean.leader.election.enable=true on the brokers: b leads as soon as a's session expires,
    with the records a alone had acknowledged lost."""
    small = odradek_cluster_module(2, zookeeper_connect=zookeeper_server.chroot_connect(), overrides={UNCLEAN: "true"})
    b = small.wait_until(lambda: _controller_id(small), timeout_s=15, message="a controller")
    a = 3 - b  # b, the controller, stays registered while paused (shorter than its session)
    topic = "unclean-broker-default"
    _create_topic(small, topic, [a, b], {"min.insync.replicas": "1"})
    out = _shrink_isr_then_kill_leader(small, topic, a, b)
    small.wait_until(
        lambda: (v := _partition(small, topic)) is not None and v.leader == b,
        timeout_s=20,
        message=f"broker {b} elected after broker {a}'s session expired",
    )
    state = _state_znode(small, topic)
    assert state["leader"] == b and state["isr"] == [b], state
    log = Path(small.broker(b).log_path).read_text(errors="replace")
    assert "unclean leader election" in log
    _assert_lost_the_leaders_tail(_read_all(small.broker(b).bootstrap_servers, topic), out)
    after = _produce(small.bootstrap_servers, topic, [b"after-unclean"], "all")
    assert after == [b"after-unclean"]
