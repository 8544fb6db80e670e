"""The ``_schemas`` topic read and written with odradek's own Kafka client: Confluent's
``KafkaStore`` and ``KafkaStoreReaderThread``.

One reader task consumes partition 0 of the topic from the earliest offset for the life of the
store and applies every record to a :class:`RegistryState`; :meth:`KafkaStore.put` produces one
record (acks=all) and returns only once the reader has applied it, so a write is answered from the
state every instance will converge to ("wait until offset"). :meth:`KafkaStore.sync` waits until
the reader has caught up with the partition's end offset at the time of the call (a new leader
calls it before allocating ids). The topic is created when missing: one partition,
``cleanup.policy=compact``, replication factor ``min(3, live brokers)``; an existing topic with
more than one partition is refused (Confluent refuses it too: its order would be lost).
Creation first waits (up to ``timeout_ms``) for ``wait_for_brokers`` live brokers.

Threading: everything runs on the one event loop that called :meth:`start`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from odradek.client.admin import AdminClient, NewTopic
from odradek.client.cluster import TopicPartition
from odradek.client.consumer import Consumer
from odradek.client.producer import Producer
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import Record
from odradek.schema_registry.errors import OperationTimeout, StoreError
from odradek.schema_registry.records import RegistryKey
from odradek.schema_registry.state import RegistryState

log = logging.getLogger(__name__)

SCHEMAS_TOPIC = "_schemas"


class KafkaStore:
    """State of the registry as read from ``topic``; writes go through :meth:`put`."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        topic: str = SCHEMAS_TOPIC,
        security: ClientSecurity = PLAINTEXT_SECURITY,
        timeout_ms: int = 10000,
        replication_factor: int | None = None,
        wait_for_brokers: int = 1,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.security = security
        self.timeout_ms = timeout_ms
        self.replication_factor = replication_factor
        self.wait_for_brokers = wait_for_brokers
        self.startup_timeout_ms = 30000
        """Live brokers to wait for (up to ``timeout_ms``) before creating the topic, so brokers
        starting together give it its full replication factor."""
        self.state = RegistryState()
        self.tp = TopicPartition(topic, 0)
        self.position = 0
        """The next offset the reader will apply."""
        self._advanced = asyncio.Event()
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Create the topic if needed, start the reader and catch up with the end of the topic.

        Transient failures (a topic being created by another instance and without a leader yet,
        a broker not reachable yet) are retried for up to ``startup_timeout_ms``; the last one
        is raised after it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout_ms / 1000
        while True:
            try:
                await self._start_once()
                return
            except (KafkaError, StoreError, OperationTimeout, OSError) as e:
                if loop.time() >= deadline:
                    raise
                log.info("schema registry store not ready (%s); retrying", e)
                await self._close_clients()
                await asyncio.sleep(0.5)

    async def _start_once(self) -> None:
        self.state = RegistryState()  # a retried start reads the topic from the beginning again
        await self._ensure_topic()
        self._producer = Producer(
            self.bootstrap_servers,
            acks=-1,
            client_id="odradek-schema-registry",
            request_timeout_ms=self.timeout_ms,
            security=self.security,
            allow_auto_create=False,
        )
        self._consumer = Consumer(
            self.bootstrap_servers,
            auto_offset_reset="earliest",
            client_id="odradek-schema-registry-reader",
            max_wait_ms=200,
            request_timeout_ms=self.timeout_ms,
            security=self.security,
        )
        await self._consumer.assign([self.tp])
        self.position = self._consumer.position(self.tp)
        self._reader = asyncio.get_running_loop().create_task(self._read_forever(), name="schemas-reader")
        await self.sync()

    async def _ensure_topic(self) -> None:
        async with AdminClient(
            self.bootstrap_servers, client_id="odradek-schema-registry-admin", security=self.security
        ) as admin:
            described = await admin.describe_topics([self.topic])
            desc = described.get(self.topic)
            if desc is not None and desc.error_code == ErrorCode.none:
                if len(desc.partitions) != 1:
                    raise StoreError(f"The schema topic {self.topic} should have exactly 1 partition")
                return
            rf = self.replication_factor
            if rf is None:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self.timeout_ms / 1000
                live = len((await admin.describe_cluster()).brokers)
                while live < self.wait_for_brokers and loop.time() < deadline:
                    await asyncio.sleep(0.2)
                    live = len((await admin.describe_cluster()).brokers)
                rf = min(3, max(1, live))
            results = await admin.create_topics(
                [NewTopic(self.topic, 1, rf, configs={"cleanup.policy": "compact"})], timeout_ms=self.timeout_ms
            )
            error = results[self.topic].error
            if error is not None and error.error_code != ErrorCode.topic_already_exists:
                raise StoreError(f"Cannot create the schema topic {self.topic}: {error}")

    async def _read_forever(self) -> None:
        assert self._consumer is not None
        while not self._closed:
            try:
                records = await self._consumer.poll(500)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a broker restart, a leader move: the next poll retries
                log.warning("reading %s failed (%s); retrying", self.topic, e)
                await asyncio.sleep(0.2)
                continue
            for r in records:
                try:
                    self.state.apply(r.key, r.value)
                except Exception:
                    log.exception("skipping an unreadable %s record at offset %d", self.topic, r.offset)
            new_position = self._consumer.position(self.tp)
            if new_position != self.position:
                self.position = new_position
                self._advanced.set()
                self._advanced = asyncio.Event()

    async def wait_until_offset(self, offset: int, timeout_ms: int | None = None) -> None:
        """Return once the reader has applied ``offset`` (``position > offset``); OperationTimeout
        (50002) after ``timeout_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_ms if timeout_ms is not None else self.timeout_ms) / 1000
        while self.position <= offset:
            remaining = deadline - loop.time()
            if remaining <= 0 or self._reader is None or self._reader.done():
                raise OperationTimeout(f"Reading the schemas topic did not reach offset {offset} in time")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._advanced.wait(), remaining)

    async def sync(self) -> None:
        """Wait until every record written before this call has been applied."""
        assert self._consumer is not None
        try:
            end = (await self._consumer.offsets([self.tp], "latest"))[self.tp]
        except KafkaError as e:
            raise StoreError(f"Cannot read the end offset of {self.topic}: {e}") from None
        if end > 0:
            await self.wait_until_offset(end - 1)

    async def put(self, key: RegistryKey, value: bytes | None) -> int:
        """Write one record and wait until it is applied; its offset. StoreError (50001) if the
        write fails, OperationTimeout (50002) if it is not read back in time."""
        return (await self.put_many([(key, value)]))[-1]

    async def put_many(self, records: list[tuple[RegistryKey, bytes | None]]) -> list[int]:
        """Write records in one batch (in order) and wait until the last is applied."""
        assert self._producer is not None
        try:
            metas = await self._producer.send_batch(
                self.topic, [Record(k.encode(), v) for k, v in records], partition=0
            )
        except KafkaError as e:
            raise StoreError(f"Writing to the schemas topic failed: {e}") from None
        await self.wait_until_offset(metas[-1].offset)
        return [m.offset for m in metas]

    async def _close_clients(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None
        for client in (self._producer, self._consumer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
        self._producer = self._consumer = None

    async def close(self) -> None:
        self._closed = True
        await self._close_clients()
