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

from odradek.cli.common import CommandError, client_security, table, zk_tls_context
from odradek.client.cluster import TopicPartition
from odradek.client.consumer import Consumer
from odradek.metadata.kafka_zk_client import KafkaZkClient
from odradek.zkclients.broker_partition_info import ZkBrokerPartitionInfo
from odradek.zkclients.group_znodes import children, consumer_ids, owner

__all__ = ["zk_groups"]


async def _group_partitions(zk: KafkaZkClient, group: str, topics: list[str] | None) -> list[TopicPartition]:
    names = set(await children(zk, f"/consumers/{group}/offsets")) | set(
        await children(zk, f"/consumers/{group}/owners")
    )
    out = set()
    for topic in sorted(names if topics is None else set(topics)):
        assignment, _ = await zk.get_topic_assignment(topic)
        out |= {TopicPartition(topic, p) for p in (assignment or {})}
    return sorted(out)


async def zk_groups(args: argparse.Namespace) -> int:
    info = ZkBrokerPartitionInfo(
        args.zookeeper, security=client_security(args), zookeeper_tls=zk_tls_context(args.zk_tls_config_file)
    )
    consumer = Consumer("", cluster=info)
    try:
        zk = await info.start()
        if args.list:
            for group in await children(zk, "/consumers"):
                print(group)
            return 0
        if not args.group or len(args.group) != 1:
            raise CommandError("--describe and --reset-offsets take exactly one --group")
        group = args.group[0]
        if not await children(zk, f"/consumers/{group}") and await zk.store.exists(f"/consumers/{group}") is None:
            raise CommandError(f"Consumer group '{group}' does not exist.")
        topics = None if args.describe or args.all_topics else [t.split(":")[0] for t in args.topic or []]
        partitions = await _group_partitions(zk, group, topics)
        if args.describe:
            ends = await consumer.offsets(partitions, "latest") if partitions else {}
            header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "OWNER"]
            rows = []
            for tp in partitions:
                current = await zk.get_consumer_offset(group, tp)
                lag = None if current is None else max(ends[tp] - current, 0)
                rows.append([group, tp.topic, tp.partition, current, ends[tp], lag, await owner(zk, group, tp)])
            print("\n".join(table(header, rows, (15,) * 6 + (None,))))
            return 0
        return await _reset(zk, consumer, args, group, partitions)
    finally:
        await consumer.close()
        await info.close()


async def _reset(
    zk: KafkaZkClient, consumer: Consumer, args: argparse.Namespace, group: str, partitions: list[TopicPartition]
) -> int:
    if await consumer_ids(zk, group):
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
    rows = [[group, tp.topic, tp.partition, offset] for tp, offset in sorted(plan.items())]
    print("\n".join(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, (15, 15, 15, None))))
    if args.execute:
        for tp, offset in plan.items():
            await zk.set_consumer_offset(group, tp, offset)
    return 0
