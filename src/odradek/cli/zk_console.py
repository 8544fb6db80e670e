"""``odradek console-consumer --zookeeper``: Kafka 0.8's console consumer, a member of a ZooKeeper
consumer group (:mod:`odradek.zkclients.consumer_connector`).

::

    odradek console-consumer --zookeeper HOST:PORT[/chroot] (--topic t | --whitelist REGEX)
        [--group g] [--from-beginning] [--consumer-property auto.commit.interval.ms=1000 ...]
        [--max-messages N] [--timeout-ms N] [--property print.partition=true ...]

Without ``--group`` the group is ``console-consumer-<random>``, as Kafka's tool. ``--from-beginning``
sets ``auto.offset.reset=smallest`` (only partitions without a committed offset are affected).
``--consumer-property`` takes the old consumer's keys (``auto.commit.enable``,
``auto.commit.interval.ms``, ``rebalance.max.retries``, ``rebalance.backoff.ms``,
``zookeeper.session.timeout.ms``, ``partition.assignment.strategy``, ``offsets.storage``,
``dual.commit.enabled``, ``consumer.id``) and the client security keys (``security.protocol``,
``ssl.*``, ``sasl.*``), also from ``--consumer.config``. Several can run in one group; each prints the records of
the partitions it owns. SIGTERM or Ctrl-C leaves the group cleanly (offsets committed, partitions
released at once); ``Processed a total of N messages`` goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import signal
import sys
from typing import BinaryIO, Protocol

from odradek.cli.common import CommandError, closed_at_exit, zk_tls_context
from odradek.client.consumer import ConsumerRecord
from odradek.errors import InvalidConfigError
from odradek.zkclients.consumer_connector import ConsumerConfig, ZookeeperConsumerConnector

__all__ = ["write_records", "zk_consume"]


class RecordFormatter(Protocol):
    def format(self, record: ConsumerRecord) -> bytes: ...


def write_records(
    records: list[ConsumerRecord], formatter: RecordFormatter, out: BinaryIO, count: int, limit: int | None
) -> int:
    """Write ``records`` (up to ``limit`` in all) and flush; the new count."""
    for record in records:
        if limit is not None and count >= limit:
            break
        out.write(formatter.format(record))
        count += 1
    out.flush()
    return count


async def zk_consume(args: argparse.Namespace, props: dict[str, str], formatter: RecordFormatter, out: BinaryIO) -> int:
    if args.partition is not None or args.offset is not None:
        raise CommandError("--partition and --offset need --bootstrap-server (a group owns its partitions)")
    if (args.topic is None) == (args.whitelist is None):
        raise CommandError("exactly one of --topic and --whitelist is required")
    level = props.pop("log.level", "WARNING").upper()  # diagnostics on stderr
    logging.basicConfig(level=level, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    group = args.group or f"console-consumer-{random.randrange(100000)}"
    if args.from_beginning:
        props.setdefault("auto.offset.reset", "smallest")
    try:
        config = ConsumerConfig.from_properties(group, args.zookeeper, props)
    except (ValueError, InvalidConfigError) as exc:
        raise CommandError(str(exc)) from None
    closed_at_exit(config.security)
    if args.zk_tls_config_file:
        config.zookeeper_tls = zk_tls_context(args.zk_tls_config_file)
    topic_count = {args.topic: 1} if args.topic is not None else None
    connector = ZookeeperConsumerConnector(config, topic_count, whitelist=args.whitelist)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    count = 0
    await connector.start()
    try:
        last_record = loop.time()
        while not stop.is_set() and (args.max_messages is None or count < args.max_messages):
            if args.timeout_ms is not None and (loop.time() - last_record) * 1000 >= args.timeout_ms:
                break
            records = await connector.poll(200)
            if records:
                last_record = loop.time()
            count = write_records(records, formatter, out, count, args.max_messages)
    finally:
        await connector.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
