"""``odradek topics``: Kafka's ``kafka-topics.sh`` (create, list, describe, alter, delete).

Exactly one action, with Kafka's flags::

    odradek topics --bootstrap-server H:P --create --topic t [--partitions N] [--replication-factor R]
                   [--replica-assignment 0:1,1:2] [--config k=v ...] [--if-not-exists]
    odradek topics --bootstrap-server H:P --list [--topic REGEX] [--exclude-internal]
    odradek topics --bootstrap-server H:P --describe [--topic REGEX] [--exclude-internal] [--if-exists]
                   [--under-replicated-partitions | --unavailable-partitions | --under-min-isr-partitions
                    | --at-min-isr-partitions | --topics-with-overrides]
    odradek topics --bootstrap-server H:P --alter --topic REGEX --partitions N [--if-exists]
    odradek topics --bootstrap-server H:P --alter --topic REGEX --config k=v ... [--if-exists]
    odradek topics --bootstrap-server H:P --delete --topic REGEX [--if-exists]

``--topic`` is a regular expression matched against whole names (except with ``--create``), read
as Kafka's ``IncludeList``: ``,`` means ``|``, spaces and surrounding quotes are dropped.
``--replica-assignment`` lists partitions separated by ``,``, each the broker ids of its
replicas separated by ``:``; it replaces ``--partitions`` and ``--replication-factor`` (which
otherwise default to the broker's ``num.partitions`` / ``default.replication.factor``).
``--alter --config`` sets topic overrides (IncrementalAlterConfigs SET); Kafka itself sends
that to ``kafka-configs.sh``.

Output as Kafka 3.x's ``TopicCommand``: ``Created topic t.``; ``--list`` one name per line;
``--describe`` per topic ``Topic: t\\tTopicId: <id>\\tPartitionCount: 3\\tReplicationFactor: 1\\tConfigs: k=v,...``
then one line per partition ``\\tTopic: t\\tPartition: 0\\tLeader: 0\\tReplicas: 0\\tIsr: 0``.
Leader, replicas and ISR come from the Metadata response; ``Leader: none`` when the partition has
no leader (-1, or an id the response does not list as a broker). ``Configs`` lists the
DescribeConfigs entries whose source is not DEFAULT_CONFIG (topic overrides, and the topic keys
whose broker synonym is set in ``server.properties``), by name. Topic ids print as Kafka prints
them: URL-safe base64 of the 16 bytes, without padding.

The ``--describe`` reports (at most one; pure functions below, :func:`describe_lines`):

- ``--under-replicated-partitions``: partition lines whose ISR is smaller than the replica list;
- ``--unavailable-partitions``: partition lines without a leader or whose leader is not a live
  broker (DescribeCluster);
- ``--under-min-isr-partitions``: without a leader, or ISR smaller than the topic's
  ``min.insync.replicas``; ``--at-min-isr-partitions``: ISR exactly that size;
- ``--topics-with-overrides``: only the topic lines of topics whose ``Configs`` is not empty.

The partition reports print no topic lines. Errors (unreachable broker, topic exists, topic not
found) print one line on stderr, ``Error while executing topic command : <reason>``, and exit 1;
a bad flag or flag combination (a report without ``--describe``, two reports) exits 2.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from odradek.cli.common import (
    ArgumentParser,
    CommandError,
    UsageError,
    add_command_config,
    client_security,
    parse_args,
    parse_key_values,
    run,
)
from odradek.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from odradek.client.cluster import PartitionInfo, TopicDescription
from odradek.errors import ErrorCode

ERROR_PREFIX = "Error while executing topic command : "
DEFAULT_CONFIG = 5
"""DescribeConfigs ``config_source`` of a key nobody set; every other source is printed."""
MIN_INSYNC_REPLICAS = "min.insync.replicas"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
"""Kafka's ``Topic.isInternal`` names, left out by ``--exclude-internal`` even when ``--topic`` names them."""
REPORT_FLAGS = {
    "under-replicated-partitions": "if set when describing topics, only show under replicated partitions",
    "under-min-isr-partitions": "if set when describing topics, only show partitions whose isr count is less "
    "than the configured minimum",
    "at-min-isr-partitions": "if set when describing topics, only show partitions whose isr count is equal "
    "to the configured minimum",
    "unavailable-partitions": "if set when describing topics, only show partitions whose leader is not available",
    "topics-with-overrides": "if set when describing topics, only show topics that have overridden configs",
}
"""``--describe`` reports, at most one at a time, with Kafka's help texts, in the order Kafka checks them."""


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
    for flag, doc in REPORT_FLAGS.items():
        parser.add_argument(f"--{flag}", action="store_true", help=doc)
    add_command_config(parser)
    return parser


def topic_pattern(text: str) -> re.Pattern[str]:
    """``--topic`` as a regular expression, read as Kafka's ``IncludeList``.

    Surrounding whitespace and quotes are dropped, spaces removed and ``,`` means ``|``, so
    ``"a, b"`` selects topics ``a`` and ``b``. CommandError if it is not a valid expression.
    """
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", text.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        raise CommandError(f"{regex} is an invalid regex.") from None


def select_topics(names: Iterable[str], pattern: str | None, *, exclude_internal: bool = False) -> list[str]:
    """The sorted ``names`` that ``pattern`` matches whole (all when None), internal ones left out on request."""
    regex = None if pattern is None else topic_pattern(pattern)
    return sorted(
        n for n in names if (regex is None or regex.fullmatch(n)) and not (exclude_internal and n in INTERNAL_TOPICS)
    )


def check_args(args: argparse.Namespace) -> str | None:
    """The usage error of a flag combination Kafka's ``TopicCommand`` refuses, or None."""
    used = [flag for flag in REPORT_FLAGS if getattr(args, flag.replace("-", "_"))]
    if used and not args.describe:
        return f'Option "[{used[0]}]" can\'t be used with option "[{_action(args)}]"'
    if len(used) > 1:
        return f'Option "[{used[0]}]" can\'t be used with option "[{used[1]}]"'
    if args.exclude_internal and not (args.list or args.describe):
        return f'Option "[exclude-internal]" can\'t be used with option "[{_action(args)}]"'
    if args.describe and args.if_exists and args.topic is None:
        return "--topic is required to describe a topic"
    return None


def _action(args: argparse.Namespace) -> str:
    return next(a for a in ("create", "list", "describe", "alter", "delete") if getattr(args, a))


async def _topics(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    names = await admin.list_topics(include_internal=not args.exclude_internal)
    matched = select_topics(names, args.topic, exclude_internal=args.exclude_internal)
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


def _leader_known(partition: PartitionInfo, known_brokers: Collection[int]) -> bool:
    """Whether the partition has a leader: an id >= 0 that the Metadata response lists as a broker."""
    return partition.leader >= 0 and partition.leader in known_brokers


def is_under_replicated(partition: PartitionInfo) -> bool:
    """Fewer in-sync replicas than assigned replicas."""
    return len(partition.isr) < len(partition.replicas)


def is_unavailable(partition: PartitionInfo, live_brokers: Collection[int], known_brokers: Collection[int]) -> bool:
    """No leader, or a leader that is not a live broker."""
    return not _leader_known(partition, known_brokers) or partition.leader not in live_brokers


def is_under_min_isr(partition: PartitionInfo, min_isr: int | None, known_brokers: Collection[int]) -> bool:
    """No leader, or fewer in-sync replicas than the topic's ``min.insync.replicas``."""
    if not _leader_known(partition, known_brokers):
        return True
    return min_isr is not None and len(partition.isr) < min_isr


def is_at_min_isr(partition: PartitionInfo, min_isr: int | None) -> bool:
    """Exactly ``min.insync.replicas`` in-sync replicas."""
    return min_isr is not None and len(partition.isr) == min_isr


def min_insync_replicas(configs: Mapping[str, ConfigEntry]) -> int | None:
    """The topic's ``min.insync.replicas`` from its DescribeConfigs entries (None when absent)."""
    entry = configs.get(MIN_INSYNC_REPLICAS)
    if entry is None or entry.value is None:
        return None
    try:
        return int(entry.value)
    except ValueError:
        return None


def non_default_configs(configs: Mapping[str, ConfigEntry]) -> list[ConfigEntry]:
    """Entries whose source is not DEFAULT_CONFIG (Kafka's ``!ConfigEntry.isDefault``), by name."""
    return sorted((e for e in configs.values() if e.source != DEFAULT_CONFIG), key=lambda e: e.name)


@dataclass(frozen=True, slots=True)
class DescribeFilters:
    """What ``--describe`` prints, from its report flags (at most one is set).

    Without flags: every topic line and every partition line. A partition report
    (``under_replicated`` ... ``at_min_isr``) prints only the matching partition lines, no topic
    lines. ``with_overrides`` prints only the topic lines of topics with non-default configs.
    """

    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False
    with_overrides: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DescribeFilters:
        return cls(
            under_replicated=args.under_replicated_partitions,
            unavailable=args.unavailable_partitions,
            under_min_isr=args.under_min_isr_partitions,
            at_min_isr=args.at_min_isr_partitions,
            with_overrides=args.topics_with_overrides,
        )

    @property
    def partition_report(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr or self.at_min_isr

    def selects(
        self,
        partition: PartitionInfo,
        min_isr: int | None,
        live_brokers: Collection[int],
        known_brokers: Collection[int],
    ) -> bool:
        """Whether the partition's line is printed."""
        if self.with_overrides:
            return False
        if not self.partition_report:
            return True
        return (
            (self.under_replicated and is_under_replicated(partition))
            or (self.unavailable and is_unavailable(partition, live_brokers, known_brokers))
            or (self.under_min_isr and is_under_min_isr(partition, min_isr, known_brokers))
            or (self.at_min_isr and is_at_min_isr(partition, min_isr))
        )


def topic_line(desc: TopicDescription, configs: Mapping[str, ConfigEntry]) -> str:
    """``Topic: t\\tTopicId: id\\tPartitionCount: N\\tReplicationFactor: R\\tConfigs: k=v,...``."""
    first = desc.partitions[min(desc.partitions)] if desc.partitions else None
    rf = len(first.replicas) if first is not None else 0
    text = ",".join(f"{e.name}={'null' if e.value is None else e.value}" for e in non_default_configs(configs))
    head = f"Topic: {desc.name}"
    if desc.topic_id.int:
        head += f"\tTopicId: {kafka_uuid(desc.topic_id)}"
    return f"{head}\tPartitionCount: {len(desc.partitions)}\tReplicationFactor: {rf}\tConfigs: {text}"


def partition_line(topic: str, partition: PartitionInfo, known_brokers: Collection[int]) -> str:
    """``\\tTopic: t\\tPartition: p\\tLeader: l\\tReplicas: 1,2\\tIsr: 1`` (``Leader: none`` without one)."""
    leader = str(partition.leader) if _leader_known(partition, known_brokers) else "none"
    return (
        f"\tTopic: {topic}\tPartition: {partition.partition}\tLeader: {leader}"
        f"\tReplicas: {','.join(map(str, partition.replicas))}\tIsr: {','.join(map(str, partition.isr))}"
    )


def describe_lines(
    desc: TopicDescription,
    configs: Mapping[str, ConfigEntry],
    filters: DescribeFilters,
    live_brokers: Collection[int],
    known_brokers: Collection[int] | None = None,
) -> list[str]:
    """The ``--describe`` output of one topic.

    ``configs`` are the topic's DescribeConfigs entries by name; ``live_brokers`` the ids
    DescribeCluster answers; ``known_brokers`` the broker ids of the Metadata response that
    described the topic (a leader outside it prints as ``none``), ``live_brokers`` when None.
    """
    known = live_brokers if known_brokers is None else known_brokers
    lines = []
    if not filters.partition_report and (not filters.with_overrides or non_default_configs(configs)):
        lines.append(topic_line(desc, configs))
    min_isr = min_insync_replicas(configs)
    for p in sorted(desc.partitions):
        partition = desc.partitions[p]
        if filters.selects(partition, min_isr, live_brokers, known):
            lines.append(partition_line(desc.name, partition, known))
    return lines


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    names = await _topics(admin, args)
    if not names:
        return 0
    descriptions = await admin.describe_topics(names)
    known = set(admin.cluster.brokers)
    found = [d for d in (descriptions.get(n) for n in names) if d is not None and not d.error_code]
    configs = await admin.describe_configs([ConfigResource.topic(d.name) for d in found])
    live = {broker[0] for broker in (await admin.describe_cluster()).brokers}
    filters = DescribeFilters.from_args(args)
    for desc in found:
        result = configs.get(ConfigResource.topic(desc.name))
        if result is None or (
            result.error is not None and result.error.error_code == ErrorCode.unknown_topic_or_partition
        ):
            continue  # deleted meanwhile
        if result.error is not None:
            raise CommandError(str(result.error).split(": ", 1)[-1])
        for line in describe_lines(desc, result.configs, filters, live, known):
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
    async with AdminClient(args.bootstrap_server, client_id="odradek-topics", security=client_security(args)) as admin:
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
    parser = build_parser()
    args = parse_args(parser, argv)
    if isinstance(args, int):
        return args
    problem = check_args(args)
    if problem is not None:
        try:
            parser.error(problem)
        except UsageError:
            return 2
    status = run("odradek topics", lambda: _run(args), ERROR_PREFIX)
    sys.stdout.flush()
    return status
