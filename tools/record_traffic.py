"""Record real Kafka client request frames, as sent on the wire, for the protocol fuzzer's corpus.

Run from the repository root:

    .venv/bin/python tools/record_traffic.py              # record every client, then write README.md
    .venv/bin/python tools/record_traffic.py --clients aiokafka
    .venv/bin/python tools/record_traffic.py --summary    # only rewrite README.md from the .bin files

How it records: an odradek broker runs in this process (:class:`odradek.server.runner.BrokerRunner`,
temporary data dir) listening on a free 127.0.0.1 port, with ``advertised.listeners`` set to the port
of a small asyncio TCP proxy, also on 127.0.0.1. Clients bootstrap through the proxy and every
address the broker hands out (Metadata, FindCoordinator) is the proxy's, so every connection a
client opens passes through it. The proxy forwards bytes unchanged in both directions and cuts the
client-to-broker stream into complete request frames. Each client library (confluent-kafka,
kafka-python, aiokafka) runs its own workload against its own topics and groups, one after the
other, and its frames go to its own file. kafka-python also runs short passes pinned to older
broker versions (``api_version=``), so its file holds older request versions as well.
``odradek_tokens`` is odradek's own client sending the delegation token APIs, which none of
those clients has.

Output format, ``<out>/<client>.bin``: a plain concatenation of records, with no file header.
Each record is a 4-byte big-endian unsigned length ``L`` followed by ``L`` bytes: one request frame
exactly as the client sent it, so the frame starts with its own 4-byte big-endian size prefix
(``L == 4 + size``), then the request header and body. Records are grouped by connection in
the order the connections were opened, and keep the client's order within a connection.

Kept frames: frames identical except for the correlation id are stored once; at least one frame
of every (api_key, api_version) the client sent is kept; beyond that frames are taken round-robin
across (api_key, api_version) until the file would pass ``--max-bytes`` (2 MB by default).
``<out>/README.md`` lists, per file, every (API, version, frame count) and the file's size.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import pathlib
import random
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kio.schema.index import api_key_map

from odradek.cli.cluster import free_port
from odradek.server.runner import BrokerRunner

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "data" / "client_frames"
CLIENTS = ("confluent_kafka", "kafka_python", "aiokafka", "odradek_tokens")
MAX_FILE_BYTES = 2_000_000
HOST = "127.0.0.1"

log = logging.getLogger("record_traffic")
_U32 = struct.Struct(">I")


# --------------------------------------------------------------------------------------------
# The recording proxy


@dataclass
class RecordedConnection:
    """The request frames one client connection sent, in order."""

    label: str
    index: int
    frames: list[bytes] = field(default_factory=list)


class RecordingProxy:
    """A TCP proxy on 127.0.0.1 that records every complete request frame per connection.

    Runs its own event loop on a background thread. ``label`` (set from the calling thread between
    workloads) is stamped on each connection when it is accepted. Bytes are forwarded unchanged;
    a partial frame left when a connection closes is not recorded.
    """

    def __init__(self) -> None:
        self.label = "unlabelled"
        self.upstream: tuple[str, int] | None = None
        self.connections: list[RecordedConnection] = []
        self._active: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def start(self) -> int:
        """Bind a free port, start serving; return the port."""
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            self._server = loop.run_until_complete(asyncio.start_server(self._accept, HOST, 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="recording-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("proxy did not start")
        return self.port

    @property
    def active_connections(self) -> int:
        return len(self._active)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no proxied connection is open; True if that happened within ``timeout``."""
        deadline = time.monotonic() + timeout
        while self._active:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def close_all(self) -> None:
        """Close every open proxied connection (clients that linger past their workload)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._close_writers)

    def _close_writers(self) -> None:
        for writer in list(self._writers):
            writer.close()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            self._close_writers()
            for task in list(self._active):
                task.cancel()
            if self._active:
                await asyncio.wait(list(self._active), timeout=5)
            if self._server is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._server.wait_closed(), 2)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = None
        self._thread = None

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None and self.upstream is not None
        conn = RecordedConnection(self.label, len(self.connections))
        self.connections.append(conn)
        self._active.add(task)
        self._writers.add(client_writer)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            self._writers.add(upstream_writer)
            pumps = [
                asyncio.create_task(self._requests(client_reader, upstream_writer, conn)),
                asyncio.create_task(self._forward(upstream_reader, client_writer)),
            ]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except OSError as exc:
            log.warning("proxy connection %d: %s", conn.index, exc)
        finally:
            for writer in (client_writer, upstream_writer):
                if writer is not None:
                    writer.close()
                    self._writers.discard(writer)
            self._active.discard(task)

    @staticmethod
    async def _requests(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: RecordedConnection) -> None:
        buf = bytearray()
        while True:
            try:
                chunk = await reader.read(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 4:
                (size,) = _U32.unpack_from(buf, 0)
                if len(buf) < 4 + size:
                    break
                conn.frames.append(bytes(buf[: 4 + size]))
                del buf[: 4 + size]
            writer.write(chunk)
            try:
                await writer.drain()
            except OSError:
                return

    @staticmethod
    async def _forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                chunk = await reader.read(65536)
            except OSError:
                return
            if not chunk:
                return
            writer.write(chunk)
            try:
                await writer.drain()
            except OSError:
                return


# --------------------------------------------------------------------------------------------
# Workloads, one per client library. Each step is logged; a failed step is reported and skipped.


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class Workload:
    """Shared helpers: a step runner that records failures and deterministic small payloads."""

    def __init__(self, client: str, bootstrap: str) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.prefix = client.replace("_", "-")
        self.rng = random.Random(client)
        self.failures: list[str] = []

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        except Exception as exc:
            self.failures.append(f"{self.client}: {name}: {type(exc).__name__}: {exc}")
            log.warning("%s: step %s failed: %s", self.client, name, exc)
            log.debug("%s", traceback.format_exc())
        else:
            log.info("%s: %s (%.1fs)", self.client, name, time.monotonic() - started)

    def value(self, tag: str, i: int) -> bytes:
        """100-500 bytes: a readable prefix then mixed text and random bytes."""
        size = self.rng.randint(100, 500)
        head = f"{self.client}:{tag}:{i}:".encode()
        body = bytes(self.rng.choice(b"abcdefghij") for _ in range(size // 2)) + self.rng.randbytes(size // 2)
        return (head + body)[:size]

    def key(self, i: int) -> bytes | None:
        return None if i % 7 == 0 else f"key-{i % 13}".encode()

    def headers(self, i: int) -> list[tuple[str, str | bytes | None]]:
        headers: list[tuple[str, str | bytes | None]] = [("seq", str(i).encode()), ("origin", self.client.encode())]
        return headers[: i % 3]  # none, one or two headers


def _wait_all(futures: dict[Any, Any], timeout: float = 20.0) -> dict[Any, Any]:
    return {k: f.result(timeout=timeout) for k, f in futures.items()}


def run_confluent_kafka(bootstrap: str) -> list[str]:
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    w = Workload("confluent_kafka", bootstrap)
    topic, extra = f"{w.prefix}-data", f"{w.prefix}-extra"
    group = f"{w.prefix}-group"
    base = {"bootstrap.servers": bootstrap}
    admin = AdminClient(dict(base))

    with w.step("metadata"):
        admin.list_topics(timeout=10)
    with w.step("create topics"):
        _wait_all(
            admin.create_topics(
                [
                    NewTopic(topic, num_partitions=3, replication_factor=1, config={"retention.ms": "86400000"}),
                    NewTopic(extra, num_partitions=1, replication_factor=1),
                ],
                operation_timeout=10,
            )
        )
    with w.step("describe topics and cluster"):
        _wait_all(admin.describe_topics(TopicCollection([topic, extra])))
        admin.describe_cluster().result(10)
    with w.step("describe configs"):
        _wait_all(admin.describe_configs([ConfigResource("topic", topic), ConfigResource("broker", "0")]))
    with w.step("alter configs and partitions"):
        entry = ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        _wait_all(admin.incremental_alter_configs([ConfigResource("topic", extra, incremental_configs=[entry])]))
        _wait_all(admin.create_partitions([NewPartitions(extra, 2)]))

    def produce(conf: dict[str, Any], tag: str, count: int) -> None:
        producer = Producer({**base, "linger.ms": 20, **conf})
        delivered: list[Any] = []
        for i in range(count):
            producer.produce(
                topic,
                value=w.value(tag, i),
                key=w.key(i),
                headers=w.headers(i) or None,
                partition=i % 3 if i % 4 else -1,
                on_delivery=lambda err, _msg: delivered.append(err),
            )
            if i % 10 == 9:
                producer.poll(0.05)  # several batches per codec, not one
        left = producer.flush(20)
        if left or any(err is not None for err in delivered):
            raise RuntimeError(f"{left} undelivered, errors {[e for e in delivered if e is not None][:3]}")

    for codec in CODECS:
        with w.step(f"produce compression={codec} acks=1"):
            produce({"compression.type": codec, "acks": "1"}, f"{codec}-a1", 40)
        with w.step(f"produce compression={codec} acks=all"):
            produce({"compression.type": codec, "acks": "all"}, f"{codec}-aall", 20)
    with w.step("produce idempotent"):
        produce({"enable.idempotence": True, "compression.type": "lz4"}, "idem", 40)
    with w.step("produce acks=0"):
        produce({"acks": "0"}, "a0", 10)

    with w.step("consume with group (subscribe, commit, committed)"):
        consumer = Consumer(
            {
                **base,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "heartbeat.interval.ms": 300,
                "session.timeout.ms": 6000,
            }
        )
        try:
            consumer.subscribe([topic])
            got = 0
            deadline = time.monotonic() + 20
            while got < 100 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got += 1
                    if got % 25 == 0:
                        consumer.commit(message=msg, asynchronous=False)
            consumer.commit(offsets=consumer.position(consumer.assignment()), asynchronous=False)
            parts = [TopicPartition(topic, p) for p in range(3)]
            consumer.committed(parts, timeout=10)
            with w.step("describe groups while a member is in the group"):
                admin.describe_consumer_groups([group])[group].result(10)
            end = time.monotonic() + 1.5  # a few heartbeats
            while time.monotonic() < end:
                consumer.poll(0.2)
            if got == 0:
                raise RuntimeError("no messages consumed")
        finally:
            consumer.close()

    with w.step("assign + seek, offsets_for_times, watermarks"):
        consumer = Consumer({**base, "group.id": f"{group}-manual", "enable.auto.commit": False})
        try:
            tps = [TopicPartition(topic, p, 0) for p in range(3)]
            consumer.assign(tps)
            consumer.poll(1.0)
            consumer.seek(TopicPartition(topic, 1, 5))
            for _ in range(5):
                consumer.poll(0.2)
            now_ms = int(time.time() * 1000)
            consumer.offsets_for_times([TopicPartition(topic, p, now_ms - 60_000) for p in range(3)], timeout=10)
            for p in range(3):
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            consumer.position(tps)
        finally:
            consumer.close()

    with w.step("list/describe groups, group offsets, list offsets"):
        admin.list_consumer_groups().result(10)
        admin.describe_consumer_groups([group])[group].result(10)
        _wait_all(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]))
        tp0 = TopicPartition(topic, 0)
        specs = {tp0: OffsetSpec.earliest(), TopicPartition(topic, 1): OffsetSpec.latest()}
        _wait_all(admin.list_offsets(specs))
        _wait_all(admin.list_offsets({tp0: OffsetSpec.max_timestamp()}))
    with w.step("transactions: commit with group offsets, abort, read_committed"):
        txn = Producer({**base, "transactional.id": f"{group}-tx"})
        reader = Consumer({**base, "group.id": f"{group}-tx", "isolation.level": "read_committed"})
        txn.init_transactions(20)
        txn.begin_transaction()
        for i in range(10):
            txn.produce(topic, w.value("tx", i), partition=i % 3)
        txn.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], reader.consumer_group_metadata(), 20)
        txn.commit_transaction(20)
        txn.begin_transaction()
        txn.produce(topic, w.value("tx-aborted", 0), partition=0)
        txn.flush(10)
        txn.abort_transaction(20)
        reader.assign([TopicPartition(topic, p, 0) for p in range(3)])
        for _ in range(5):
            reader.poll(0.2)
        reader.close()
        del txn
    with w.step("KIP-848 consumer group: heartbeats, commit, describe"):
        member = Consumer(
            {**base, "group.id": f"{group}-848", "group.protocol": "consumer", "auto.offset.reset": "earliest"}
        )
        member.subscribe([topic])
        polled = [member.poll(0.2) for _ in range(15)]
        if any(m is not None and m.error() is None for m in polled):
            member.commit(asynchronous=False)
        admin.describe_consumer_groups([f"{group}-848"])[f"{group}-848"].result(10)
        member.close()
    with w.step("KIP-932 share group: heartbeats, share fetch and acknowledge, group config"):
        from confluent_kafka import AcknowledgeType, ShareConsumer
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.GROUP, f"{group}-share", incremental_configs=[entry])
        _wait_all(admin.incremental_alter_configs([resource]))
        sharer = ShareConsumer({**base, "group.id": f"{group}-share", "share.acknowledgement.mode": "explicit"})
        sharer.subscribe([topic])
        deadline = time.monotonic() + 15
        kinds = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
        got = 0
        while time.monotonic() < deadline and got < 20:
            batch = [m for m in sharer.poll(0.5) or [] if m.error() is None]
            for i, m in enumerate(batch):
                sharer.acknowledge(m, kinds[i % 3])
            got += len(batch)
            if batch:
                sharer.commit_sync(10)
        sharer.close()
    with w.step("delete records, groups and topics"):
        _wait_all(admin.delete_records([TopicPartition(topic, 0, 3)]))
        _wait_all(admin.delete_consumer_groups([group]))
        _wait_all(admin.delete_topics([topic, extra], operation_timeout=10))
    del admin
    gc.collect()
    return w.failures


def run_kafka_python(bootstrap: str) -> list[str]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    w = Workload("kafka_python", bootstrap)
    topic, extra = f"{w.prefix}-data", f"{w.prefix}-extra"
    group = f"{w.prefix}-group"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        with w.step("create topics"):
            admin.create_topics(
                [
                    NewTopic(topic, num_partitions=3, replication_factor=1, topic_configs={"retention.ms": "86400000"}),
                    NewTopic(extra, num_partitions=1, replication_factor=1),
                ]
            )
        with w.step("list and describe topics, cluster"):
            admin.list_topics()
            admin.describe_topics([topic, extra])
            admin.describe_cluster()
        with w.step("describe configs"):
            admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic), ConfigResource(ConfigResourceType.BROKER, "0")]
            )
        with w.step("alter configs and partitions"):
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, extra, configs={"retention.ms": "7200000"})])
            admin.create_partitions({extra: NewPartitions(total_count=2)})

        def produce(tag: str, count: int, **conf: Any) -> None:
            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **conf)
            try:
                futures = []
                for i in range(count):
                    futures.append(
                        producer.send(
                            topic,
                            value=w.value(tag, i),
                            key=w.key(i),
                            headers=w.headers(i),
                            partition=i % 3 if i % 4 else None,
                        )
                    )
                    if i % 10 == 9:
                        producer.flush()
                producer.flush()
                for future in futures:
                    future.get(timeout=20)
            finally:
                producer.close(timeout=10)

        for codec in CODECS:
            compression = None if codec == "none" else codec
            with w.step(f"produce compression={codec} acks=1"):
                produce(f"{codec}-a1", 40, compression_type=compression, acks=1)
            with w.step(f"produce compression={codec} acks=all"):
                produce(f"{codec}-aall", 20, compression_type=compression, acks="all")
        with w.step("produce idempotent"):
            produce("idem", 40, enable_idempotence=True, acks="all", compression_type="gzip")

        with w.step("consume with group (subscribe, commit, committed)"):
            consumer = KafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                heartbeat_interval_ms=300,
                session_timeout_ms=6000,
            )
            try:
                got = 0
                deadline = time.monotonic() + 20
                while got < 100 and time.monotonic() < deadline:
                    batch = consumer.poll(timeout_ms=500)
                    got += sum(len(v) for v in batch.values())
                    if batch:
                        consumer.commit()
                tps = [TopicPartition(topic, p) for p in range(3)]
                for tp in tps:
                    consumer.committed(tp)
                end = time.monotonic() + 1.5
                while time.monotonic() < end:
                    consumer.poll(timeout_ms=200)
                if got == 0:
                    raise RuntimeError("no messages consumed")
            finally:
                consumer.close()

        with w.step("assign + seek, offsets_for_times, beginning/end offsets"):
            consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
            try:
                tps = [TopicPartition(topic, p) for p in range(3)]
                consumer.assign(tps)
                consumer.seek_to_beginning()
                consumer.poll(timeout_ms=1000)
                consumer.seek(tps[1], 5)
                consumer.poll(timeout_ms=500)
                now_ms = int(time.time() * 1000)
                consumer.offsets_for_times({tp: now_ms - 60_000 for tp in tps})
                consumer.beginning_offsets(tps)
                consumer.end_offsets(tps)
            finally:
                consumer.close()

        with w.step("list/describe groups, group offsets"):
            admin.list_groups()
            admin.describe_groups([group])
            admin.list_group_offsets({group: None})
        with w.step("transactions: commit, abort"):
            txn = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{group}-tx")
            try:
                txn.init_transactions()
                txn.begin_transaction()
                for i in range(10):
                    txn.send(topic, w.value("tx", i), partition=i % 3)
                txn.commit_transaction()
                txn.begin_transaction()
                txn.send(topic, w.value("tx-aborted", 0), partition=0)
                txn.flush()
                txn.abort_transaction()
            finally:
                txn.close()
        for version in PINNED_KAFKA_PYTHON_VERSIONS:
            with w.step(f"api_version={version}: produce, consume with group, commit, offsets"):
                _kafka_python_pinned(w, topic, version)
        with w.step("delete records, groups and topics"):
            admin.delete_records({TopicPartition(topic, 0): 3})
            admin.delete_groups([group])
            admin.delete_topics([topic, extra])
    finally:
        admin.close()
    return w.failures


PINNED_KAFKA_PYTHON_VERSIONS = ((0, 11), (1, 0), (2, 1), (2, 5))
"""Broker versions kafka-python is pinned to (``api_version=``) for a short extra pass each: it then
sends the older request versions those brokers knew (Produce v3, Fetch v5, Metadata v4, ...)."""


def _kafka_python_pinned(w: Workload, topic: str, version: tuple[int, int]) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    tag = "v" + "_".join(map(str, version))
    producer = KafkaProducer(bootstrap_servers=w.bootstrap, api_version=version, linger_ms=20, compression_type="gzip")
    try:
        futures = [
            producer.send(topic, value=w.value(tag, i), key=w.key(i), headers=w.headers(i), partition=i % 3)
            for i in range(12)
        ]
        producer.flush()
        for future in futures:
            future.get(timeout=20)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=w.bootstrap,
        api_version=version,
        group_id=f"{w.prefix}-group-{tag}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=300,
        session_timeout_ms=6000,
    )
    try:
        got = 0
        deadline = time.monotonic() + 15
        while got < 20 and time.monotonic() < deadline:
            got += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        consumer.commit()
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.committed(tps[0])
        consumer.end_offsets(tps)
        consumer.offsets_for_times({tps[0]: int(time.time() * 1000) - 60_000})
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            consumer.poll(timeout_ms=200)
        if got == 0:
            raise RuntimeError("no messages consumed")
    finally:
        consumer.close()


def run_aiokafka(bootstrap: str) -> list[str]:
    w = Workload("aiokafka", bootstrap)
    asyncio.run(_aiokafka_workload(w))
    return w.failures


async def _aiokafka_workload(w: Workload) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    bootstrap = w.bootstrap
    topic, extra = f"{w.prefix}-data", f"{w.prefix}-extra"
    group = f"{w.prefix}-group"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        with w.step("create topics"):
            await admin.create_topics(
                [
                    NewTopic(topic, num_partitions=3, replication_factor=1, topic_configs={"retention.ms": "86400000"}),
                    NewTopic(extra, num_partitions=1, replication_factor=1),
                ]
            )
        with w.step("list and describe topics, cluster"):
            await admin.list_topics()
            await admin.describe_topics([topic, extra])
            await admin.describe_cluster()
        with w.step("describe configs"):
            await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic), ConfigResource(ConfigResourceType.BROKER, "0")]
            )
        with w.step("alter configs and partitions"):
            await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, extra, configs={"retention.ms": "7200000"})]
            )
            await admin.create_partitions({extra: NewPartitions(total_count=2)})

        async def produce(tag: str, count: int, **conf: Any) -> None:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **conf)
            await producer.start()
            try:
                futures = []
                for i in range(count):
                    futures.append(
                        await producer.send(
                            topic,
                            value=w.value(tag, i),
                            key=w.key(i),
                            headers=w.headers(i),
                            partition=i % 3 if i % 4 else None,
                        )
                    )
                    if i % 10 == 9:
                        await producer.flush()
                await producer.flush()
                await asyncio.wait_for(asyncio.gather(*futures), 20)
            finally:
                await producer.stop()

        for codec in CODECS:
            compression = None if codec == "none" else codec
            with w.step(f"produce compression={codec} acks=1"):
                await produce(f"{codec}-a1", 40, compression_type=compression, acks=1)
            with w.step(f"produce compression={codec} acks=all"):
                await produce(f"{codec}-aall", 20, compression_type=compression, acks="all")
        with w.step("produce idempotent"):
            await produce("idem", 40, enable_idempotence=True, compression_type="snappy")

        with w.step("transactions: commit, abort"):
            txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{group}-tx")
            await txn.start()
            try:
                async with txn.transaction():
                    for i in range(10):
                        await txn.send(topic, w.value("tx", i), partition=i % 3)
                await txn.begin_transaction()
                await txn.send_and_wait(topic, w.value("tx-aborted", 0), partition=0)
                await txn.abort_transaction()
            finally:
                await txn.stop()

        with w.step("consume with group (subscribe, commit, committed)"):
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                heartbeat_interval_ms=300,
                session_timeout_ms=6000,
            )
            await consumer.start()
            try:
                got = 0
                deadline = time.monotonic() + 20
                while got < 100 and time.monotonic() < deadline:
                    batch = await consumer.getmany(timeout_ms=500)
                    got += sum(len(v) for v in batch.values())
                    if batch:
                        await consumer.commit()
                for p in range(3):
                    await consumer.committed(TopicPartition(topic, p))
                with w.step("describe groups while a member is in the group"):
                    await admin.describe_consumer_groups([group])
                await asyncio.sleep(1.5)  # a few heartbeats
                if got == 0:
                    raise RuntimeError("no messages consumed")
            finally:
                await consumer.stop()

        with w.step("assign + seek, offsets_for_times, beginning/end offsets"):
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                tps = [TopicPartition(topic, p) for p in range(3)]
                consumer.assign(tps)
                await consumer.seek_to_beginning()
                await consumer.getmany(timeout_ms=1000)
                consumer.seek(tps[1], 5)
                await consumer.getmany(timeout_ms=500)
                now_ms = int(time.time() * 1000)
                await consumer.offsets_for_times({tp: now_ms - 60_000 for tp in tps})
                await consumer.beginning_offsets(tps)
                await consumer.end_offsets(tps)
            finally:
                await consumer.stop()

        with w.step("list/describe groups, group offsets"):
            await admin.list_consumer_groups()
            await admin.describe_consumer_groups([group])
            await admin.list_consumer_group_offsets(group)
        with w.step("delete records and topics"):
            await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(before_offset=3)})
            await admin.delete_topics([topic, extra])
    finally:
        await admin.close()


def run_odradek_tokens(bootstrap: str) -> list[str]:
    """The delegation token APIs (38-41), which none of the three clients sends: odradek's own
    client sends each at every version Kafka 3.9 serves (renewers, owners, HMACs, negative
    periods). On this PLAINTEXT listener the broker refuses them (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);
    the frames are valid requests all the same."""
    import datetime

    from odradek.client.connection import KafkaConnection

    host, port = bootstrap.rsplit(":", 1)

    async def go() -> None:
        async with KafkaConnection(host, int(port), client_id="odradek-tokens", request_timeout_ms=10000) as conn:
            for version in range(4):
                rb = conn.builder(38, version, version)
                renewer = rb.make("CreatableRenewers", principal_type="User", principal_name="bob")
                fields: dict[str, Any] = {"renewers": (renewer,), "max_lifetime": datetime.timedelta(milliseconds=-1)}
                if version >= 3:
                    fields.update(owner_principal_type="User", owner_principal_name="alice")
                await conn.send(rb(**fields))
                rb = conn.builder(41, version, version)
                owner = rb.make("DescribeDelegationTokenOwner", principal_type="User", principal_name="alice")
                await conn.send(rb(owners=(owner,)))
                await conn.send(rb(owners=None))
            for version in range(3):
                rb = conn.builder(39, version, version)
                await conn.send(rb(hmac=bytes(range(64)), renew_period=datetime.timedelta(hours=1)))
                rb = conn.builder(40, version, version)
                await conn.send(rb(hmac=bytes(range(64)), expiry_time_period=datetime.timedelta(milliseconds=-1)))

    try:
        asyncio.run(go())
    except Exception as exc:
        return [f"odradek_tokens: {type(exc).__name__}: {exc}"]
    return []


WORKLOADS: dict[str, Callable[[str], list[str]]] = {
    "confluent_kafka": run_confluent_kafka,
    "kafka_python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "odradek_tokens": run_odradek_tokens,
}


# --------------------------------------------------------------------------------------------
# Selecting, writing and summarising frames


def frame_api(frame: bytes) -> tuple[int, int]:
    """(api_key, api_version) of a frame that starts with its size prefix."""
    api_key, api_version = struct.unpack_from(">hh", frame, 4)
    return api_key, api_version


def select_frames(connections: list[RecordedConnection], max_bytes: int) -> list[bytes]:
    """Dedupe (ignoring the correlation id), keep one of every (api_key, version), fill round-robin.

    Returns frames grouped by connection, in the order they were sent.
    """
    unique: list[bytes] = []
    seen: set[bytes] = set()
    for conn in connections:
        for frame in conn.frames:
            if len(frame) < 12:
                continue  # not a request header; nothing a client sent here so far
            identity = frame[:8] + frame[12:]
            if identity not in seen:
                seen.add(identity)
                unique.append(frame)
    by_api: dict[tuple[int, int], deque[int]] = defaultdict(deque)
    for index, frame in enumerate(unique):
        by_api[frame_api(frame)].append(index)
    keep: set[int] = set()
    total = 0
    for queue in by_api.values():  # one of each, whatever it costs
        index = queue.popleft()
        keep.add(index)
        total += 4 + len(unique[index])
    queues = [q for q in by_api.values() if q]
    while queues:
        remaining = []
        for queue in queues:
            index = queue.popleft()
            size = 4 + len(unique[index])
            if total + size <= max_bytes:
                keep.add(index)
                total += size
            if queue:
                remaining.append(queue)
        queues = remaining
    return [unique[i] for i in sorted(keep)]


def write_corpus(path: pathlib.Path, frames: list[bytes]) -> None:
    out = bytearray()
    for frame in frames:
        out += _U32.pack(len(frame))
        out += frame
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(bytes(out))
    tmp.replace(path)


def read_corpus(path: pathlib.Path) -> list[bytes]:
    """The frames of one corpus file; ValueError if a record runs past the end."""
    data = path.read_bytes()
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"{path}: truncated record length at {pos}")
        (length,) = _U32.unpack_from(data, pos)
        pos += 4
        if pos + length > len(data):
            raise ValueError(f"{path}: record at {pos - 4} runs past the end")
        frames.append(data[pos : pos + length])
        pos += length
    return frames


def api_name(api_key: int) -> str:
    name = api_key_map.get(api_key)  # type: ignore[call-overload]
    if name is None:
        return f"Unknown{api_key}"
    return "".join(part.capitalize() for part in str(name).split("_"))


def render_summary(out_dir: pathlib.Path) -> str:
    lines = [
        "# Client request frames",
        "",
        "Request frames recorded from real Kafka clients talking to an odradek broker, used as the seed",
        "corpus of the protocol fuzzer and checked by `tests/unit/test_client_frames.py`.",
        "Generated by `tools/record_traffic.py` (see its docstring); do not edit by hand.",
        "",
        "Regenerate all files: `.venv/bin/python tools/record_traffic.py`;",
        "this page only: `.venv/bin/python tools/record_traffic.py --summary`.",
        "",
        "Format of each `<client>.bin`: a concatenation of records, each a 4-byte big-endian length `L`",
        "and then `L` bytes: one request frame exactly as the client sent it, starting with the frame's",
        "own 4-byte size prefix (so `L` is 4 + that size). Frames are grouped by connection, in send order.",
        "",
    ]
    for path in sorted(out_dir.glob("*.bin")):
        frames = read_corpus(path)
        counts = Counter(frame_api(f) for f in frames)
        lines += [
            f"## {path.name}",
            "",
            f"{len(frames)} frames, {path.stat().st_size} bytes.",
            "",
            "| API key | name | version | frames |",
            "| --- | --- | --- | --- |",
        ]
        for (key, version), count in sorted(counts.items()):
            lines.append(f"| {key} | {api_name(key)} | {version} | {count} |")
        lines.append("")
    return "\n".join(lines)


def write_summary(out_dir: pathlib.Path) -> str:
    text = render_summary(out_dir)
    (out_dir / "README.md").write_text(text)
    return text


# --------------------------------------------------------------------------------------------


def bound_port(runner: BrokerRunner) -> int:
    """The port the broker listens on. ``runner.port`` is the advertised one (the proxy's) here."""
    assert runner.broker is not None, "broker not started"
    sockets = runner.broker.socket_server.servers[0].sockets
    return int(sockets[0].getsockname()[1])


def record(clients: list[str], out_dir: pathlib.Path, max_bytes: int) -> list[str]:
    """Run each client's workload through the proxy; write one corpus file per client."""
    failures: list[str] = []
    proxy = RecordingProxy()
    proxy_port = proxy.start()
    with tempfile.TemporaryDirectory(prefix="odradek-record-") as data_dir:
        replication_port = free_port()  # the controller's own requests bypass the proxy
        runner = BrokerRunner(
            data_dir,
            {
                "listeners": f"PLAINTEXT://{HOST}:0,REPLICATION://{HOST}:{replication_port}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{proxy_port},REPLICATION://{HOST}:{replication_port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
                "inter.broker.listener.name": "REPLICATION",
                "num.partitions": "3",
            },
        )
        try:
            runner.start()
            broker_port = bound_port(runner)
            proxy.upstream = (HOST, broker_port)
            bootstrap = f"{HOST}:{proxy_port}"
            log.info("broker on %s:%d, proxy (advertised) on %s", HOST, broker_port, bootstrap)
            for client in clients:
                proxy.label = client
                started = time.monotonic()
                try:
                    failures += WORKLOADS[client](bootstrap)
                except Exception as exc:
                    failures.append(f"{client}: workload aborted: {type(exc).__name__}: {exc}")
                    log.exception("%s: workload aborted", client)
                gc.collect()  # librdkafka handles close their sockets when destroyed
                if not proxy.wait_idle(15):
                    log.warning("%s: %d connections still open; closing them", client, proxy.active_connections)
                    proxy.close_all()
                    proxy.wait_idle(5)
                proxy.label = "after-" + client
                conns = [c for c in proxy.connections if c.label == client]
                frames = select_frames(conns, max_bytes)
                path = out_dir / f"{client}.bin"
                if not frames:
                    failures.append(f"{client}: no frames recorded; {path} left as it was")
                    continue
                write_corpus(path, frames)
                sent = sum(len(c.frames) for c in conns)
                log.info(
                    "%s: %d connections, %d frames sent, %d kept, %d bytes -> %s (%.1fs)",
                    client,
                    len(conns),
                    sent,
                    len(frames),
                    path.stat().st_size,
                    path,
                    time.monotonic() - started,
                )
            stray = [c for c in proxy.connections if c.label.startswith("after-") and c.frames]
            if stray:
                log.warning("%d connections opened between workloads were not recorded", len(stray))
        finally:
            runner.stop()
            proxy.stop()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument("--max-bytes", type=int, default=MAX_FILE_BYTES, help="cap per corpus file")
    parser.add_argument("--summary", action="store_true", help="only rewrite README.md from existing .bin files")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("odradek", "kafka", "aiokafka"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.ERROR)
    out_dir: pathlib.Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    if not args.summary:
        failures = record(args.clients, out_dir, args.max_bytes)
    print(write_summary(out_dir))
    for failure in failures:
        print(f"step failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
