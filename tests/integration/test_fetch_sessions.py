"""Fetch sessions (KIP-227) on a real broker: raw Fetch requests over a socket (full, incremental,
forgotten partitions, the session errors, by name and by topic id) and the installed clients.

kafka-python 3.0 opens sessions (its ``FetchSessionHandler``, on by default); librdkafka
(confluent-kafka) and aiokafka send every Fetch sessionless (session 0, epoch -1), which the
broker must keep answering in full without caching anything.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.fetch_session import FetchSessionCache
from odradek.testing import BrokerRunner

TOPIC = "sessions"
PARTITIONS = 3


@pytest.fixture
def broker(odradek_broker_factory: Callable[..., BrokerRunner]) -> Iterator[BrokerRunner]:
    runner = odradek_broker_factory(overrides={"num.partitions": str(PARTITIONS)})
    admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    yield runner


def _cache(runner: BrokerRunner) -> FetchSessionCache:
    assert runner.broker is not None
    return runner.broker.fetch_manager.cache


def _on_loop(runner: BrokerRunner, read: Callable[[], Any]) -> Any:
    """``read()`` on the broker's event loop (the cache is the loop's)."""
    assert runner.loop is not None

    async def call() -> Any:
        return read()

    return asyncio.run_coroutine_threadsafe(call(), runner.loop).result(10)


def _drop_session(runner: BrokerRunner, session_id: int) -> None:
    for shard in _cache(runner).shards:
        shard.remove(session_id)


def _produce(bootstrap: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(count):
        producer.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0


class RawFetcher:
    """Fetch requests of one version built by hand (kio classes) on one connection."""

    def __init__(
        self, conn: KafkaConnection, version: int, topic_id: uuid.UUID | None = None, replica_id: int = -1
    ) -> None:
        self.conn = conn
        self.rb = conn.builder(ApiKey.FETCH, version, version)
        self.version = version
        self.topic_id = topic_id
        self.replica_id = replica_id

    async def fetch(
        self,
        session_id: int,
        epoch: int,
        partitions: dict[int, int],
        forgotten: tuple[int, ...] = (),
        max_wait_ms: int = 100,
    ) -> Any:
        rb = self.rb
        named: dict[str, Any] = {"topic_id": self.topic_id} if self.version >= 13 else {"topic": TOPIC}
        topics = (
            (
                rb.make(
                    "FetchTopic",
                    partitions=tuple(
                        rb.make(
                            "FetchPartition",
                            partition=p,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                        for p, offset in partitions.items()
                    ),
                    **named,
                ),
            )
            if partitions
            else ()
        )
        forgotten_data = (rb.make("ForgottenTopic", partitions=forgotten, **named),) if forgotten else ()
        request = rb(
            cluster_id=None,
            replica_id=self.replica_id,
            max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=1,
            max_bytes=1 << 24,
            isolation_level=0,
            session_id=session_id,
            session_epoch=epoch,
            topics=topics,
            forgotten_topics_data=forgotten_data,
            rack_id="",
        )
        return await self.conn.send(request)


def _answered(response: Any) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, record bytes) of a response's partitions."""
    return {
        int(p.partition_index): (int(p.error_code), int(p.high_watermark), len(p.records or b""))
        for t in response.responses
        for p in t.partitions
    }


def test_incremental_answers_carry_only_changed_partitions(broker: BrokerRunner) -> None:
    async def run() -> None:
        async with KafkaConnection("127.0.0.1", broker.port, request_timeout_ms=10000) as conn:
            f = RawFetcher(conn, 12)
            full = await f.fetch(0, 0, dict.fromkeys(range(PARTITIONS), 0))
            assert full.error_code == 0 and full.session_id != 0
            assert _answered(full) == dict.fromkeys(range(PARTITIONS), (0, 0, 0))
            sid = full.session_id
            assert _on_loop(broker, lambda: (_cache(broker).size, _cache(broker).total_partitions)) == (1, 3)

            started = time.monotonic()
            idle = await f.fetch(sid, 1, {}, max_wait_ms=300)  # nothing changed: long poll, nothing answered
            assert (idle.error_code, idle.session_id, _answered(idle)) == (0, sid, {})
            assert time.monotonic() - started >= 0.25

            _produce(broker.bootstrap_servers, 1, 3)
            grown = await f.fetch(sid, 2, {})
            ((p, (error, hw, size)),) = _answered(grown).items()
            assert (p, error, hw) == (1, 0, 3) and size > 0
            again = await f.fetch(sid, 3, {})  # the cached fetch offset is still 0: the records again
            assert list(_answered(again)) == [1]
            caught_up = await f.fetch(sid, 4, {1: 3})  # named at its new offset: nothing new anywhere
            assert _answered(caught_up) == {}

            _produce(broker.bootstrap_servers, 2, 1)
            forgot = await f.fetch(sid, 5, {}, forgotten=(2,))  # p2 has news but left the session
            assert _answered(forgot) == {}
            assert _on_loop(broker, lambda: _cache(broker).total_partitions) == 2
            readded = await f.fetch(sid, 6, {2: 0})
            assert _answered(readded) == {2: (0, 1, _answered(readded)[2][2])}

            # session errors: no partitions, session id 0
            for sid_, epoch, code in ((sid, 99, ErrorCode.invalid_fetch_session_epoch), (sid + 1, 1, 70)):
                bad = await f.fetch(sid_, epoch, {0: 0})
                assert (bad.error_code, bad.session_id, _answered(bad)) == (code, 0, {})
            by_id = await RawFetcher(conn, 13, uuid.uuid4()).fetch(sid, 7, {})
            assert (by_id.error_code, by_id.session_id) == (ErrorCode.fetch_session_topic_id_error, 0)
            # the epoch did not move on with the errors: epoch 7 still works; then epoch -1 closes
            assert (await f.fetch(sid, 7, {})).error_code == 0
            closed = await f.fetch(sid, -1, {0: 0, 1: 3})
            assert (closed.error_code, closed.session_id) == (0, 0) and set(_answered(closed)) == {0, 1}
            gone = await f.fetch(sid, 8, {})
            assert gone.error_code == ErrorCode.fetch_session_id_not_found
            sessionless = await f.fetch(0, -1, {0: 0})
            assert (sessionless.session_id, list(_answered(sessionless))) == (0, [0])
            assert _on_loop(broker, lambda: _cache(broker).size) == 0

    asyncio.run(run())


def test_sessions_by_topic_id(broker: BrokerRunner) -> None:
    assert broker.broker is not None
    topic_id = _on_loop(broker, lambda: broker.broker.metadata_cache.topics[TOPIC].topic_id)  # type: ignore[union-attr]

    async def run() -> None:
        async with KafkaConnection("127.0.0.1", broker.port, request_timeout_ms=10000) as conn:
            f = RawFetcher(conn, 13, topic_id)
            full = await f.fetch(0, 0, {0: 0, 1: 0})
            assert full.session_id != 0 and full.responses[0].topic_id == topic_id
            _produce(broker.bootstrap_servers, 0, 2)
            inc = await f.fetch(full.session_id, 1, {}, forgotten=(1,))
            assert [t.topic_id for t in inc.responses] == [topic_id] and list(_answered(inc)) == [0]
            stranger = uuid.uuid4()
            unknown = await RawFetcher(conn, 13, stranger).fetch(full.session_id, 2, {0: 0})
            # an unknown topic id joins the session and is answered UNKNOWN_TOPIC_ID at once (with
            # the known partition 0, whose cached fetch offset 0 still has records)
            assert {(t.topic_id, p.error_code) for t in unknown.responses for p in t.partitions} == {
                (topic_id, ErrorCode.none),
                (stranger, ErrorCode.unknown_topic_id),
            }
            by_name = await RawFetcher(conn, 12).fetch(full.session_id, 3, {})
            assert by_name.error_code == ErrorCode.fetch_session_topic_id_error

    asyncio.run(run())


def test_a_full_cache_refuses_consumers_and_makes_room_for_a_follower(
    odradek_broker_factory: Callable[..., BrokerRunner],
) -> None:
    runner = odradek_broker_factory(
        overrides={"max.incremental.fetch.session.cache.slots": "8", "metrics.listener": "http://127.0.0.1:0"}
    )
    admin = AdminClient({"bootstrap.servers": runner.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)

    async def run() -> list[int]:
        async with KafkaConnection("127.0.0.1", runner.port, request_timeout_ms=10000) as conn:
            consumer, follower = RawFetcher(conn, 12), RawFetcher(conn, 12, replica_id=7)
            ids = [(await consumer.fetch(0, 0, {0: 0}, max_wait_ms=0)).session_id for _ in range(9)]
            ids.append((await follower.fetch(0, 0, {0: 0}, max_wait_ms=0)).session_id)
            return ids

    ids = asyncio.run(run())
    # one slot per shard: 8 consumers' sessions, the 9th refused (session id 0, a full answer),
    # then the follower's session evicts a consumer's (the shards' turn came back to the first)
    assert all(ids[:8]) and ids[8] == 0 and ids[9] != 0
    assert runner.broker is not None and runner.broker.metrics.bound is not None
    host, port = runner.broker.metrics.bound
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5).read().decode()
    values = {
        name: float(value)
        for name, _, value in (line.partition(" ") for line in text.splitlines())
        if name.startswith("kafka_server_fetchsessioncache_")
    }
    assert values == {
        "kafka_server_fetchsessioncache_numincrementalfetchsessions": 8,
        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached": 8,
        "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total": 1,
    }


def test_kafka_python_consumes_in_a_session(broker: BrokerRunner) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    consumer.assign([KTopicPartition(TOPIC, p) for p in range(PARTITIONS)])

    def sessions() -> list[tuple[int, bool, int, int]]:
        found: list[tuple[int, bool, int, int]] = _on_loop(
            broker, lambda: [(s.id, s.privileged, len(s.partitions), s.epoch) for s in _cache(broker).sessions()]
        )
        return found

    try:
        got: list[tuple[int, bytes]] = []
        first = None
        for round_ in range(4):
            if round_ == 2:  # the broker loses the session: FETCH_SESSION_ID_NOT_FOUND, then a full fetch
                ((first, privileged, partitions, epoch),) = sessions()
                assert (privileged, partitions) == (False, PARTITIONS) and epoch >= 2
                _on_loop(broker, functools.partial(_drop_session, broker, first))
            _produce(broker.bootstrap_servers, round_ % PARTITIONS, 20)
            deadline = time.monotonic() + 20
            while len(got) < 20 * (round_ + 1) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend((r.partition, r.value) for r in records)
            assert len(got) == 20 * (round_ + 1)
        assert [v for p, v in got if p == 1] == [b"v%d" % i for i in range(20)]
        assert sorted(v for p, v in got if p == 0) == sorted([b"v%d" % i for i in range(20)] * 2)
        ((second, privileged, partitions, _epoch),) = sessions()
        assert second != first and (privileged, partitions) == (False, PARTITIONS)
    finally:
        consumer.close()


def test_sessionless_clients_leave_the_cache_empty(broker: BrokerRunner) -> None:
    """librdkafka and aiokafka never open a session; their fetches are answered in full."""
    _produce(broker.bootstrap_servers, 0, 10)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    try:
        got = 0
        deadline = time.monotonic() + 30
        while got < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == 10
    finally:
        consumer.close()

    async def aiokafka_consume() -> int:
        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest")
        await c.start()
        try:
            batches = await c.getmany(timeout_ms=5000)
            return sum(len(v) for v in batches.values())
        finally:
            await c.stop()

    assert asyncio.run(aiokafka_consume()) == 10
    assert _on_loop(broker, lambda: _cache(broker).size) == 0
