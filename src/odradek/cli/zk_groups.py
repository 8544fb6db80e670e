"""``odradek consumer-groups --zookeeper``: the ZooKeeper consumer groups (Kafka's old
``ConsumerOffsetChecker`` and ``ConsumerGroupCommand --zookeeper``).

::

    odradek consumer-groups --zookeeper HOST:PORT[/chroot] --list
    odradek consumer-groups --zookeeper Z --describe --group g
    odradek consumer-groups --zookeeper Z --reset-offsets --group g (--topic t | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N) [--execute]

- ``--list``: the groups under ``/consumers``, one per line.
- ``--describe``: one row per partition of every topic the group has offsets or owners for:
  ``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG OWNER`` (``-`` when missing; the owner
  is ``<consumer id>-<thread>`` from ``owners/<t>/<p>``; log end from the partition leaders).
- ``--reset-offsets``: writes ``offsets/<t>/<p>`` (with ``--execute``; otherwise prints the plan,
  ``GROUP TOPIC PARTITION NEW-OFFSET``); refused while the group has registered consumers, as
  Kafka (they would overwrite it).
Exit status 0, 1 on an error (unknown group, active consumers), 2 for a usage error.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import CommandError
from odradek.client.cluster import TopicPartition
from odradek.client.consumer import Consumer
from odradek.metadata.errors import NoNodeError
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.zkclients.broker_partition_info import ZkBrokerPartitionInfo

__all__ = ["zk_groups"]

MISSING = "-"


async def _children(zk: KafkaZkClient, path: str) -> list[str]:
    try:
        return sorted(await zk.store.get_children(path))
    except NoNodeError:
        return []


async def _group_partitions(zk: KafkaZkClient, group: str, topics: list[str] | None) -> list[TopicPartition]:
    names = set(await _children(zk, f"/consumers/{group}/offsets")) | set(
        await _children(zk, f"/consumers/{group}/owners")
    )
    out = set()
    for topic in sorted(names if topics is None else set(topics)):
        assignment, _ = await zk.get_topic_assignment(topic)
        out |= {TopicPartition(topic, p) for p in (assignment or {})}
    return sorted(out)


async def _owner(zk: KafkaZkClient, group: str, tp: TopicPartition) -> str | None:
    try:
        data, _ = await zk.store.get(f"/consumers/{group}/owners/{tp.topic}/{tp.partition}")
    except NoNodeError:
        return None
    return data.decode(errors="replace")


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(15, *(len(r[i]) for r in rows)) for i in range(len(rows[0]))]
    return [" ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]


async def zk_groups(args: argparse.Namespace) -> int:
    info = ZkBrokerPartitionInfo(args.zookeeper)
    consumer = Consumer("", cluster=info)
    try:
        zk = await info.start()
        if args.list:
            for group in await _children(zk, "/consumers"):
                print(group)
            return 0
        if not args.group or len(args.group) != 1:
            raise CommandError("--describe and --reset-offsets take exactly one --group")
        group = args.group[0]
        if not await _children(zk, f"/consumers/{group}") and await zk.store.exists(f"/consumers/{group}") is None:
            raise CommandError(f"Consumer group '{group}' does not exist.")
        topics = None if args.describe or args.all_topics else [t.split(":")[0] for t in args.topic or []]
        partitions = await _group_partitions(zk, group, topics)
        if args.describe:
            ends = await consumer.offsets(partitions, "latest") if partitions else {}
            rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "OWNER"]]
            for tp in partitions:
                current = await zk.get_consumer_offset(group, tp)
                lag = MISSING if current is None else str(max(ends[tp] - current, 0))
                owner = await _owner(zk, group, tp)
                row = [group, tp.topic, str(tp.partition), MISSING if current is None else str(current), str(ends[tp])]
                rows.append([*row, lag, owner or MISSING])
            print("\n".join(_table(rows)))
            return 0
        return await _reset(zk, consumer, args, group, partitions)
    finally:
        await consumer.close()
        await info.close()


async def _reset(
    zk: KafkaZkClient, consumer: Consumer, args: argparse.Namespace, group: str, partitions: list[TopicPartition]
) -> int:
    if await _children(zk, f"/consumers/{group}/ids"):
        raise CommandError(f"Assignments can only be reset if the group '{group}' is inactive (it has consumers).")
    if not partitions:
        raise CommandError("no partition to reset: name --topic or use --all-topics")
    earliest = await consumer.offsets(partitions, "earliest")
    latest = await consumer.offsets(partitions, "latest")
    plan = {}
    for tp in partitions:
        if args.to_earliest:
            target = earliest[tp]
        elif args.to_latest:
            target = latest[tp]
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.shift_by is not None:
            current = await zk.get_consumer_offset(group, tp)
            target = (earliest[tp] if current is None else current) + args.shift_by
        else:
            raise CommandError(
                "--reset-offsets with --zookeeper takes --to-earliest, --to-latest, --to-offset or --shift-by"
            )
        plan[tp] = min(max(target, earliest[tp]), latest[tp])
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, tp.topic, str(tp.partition), str(offset)] for tp, offset in sorted(plan.items())]
    print("\n".join(_table(rows)))
    if args.execute:
        for tp, offset in plan.items():
            await zk.set_consumer_offset(group, tp, offset)
    return 0
