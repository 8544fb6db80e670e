"""ShareFetch and ShareAcknowledge on the wire (KIP-932), one broker: share sessions and their
epochs, members acquiring disjoint records, acknowledgements settling only a member's own records
(INVALID_RECORD_STATE otherwise), RELEASE redelivering with a higher delivery count, REJECT never,
locks running out, the delivery-count limit archiving, and a fetch waiting for an append."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from odradek.client.connection import KafkaConnection
from odradek.errors import ErrorCode
from odradek.testing import BrokerRunner

from .admin_support import create
from .share_wire import acquired_offsets, partitions, share_acknowledge, share_fetch, topic_id

LOCK_MS = 1500
LIMIT = 3
OVERRIDES = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": str(LIMIT),
}
ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(str(tmp_path_factory.mktemp("sharefetch")), OVERRIDES).start()
    try:
        yield runner
    finally:
        runner.stop()


def _produce(broker: BrokerRunner, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=0)
        producer.poll(0)
    assert producer.flush(15) == 0


def _run(broker: BrokerRunner, coro_fn):  # type: ignore[no-untyped-def]
    host, port = broker.bootstrap_servers.split(":")

    async def go():  # type: ignore[no-untyped-def]
        async with KafkaConnection(host, int(port)) as a, KafkaConnection(host, int(port)) as b:
            return await coro_fn(a, b)

    return asyncio.run(go())


def _topic(broker: BrokerRunner) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    create(broker, name)
    return name


def test_a_share_session_opens_continues_and_closes_with_kafkas_errors(broker: BrokerRunner) -> None:
    topic = _topic(broker)

    async def go(conn: KafkaConnection, _: KafkaConnection) -> None:
        tid = await topic_id(conn, topic)
        missing = await share_fetch(conn, "g-session", "m1", 1, tid)
        assert missing.error_code == ErrorCode.share_session_not_found
        ack_open = await share_acknowledge(conn, "g-session", "m1", 0, tid, {0: [(0, 0, [ACCEPT])]})
        assert ack_open.error_code == ErrorCode.invalid_share_session_epoch
        opened = await share_fetch(conn, "g-session", "m1", 0, tid)
        assert opened.error_code == ErrorCode.none
        assert list(partitions(opened)) == [0]  # a new session answers every partition
        assert opened.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
        wrong = await share_fetch(conn, "g-session", "m1", 5, tid)
        assert wrong.error_code == ErrorCode.invalid_share_session_epoch
        again = await share_fetch(conn, "g-session", "m1", 1, tid)
        assert again.error_code == ErrorCode.none and partitions(again) == {}  # nothing new: nothing listed
        fetch_close = await share_fetch(conn, "g-session", "m1", -1, tid)
        assert fetch_close.error_code == ErrorCode.invalid_request  # closing cannot fetch
        closed = await share_acknowledge(conn, "g-session", "m1", -1, tid, {})
        assert closed.error_code == ErrorCode.none
        after = await share_fetch(conn, "g-session", "m1", 2, tid)
        assert after.error_code == ErrorCode.share_session_not_found
        unknown = await share_fetch(conn, "g-session", "m2", 0, uuid.uuid4())
        [part] = partitions(unknown).values()
        assert part.error_code == ErrorCode.unknown_topic_id

    _run(broker, go)


def test_members_acquire_disjoint_records_and_settle_only_their_own(broker: BrokerRunner) -> None:
    topic = _topic(broker)

    async def go(a: KafkaConnection, b: KafkaConnection) -> None:
        tid = await topic_id(a, topic)
        await share_fetch(a, "g-two", "ma", 0, tid)  # places the share-partition at the end (latest)
        await share_fetch(b, "g-two", "mb", 0, tid)
        await asyncio.to_thread(_produce, broker, topic, 10)
        first = await share_fetch(a, "g-two", "ma", 1, tid, max_records=4, acquire_mode=1)
        got_a = acquired_offsets(partitions(first)[0])
        got_b = acquired_offsets(partitions(await share_fetch(b, "g-two", "mb", 1, tid, max_records=100))[0])
        assert set(got_a) == {0, 1, 2, 3} and set(got_b) == set(range(4, 10))
        assert set(got_a.values()) == {1} == set(got_b.values())
        stolen = await share_acknowledge(b, "g-two", "mb", 2, tid, {0: [(0, 1, [ACCEPT])]})
        [part] = partitions(stolen).values()
        assert part.error_code == ErrorCode.invalid_record_state
        mine = await share_acknowledge(a, "g-two", "ma", 2, tid, {0: [(0, 3, [ACCEPT, ACCEPT, RELEASE, REJECT])]})
        assert partitions(mine)[0].error_code == ErrorCode.none
        # offset 2 was released: b, still holding 4..9, gets it again with delivery count 2
        again = acquired_offsets(partitions(await share_fetch(b, "g-two", "mb", 3, tid, max_wait_ms=2000))[0])
        assert again == {2: 2}
        # acknowledgements piggybacked on a fetch answer as acknowledge_error_code
        done = await share_fetch(b, "g-two", "mb", 4, tid, acks={0: [(2, 2, [ACCEPT]), (4, 9, [ACCEPT])]})
        assert partitions(done)[0].acknowledge_error_code == ErrorCode.none
        # nothing left: 0,1,2,4..9 accepted, 3 rejected (never delivered again)
        empty = await share_fetch(a, "g-two", "ma", 3, tid, max_wait_ms=300)
        assert acquired_offsets(partitions(empty).get(0)) == {} if partitions(empty) else True

    _run(broker, go)


def test_locks_run_out_and_the_delivery_limit_archives(broker: BrokerRunner) -> None:
    topic = _topic(broker)

    async def go(a: KafkaConnection, b: KafkaConnection) -> None:
        tid = await topic_id(a, topic)
        await share_fetch(a, "g-lock", "ma", 0, tid)
        await share_fetch(b, "g-lock", "mb", 0, tid)
        await asyncio.to_thread(_produce, broker, topic, 1)
        first = acquired_offsets(partitions(await share_fetch(a, "g-lock", "ma", 1, tid, max_wait_ms=2000))[0])
        assert first == {0: 1}
        # a holds the lock: b gets nothing until it runs out, then the record with count 2
        t0 = time.monotonic()
        second = acquired_offsets(partitions(await share_fetch(b, "g-lock", "mb", 1, tid, max_wait_ms=5000))[0])
        waited = time.monotonic() - t0
        assert second == {0: 2} and waited >= LOCK_MS / 1000 * 0.5
        # the lock ran out: a's acknowledgement is refused
        late = await share_acknowledge(a, "g-lock", "ma", 2, tid, {0: [(0, 0, [ACCEPT])]})
        assert partitions(late)[0].error_code == ErrorCode.invalid_record_state
        released = await share_fetch(b, "g-lock", "mb", 2, tid, acks={0: [(0, 0, [RELEASE])]}, max_wait_ms=2000)
        assert partitions(released)[0].acknowledge_error_code == ErrorCode.none
        assert acquired_offsets(partitions(released)[0]) == {0: 3}  # delivered a third (the last) time
        final = await share_fetch(b, "g-lock", "mb", 3, tid, acks={0: [(0, 0, [RELEASE])]}, max_wait_ms=500)
        assert acquired_offsets(partitions(final)[0]) == {}  # at the limit a release archives it

    _run(broker, go)


def test_a_fetch_waits_for_an_append(broker: BrokerRunner) -> None:
    topic = _topic(broker)

    async def go(a: KafkaConnection, _: KafkaConnection) -> None:
        tid = await topic_id(a, topic)
        await share_fetch(a, "g-wait", "ma", 0, tid)

        async def later() -> None:
            await asyncio.sleep(0.5)
            await asyncio.to_thread(_produce, broker, topic, 3)

        t0 = time.monotonic()
        producing = asyncio.ensure_future(later())
        answer = await share_fetch(a, "g-wait", "ma", 1, tid, max_wait_ms=10_000)
        await producing
        assert set(acquired_offsets(partitions(answer)[0])) <= {0, 1, 2}
        assert 0 in acquired_offsets(partitions(answer)[0])
        assert time.monotonic() - t0 < 8

    _run(broker, go)


def _group_configs(broker: BrokerRunner, group: str, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]
    ).values():
        future.result(15)


def test_earliest_and_read_committed_from_the_groups_configs(broker: BrokerRunner) -> None:
    topic = _topic(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"aborted{i}".encode(), partition=0)
    assert producer.flush(15) == 0  # written: an abort drops what it has not sent
    producer.abort_transaction(15)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, f"committed{i}".encode(), partition=0)
    producer.commit_transaction(15)
    _group_configs(broker, "g-rc", share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    _group_configs(broker, "g-ru", share_auto_offset_reset="earliest")

    async def collect(conn: KafkaConnection, group: str, tid: uuid.UUID) -> set[int]:
        """Every offset delivered to one member, accepting as it goes, until 4 and 5 (the
        committed records) came or 5 s passed (the commit marker is written after the commit)."""
        got: set[int] = set()
        epoch, acks = 0, {}
        deadline = time.monotonic() + 5
        while not {4, 5} <= got and time.monotonic() < deadline:
            answer = await share_fetch(conn, group, "m", epoch, tid, acks=acks, max_wait_ms=500)
            new = acquired_offsets(partitions(answer)[0]) if 0 in partitions(answer) else {}
            got |= set(new)
            acks = {0: [(o, o, [ACCEPT]) for o in sorted(new)]} if new else {}
            epoch += 1
        return got

    async def go(a: KafkaConnection, b: KafkaConnection) -> None:
        tid = await topic_id(a, topic)
        # the log: 0-2 aborted, 3 abort marker, 4-5 committed, 6 commit marker
        got_rc, got_ru = await collect(a, "g-rc", tid), await collect(b, "g-ru", tid)
        assert {0, 1, 2}.isdisjoint(got_rc) and {4, 5} <= got_rc
        assert {0, 1, 2, 4, 5} <= got_ru

    _run(broker, go)


def test_records_deleted_below_the_window_move_the_start_offset(broker: BrokerRunner) -> None:
    from confluent_kafka import TopicPartition as TP
    from confluent_kafka.admin import AdminClient

    topic = _topic(broker)
    _produce(broker, topic, 10)
    _group_configs(broker, "g-deleted", share_auto_offset_reset="earliest")

    async def first(a: KafkaConnection, _: KafkaConnection) -> None:
        tid = await topic_id(a, topic)
        got = acquired_offsets(
            partitions(await share_fetch(a, "g-deleted", "m", 0, tid, max_records=2, acquire_mode=1))[0]
        )
        assert got == {0: 1, 1: 1}
        await share_acknowledge(a, "g-deleted", "m", -1, tid, {})  # closes: 0 and 1 go back

    _run(broker, first)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.delete_records([TP(topic, 0, 6)]).values():
        future.result(15)

    async def after(a: KafkaConnection, _: KafkaConnection) -> None:
        tid = await topic_id(a, topic)
        got = acquired_offsets(partitions(await share_fetch(a, "g-deleted", "m", 0, tid, max_wait_ms=2000))[0])
        assert set(got) == {6, 7, 8, 9}  # offsets 0-5 are gone from the log: the window starts at 6

    _run(broker, after)
