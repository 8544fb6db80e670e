"""What the console's topic pages show and change: topics, partitions, sizes, configs and records.

Reads go through odradek's client (Metadata, DescribeLogDirs, ListOffsets, DescribeConfigs,
Fetch); changes through CreateTopics / DeleteTopics, so the brokers' ACLs and policies apply to
the identity the console acts as. Every read is bounded:

- a topic list renders at most :data:`MAX_TOPICS` topics per page (``page`` from 0);
- a message page holds at most :data:`MAX_MESSAGES` records, fetched with at most
  :data:`FETCH_BYTES` per partition per request, for at most :data:`BROWSE_WAIT_S` seconds;
- a key, value or header value is cut to ``max_bytes`` (at most :data:`MAX_VALUE_BYTES`) before
  it is rendered (:mod:`odradek.console.render`).

Run on the console's client loop only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from odradek.cli.topics import INTERNAL_TOPICS, kafka_uuid
from odradek.client.admin import EARLIEST, LATEST, AdminClient, ConfigResource, NewTopic
from odradek.client.consumer import Consumer, ConsumerRecord
from odradek.console.guard import check, visible
from odradek.errors import ErrorCode, KafkaError, UnknownTopicOrPartitionError
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.storage.topic_partition import TopicPartition

__all__ = [
    "BROWSE_WAIT_S",
    "FETCH_BYTES",
    "MAX_MESSAGES",
    "MAX_TOPICS",
    "MAX_VALUE_BYTES",
    "PartitionRow",
    "TopicDetail",
    "TopicRow",
    "browse",
    "create_topic",
    "delete_topic",
    "topic_detail",
    "topic_rows",
]

MAX_TOPICS = 200
MAX_MESSAGES = 200
MAX_VALUE_BYTES = 64 * 1024
FETCH_BYTES = 256 * 1024
BROWSE_WAIT_S = 3.0


@dataclass
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    internal: bool
    size_bytes: int


@dataclass
class PartitionRow:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    log_start_offset: int | None = None
    high_watermark: int | None = None
    size_bytes: int | None = None


@dataclass
class TopicDetail:
    name: str
    topic_id: str
    internal: bool
    partitions: list[PartitionRow]
    configs: list[tuple[str, str | None, int, bool]] = field(default_factory=list)
    """(name, value, source, sensitive); a sensitive value is None."""


async def _sizes(admin: AdminClient, topics: list[str] | None) -> dict[TopicPartition, int]:
    """Size of each partition's largest replica (DescribeLogDirs on every broker; {} if refused)."""
    from odradek.cli.log_dirs import describe

    if not await visible(admin, AclOperation.DESCRIBE, ResourceType.CLUSTER, [CLUSTER_NAME]):
        return {}  # DescribeLogDirs needs DESCRIBE on the cluster
    try:
        described = await describe(admin, None, topics)
    except KafkaError:
        return {}
    sizes: dict[TopicPartition, int] = {}
    for broker in described:
        for d in broker["logDirs"]:
            for p in d["partitions"]:
                if p["isFuture"]:
                    continue
                topic, _, partition = p["partition"].rpartition("-")
                tp = TopicPartition(topic, int(partition))
                sizes[tp] = max(sizes.get(tp, 0), p["size"])
    return sizes


async def topic_rows(admin: AdminClient, page: int = 0, name_filter: str = "") -> tuple[list[TopicRow], int]:
    """One page of topics (sorted by name, containing ``name_filter``) and the number matching."""
    topics = await admin.describe_topics(None)
    described = await admin.describe_cluster()
    live = {b[0] for b in described.brokers}
    names = sorted(n for n, t in topics.items() if t.error_code == ErrorCode.none and name_filter in n)
    shown = names[page * MAX_TOPICS : (page + 1) * MAX_TOPICS]
    sizes = await _sizes(admin, shown) if shown else {}
    rows = []
    for name in shown:
        t = topics[name]
        parts = list(t.partitions.values())
        rows.append(
            TopicRow(
                name=name,
                partitions=len(parts),
                replication_factor=max((len(p.replicas) for p in parts), default=0),
                under_replicated=sum(1 for p in parts if len(p.isr) < len(p.replicas)),
                offline=sum(1 for p in parts if p.leader < 0 or p.leader not in live),
                internal=t.is_internal or name in INTERNAL_TOPICS,
                size_bytes=sum(sizes.get(TopicPartition(name, p.partition), 0) for p in parts),
            )
        )
    return rows, len(names)


async def topic_detail(admin: AdminClient, name: str) -> TopicDetail:
    """Partitions (leader, replicas, ISR, offsets, sizes) and configs of ``name``.

    Raises UnknownTopicOrPartitionError when the topic does not exist or is not visible."""
    topic = (await admin.describe_topics([name])).get(name)
    if topic is None or topic.error_code != ErrorCode.none:
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist or is not visible")
    tps = [TopicPartition(name, p) for p in sorted(topic.partitions)]
    starts, ends, sizes = await asyncio.gather(
        admin.list_offsets(dict.fromkeys(tps, EARLIEST)),
        admin.list_offsets(dict.fromkeys(tps, LATEST)),
        _sizes(admin, [name]),
    )
    rows = []
    for tp in tps:
        p = topic.partitions[tp.partition]
        start, end = starts.get(tp), ends.get(tp)
        rows.append(
            PartitionRow(
                p.partition,
                p.leader,
                p.leader_epoch,
                p.replicas,
                p.isr,
                p.offline_replicas,
                start.offset if start is not None and start.error is None else None,
                end.offset if end is not None and end.error is None else None,
                sizes.get(tp),
            )
        )
    resource = ConfigResource.topic(name)
    configs: list[tuple[str, str | None, int, bool]] = []
    result = None
    if await visible(admin, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, [name]):
        result = (await admin.describe_configs([resource])).get(resource)
    if result is not None and result.error is None:
        configs = [
            (c.name, None if c.is_sensitive else c.value, c.source, c.is_sensitive)
            for c in sorted(result.configs.values(), key=lambda c: c.name)
        ]
    return TopicDetail(name, kafka_uuid(topic.topic_id), topic.is_internal, rows, configs)


async def create_topic(
    admin: AdminClient, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> None:
    """CreateTopics for one topic; raises the broker's error (TopicExistsError, ...)."""
    if not await visible(admin, AclOperation.CREATE, ResourceType.CLUSTER, [CLUSTER_NAME]):
        await check(admin, AclOperation.CREATE, ResourceType.TOPIC, name)
    result = (await admin.create_topics([NewTopic(name, partitions, replication_factor, configs=configs)]))[name]
    if result.error is not None:
        raise result.error


async def delete_topic(admin: AdminClient, name: str) -> None:
    """DeleteTopics for one topic; raises the broker's error."""
    await check(admin, AclOperation.DELETE, ResourceType.TOPIC, name)
    error = (await admin.delete_topics([name])).get(name)
    if error is not None:
        raise error


@dataclass
class Page:
    records: list[ConsumerRecord]
    partitions: list[int]
    start: dict[int, int]
    """The offset each partition was read from."""
    ends: dict[int, int]
    """The high watermark of each partition read."""
    all_partitions: list[int]


async def browse(
    admin: AdminClient,
    topic: str,
    partition: int | None,
    *,
    offset: int | None = None,
    timestamp_ms: int | None = None,
    from_end: bool = False,
    limit: int = 50,
) -> Page:
    """Up to ``limit`` (at most :data:`MAX_MESSAGES`) records of ``topic`` (one partition, or all).

    Start: ``offset`` (clamped to the log start), else the first record at or after
    ``timestamp_ms``, else the last ``limit`` records of each partition when ``from_end``, else the
    log start. Stops at the high watermark, after ``limit`` records or :data:`BROWSE_WAIT_S`.
    """
    limit = max(1, min(limit, MAX_MESSAGES))
    await check(admin, AclOperation.READ, ResourceType.TOPIC, topic)
    desc = (await admin.describe_topics([topic])).get(topic)
    if desc is None or desc.error_code != ErrorCode.none:
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist or is not visible")
    parts = sorted(desc.partitions) if partition is None else [partition]
    if partition is not None and partition not in desc.partitions:
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' has no partition {partition}")
    tps = [TopicPartition(topic, p) for p in parts]
    starts = await admin.list_offsets(dict.fromkeys(tps, EARLIEST))
    ends_answer = await admin.list_offsets(dict.fromkeys(tps, LATEST))
    low = {tp.partition: a.offset for tp, a in starts.items() if a.error is None}
    ends = {tp.partition: a.offset for tp, a in ends_answer.items() if a.error is None}
    begin: dict[int, int] = {}
    if timestamp_ms is not None:
        found = await admin.list_offsets(dict.fromkeys(tps, timestamp_ms))
        for tp, answer in found.items():
            if answer.error is None:
                begin[tp.partition] = answer.offset if answer.offset >= 0 else ends.get(tp.partition, 0)
    for p in parts:
        if p in begin or p not in low:
            continue
        if offset is not None:
            begin[p] = max(low[p], offset)
        elif from_end:
            begin[p] = max(low[p], ends.get(p, 0) - limit)
        else:
            begin[p] = low[p]
    consumer = Consumer(
        [f"{host}:{port}" for host, port in admin.cluster.bootstrap],
        cluster=admin.cluster,
        auto_offset_reset="earliest",
        max_wait_ms=200,
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_bytes=FETCH_BYTES * 4,
    )
    for p, o in begin.items():
        if o < ends.get(p, 0):
            await consumer.seek(TopicPartition(topic, p), o)
    records: list[ConsumerRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BROWSE_WAIT_S
    while consumer.positions and len(records) < limit * len(parts) and loop.time() < deadline:
        for r in await consumer.poll(200):
            if r.offset < ends.get(r.partition, 0):
                records.append(r)
        for tp in list(consumer.positions):
            if consumer.positions[tp] >= ends.get(tp.partition, 0):
                del consumer.positions[tp]
    by_partition: dict[int, list[ConsumerRecord]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    kept = [r for p in sorted(by_partition) for r in sorted(by_partition[p], key=lambda r: r.offset)[:limit]]
    kept = sorted(kept, key=lambda r: (r.timestamp_ms, r.partition, r.offset))[:limit]
    return Page(kept, parts, begin, ends, sorted(desc.partitions))
