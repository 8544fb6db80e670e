"""``odradek topics``: Kafka's ``kafka-topics.sh`` (create, list, describe, alter, delete).

Exactly one action, with Kafka's flags::

    odradek topics --bootstrap-server H:P --create --topic t [--partitions N] [--replication-factor R]
                   [--replica-assignment 0:1,1:2] [--config k=v ...] [--if-not-exists]
    odradek topics --bootstrap-server H:P --list [--topic REGEX] [--exclude-internal]
    odradek topics --bootstrap-server H:P --describe [--topic REGEX] [--exclude-internal]
                   [--under-replicated-partitions | --unavailable-partitions | --topics-with-overrides]
    odradek topics --bootstrap-server H:P --alter --topic REGEX --partitions N [--if-exists]
    odradek topics --bootstrap-server H:P --alter --topic REGEX --config k=v ... [--if-exists]
    odradek topics --bootstrap-server H:P --delete --topic REGEX [--if-exists]

``--topic`` is a regular expression matched against whole names, except with ``--create``.
``--replica-assignment`` lists partitions separated by ``,``, each the broker ids of its
replicas separated by ``:``; it replaces ``--partitions`` and ``--replication-factor`` (which
otherwise default to the broker's ``num.partitions`` / ``default.replication.factor``).
``--alter --config`` sets topic overrides (IncrementalAlterConfigs SET); Kafka itself sends
that to ``kafka-configs.sh``.

Output as Kafka's ``TopicCommand``: ``Created topic t.``; ``--list`` one name per line;
``--describe`` per topic ``Topic: t\\tTopicId: <id>\\tPartitionCount: 3\\tReplicationFactor: 1\\tConfigs: k=v,...``
(configs that are not broker defaults) then one line per partition
``\\tTopic: t\\tPartition: 0\\tLeader: 0\\tReplicas: 0\\tIsr: 0`` (``Leader: none`` without a leader).
Topic ids print as Kafka prints them: URL-safe base64 of the 16 bytes, without padding.

Errors (unreachable broker, topic exists, topic not found, bad flag) print one line on stderr,
``Error while executing topic command : <reason>``, and exit 1 (2 for a usage error).
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid
from collections.abc import Sequence

from odradek.cli.common import ArgumentParser, CommandError, parse_args, parse_key_values, run
from odradek.client.admin import AdminClient, AlterConfigOp, ConfigResource, NewPartitions, NewTopic
from odradek.client.cluster import TopicDescription

ERROR_PREFIX = "Error while executing topic command : "
DEFAULT_CONFIG = 5
DYNAMIC_TOPIC_CONFIG = 1


def kafka_uuid(value: uuid.UUID) -> str:
    """A topic id as Kafka's ``Uuid.toString``: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``"0:1,1:2"`` -> {0: [0, 1], 1: [1, 2]}; CommandError if malformed or uneven."""
    assignment: dict[int, list[int]] = {}
    for partition, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.strip().split(":")]
        except ValueError:
            raise CommandError(f"invalid --replica-assignment {text!r}: expected broker ids like 0:1,1:2") from None
        if len(set(brokers)) != len(brokers):
            raise CommandError(f"Partition replica lists may not contain duplicate entries: {part}")
        assignment[partition] = brokers
    if len({len(b) for b in assignment.values()}) > 1:
        raise CommandError(f"Partition {len(assignment) - 1} has different replication factor: {text}")
    return assignment


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek topics", description="Create, list, describe, alter and delete topics.")
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker(s) to connect to, comma-separated"
    )
    actions = parser.add_mutually_exclusive_group(required=True)
    for action, doc in (
        ("create", "create a topic"),
        ("list", "list topics"),
        ("describe", "describe topics"),
        ("alter", "add partitions or set configs"),
        ("delete", "delete topics"),
    ):
        actions.add_argument(f"--{action}", action="store_true", help=doc)
    parser.add_argument("--topic", help="the topic (a regular expression except with --create)")
    parser.add_argument("--partitions", type=int, help="partition count (create) or new total (alter)")
    parser.add_argument("--replication-factor", type=int, help="replicas per partition (create)")
    parser.add_argument("--replica-assignment", help="broker ids per partition: 0:1,1:2")
    parser.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config override")
    parser.add_argument("--if-not-exists", action="store_true", help="create only if the topic does not exist")
    parser.add_argument("--if-exists", action="store_true", help="alter/delete/describe only existing topics")
    parser.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    parser.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="describe only partitions whose ISR is smaller than their replica set",
    )
    parser.add_argument(
        "--unavailable-partitions", action="store_true", help="describe only partitions without a live leader"
    )
    parser.add_argument(
        "--topics-with-overrides", action="store_true", help="describe only topics with config overrides"
    )
    parser.add_argument("--command-config", help="client properties file (accepted; odradek speaks PLAINTEXT)")
    return parser


def _matching(names: Sequence[str], pattern: str | None) -> list[str]:
    if pattern is None:
        return list(names)
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise CommandError(f"invalid --topic regular expression {pattern!r}: {exc}") from None
    return [n for n in names if regex.fullmatch(n)]


async def _topics(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    names = await admin.list_topics(include_internal=not args.exclude_internal)
    matched = _matching(sorted(names), args.topic)
    if args.topic is not None and not matched and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")
    return matched


async def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    if not args.topic:
        raise CommandError('Missing required argument "[topic]"')
    configs = parse_key_values(args.config, "--config")
    assignment = None
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise CommandError(
                'Option "[replica-assignment]" can\'t be used with "[partitions]" or "[replication-factor]"'
            )
        assignment = parse_replica_assignment(args.replica_assignment)
    if "." in args.topic or "_" in args.topic:
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
            "collide. To avoid issues it is best to use either, but not both."
        )
    new = NewTopic(
        args.topic,
        -1 if args.partitions is None else args.partitions,
        -1 if args.replication_factor is None else args.replication_factor,
        assignment,
        configs,
    )
    result = (await admin.create_topics([new]))[args.topic]
    if result.error is not None:
        if args.if_not_exists and result.error.error_code == 36:  # TOPIC_ALREADY_EXISTS
            return 0
        raise CommandError(str(result.error).split(": ", 1)[-1])
    print(f"Created topic {args.topic}.")
    return 0


def _describe_lines(desc: TopicDescription, configs: str, args: argparse.Namespace, live: set[int]) -> list[str]:
    partitions = [desc.partitions[p] for p in sorted(desc.partitions)]
    rf = len(partitions[0].replicas) if partitions else 0
    lines = []
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    if not filtered:
        head = f"Topic: {desc.name}"
        if desc.topic_id.int:
            head += f"\tTopicId: {kafka_uuid(desc.topic_id)}"
        lines.append(f"{head}\tPartitionCount: {len(partitions)}\tReplicationFactor: {rf}\tConfigs: {configs}")
    for p in partitions:
        has_leader = p.leader >= 0 and p.leader in live
        if args.under_replicated_partitions and len(p.isr) >= len(p.replicas):
            continue
        if args.unavailable_partitions and has_leader:
            continue
        lines.append(
            f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {p.leader if has_leader else 'none'}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            + (f"\tOffline: {','.join(map(str, p.offline_replicas))}" if p.offline_replicas else "")
        )
    return lines


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    names = await _topics(admin, args)
    if not names:
        return 0
    descriptions = await admin.describe_topics(names)
    configs = await admin.describe_configs([ConfigResource.topic(n) for n in names])
    live = set(admin.cluster.brokers)
    for name in names:
        desc = descriptions.get(name)
        if desc is None or desc.error_code:
            continue  # deleted meanwhile
        result = configs.get(ConfigResource.topic(name))
        entries = sorted(result.configs.values(), key=lambda e: e.name) if result and not result.error else []
        if args.topics_with_overrides and not any(e.source == DYNAMIC_TOPIC_CONFIG for e in entries):
            continue
        text = ",".join(f"{e.name}={e.value}" for e in entries if e.source != DEFAULT_CONFIG and not e.is_sensitive)
        for line in _describe_lines(desc, text, args, live):
            print(line)
    return 0


async def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    if not args.topic:
        raise CommandError('Missing required argument "[topic]"')
    if args.partitions is None and not args.config:
        raise CommandError("--alter needs --partitions or --config")
    if args.replication_factor is not None:
        raise CommandError('Option "[replication-factor]" can\'t be used with option "[alter]"')
    names = await _topics(admin, args)
    if args.partitions is not None and names:
        assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
        spec = NewPartitions(args.partitions, list(assignment.values()) if assignment else None)
        results = await admin.create_partitions({n: spec for n in names})
        for error in results.values():
            if error is not None:
                raise CommandError(str(error).split(": ", 1)[-1])
    configs = parse_key_values(args.config, "--config")
    if configs and names:
        ops = [AlterConfigOp(k, AlterConfigOp.SET, v) for k, v in configs.items()]
        altered = await admin.incremental_alter_configs({ConfigResource.topic(n): ops for n in names})
        for error in altered.values():
            if error is not None:
                raise CommandError(str(error).split(": ", 1)[-1])
    return 0


async def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    if not args.topic:
        raise CommandError('Missing required argument "[topic]"')
    names = await _topics(admin, args)
    internal = [n for n in names if n.startswith("__")]
    if internal:
        raise CommandError(
            f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked for deletion."
        )
    if not names:
        return 0
    for name, error in (await admin.delete_topics(names)).items():
        if error is not None:
            raise CommandError(f"{name}: {str(error).split(': ', 1)[-1]}")
    return 0


async def _run(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap_server, client_id="odradek-topics") as admin:
        if args.create:
            return await _create(admin, args)
        if args.list:
            for name in await _topics(admin, args):
                print(name)
            return 0
        if args.describe:
            return await _describe(admin, args)
        if args.alter:
            return await _alter(admin, args)
        return await _delete(admin, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    status = run("odradek topics", lambda: _run(args), ERROR_PREFIX)
    sys.stdout.flush()
    return status
