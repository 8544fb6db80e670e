"""``odradek consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` (list, describe, delete, reset offsets).

Exactly one action, with Kafka's flags::

    odradek consumer-groups --bootstrap-server H:P --list [--state [STATE,...]]
    odradek consumer-groups --bootstrap-server H:P --describe (--group g ... | --all-groups)
                            [--offsets | --members [--verbose] | --state]
    odradek consumer-groups --bootstrap-server H:P --delete --group g [--group g2 ...]
    odradek consumer-groups --bootstrap-server H:P --reset-offsets --group g
                            (--topic t[:p,p] ... | --all-topics)
                            (--to-earliest | --to-latest | --to-current | --to-offset N
                             | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --shift-by N)
                            [--dry-run | --execute]

Output as Kafka's ``ConsumerGroupCommand`` (columns padded to the widest value, at least 15):

- ``--describe`` (offsets, the default): ``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET
  LAG CONSUMER-ID HOST CLIENT-ID``; one row per assigned partition (members with most partitions
  first), then committed partitions no member owns (``-`` for the member columns). ``-`` marks a
  missing value (no commit yet: no lag either). LOG-END-OFFSET is the high watermark.
- ``--members``: ``GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS``; ``--verbose`` adds
  ``GROUP-INSTANCE-ID`` and ``ASSIGNMENT`` (``topic(0,1),other(2)``).
- ``--state``: ``GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS``.
- ``--reset-offsets``: ``GROUP TOPIC PARTITION NEW-OFFSET``; without ``--execute`` nothing is
  committed (Kafka's dry run). Offsets are clamped to [log start, high watermark]; ``--shift-by``
  needs a committed offset; the group must have no members ("inactive").
- ``--list``: group ids, one per line; with ``--state``: ``GROUP STATE``.
- An empty group prints ``Consumer group 'g' has no active members.`` (stderr) before its rows; a
  rebalancing one ``Warning: Consumer group 'g' is rebalancing.``; an unknown one
  ``Error: Consumer group 'g' does not exist.`` (exit 1).

With ``--zookeeper`` instead of ``--bootstrap-server`` the groups are the ZooKeeper consumer
groups of seed 004 (``--list``, ``--describe``, ``--reset-offsets``): see :mod:`odradek.cli.zk_groups`.

Errors print one line on stderr and exit 1 (2 for usage errors). Groups are answered by their
coordinator (FindCoordinator), which may be loading: such answers are retried for a few seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.cli.common import (
    ArgumentParser,
    CommandError,
    add_command_config,
    add_zk_tls_config,
    client_security,
    parse_args,
    run,
    table,
)
from odradek.cli.consumer_groups_view import Group, Listed, Member, describe_members, describe_state, state_notice
from odradek.cli.zk_groups import zk_groups
from odradek.client.admin import AdminClient
from odradek.client.connection import KafkaConnection
from odradek.client.errors import error_for, error_name
from odradek.client.group_offsets import GroupOffsetsClient
from odradek.coordinator.group.schemas import SchemaError, decode_assignment
from odradek.errors import ErrorCode, UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.storage.topic_partition import TopicPartition

EARLIEST, LATEST = -2, -1
_RETRY = frozenset(
    {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator}
)
_ATTEMPTS = 50


class GroupsClient(GroupOffsetsClient):
    """Group requests routed to each group's coordinator, over an :class:`AdminClient`."""

    def __init__(self, admin: AdminClient) -> None:
        super().__init__(admin.cluster)
        self.admin = admin

    async def list_groups(self) -> list[Listed]:
        """Every group of every broker, with its protocol type, state and type (``classic`` or
        ``consumer``, ListGroups v5; ``classic`` from an older broker)."""
        await self.cluster.refresh(topics=[])
        out: dict[str, Listed] = {}
        for broker_id in sorted(self.cluster.brokers):
            conn = await self.cluster.connection(broker_id)
            for _ in range(_ATTEMPTS):
                resp = await conn.send(conn.builder(ApiKey.LIST_GROUPS, 0, 5)())
                if ErrorCode(resp.error_code) is not ErrorCode.coordinator_load_in_progress:
                    break
                await asyncio.sleep(0.1)
            if resp.error_code:
                raise error_for(resp.error_code, None, f"ListGroups on broker {broker_id}")
            for g in resp.groups:
                kind = getattr(g, "group_type", "") or "classic"
                out[g.group_id] = Listed(g.group_id, g.protocol_type, getattr(g, "group_state", ""), kind)
        return [out[k] for k in sorted(out)]

    async def describe(self, group_id: str) -> Group:
        def make(conn: KafkaConnection) -> Any:
            return conn.builder(ApiKey.DESCRIBE_GROUPS, 0, 5)(groups=(group_id,), include_authorized_operations=False)

        resp, node = await self._call(group_id, make, lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code == ErrorCode.group_id_not_found:
            consumer = await self.describe_consumer_group(group_id)
            if consumer is not None:
                return consumer
        if g.error_code and g.error_code != ErrorCode.group_id_not_found:
            raise error_for(g.error_code, None, f"group {group_id}")
        members = []
        for m in g.members:
            try:
                assignment = decode_assignment(m.member_assignment) if g.protocol_type == "consumer" else {}
            except SchemaError:
                assignment = {}
            members.append(
                Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host, assignment)
            )
        broker = self.cluster.brokers.get(node)
        where = f"{broker.host}:{broker.port} ({node})" if broker else f"({node})"
        state = "Dead" if g.error_code else g.group_state
        return Group(group_id, state, g.protocol_type, g.protocol_data, members, where)

    async def describe_consumer_group(self, group_id: str) -> Group | None:
        """A consumer group (KIP-848) by ConsumerGroupDescribe; None when the group is not one."""

        def make(conn: KafkaConnection) -> Any:
            return conn.builder(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)(
                group_ids=(group_id,), include_authorized_operations=False
            )

        try:
            resp, node = await self._call(group_id, make, lambda r: r.groups[0].error_code)
        except UnsupportedVersionError:
            return None
        g = resp.groups[0]
        if g.error_code:
            return None

        def named(assignment: Any) -> dict[str, list[int]]:
            return {t.topic_name: sorted(t.partitions) for t in assignment.topic_partitions}

        members = [
            Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                named(m.assignment),
                int(m.member_epoch),
                named(m.target_assignment),
            )
            for m in g.members
        ]
        broker = self.cluster.brokers.get(node)
        where = f"{broker.host}:{broker.port} ({node})" if broker else f"({node})"
        return Group(
            group_id,
            g.group_state,
            "consumer",
            g.assignor_name,
            members,
            where,
            "consumer",
            g.group_epoch,
            g.assignment_epoch,
        )

    async def delete(self, group_id: str) -> ErrorCode:
        def make(conn: KafkaConnection) -> Any:
            return conn.builder(ApiKey.DELETE_GROUPS, 0, 2)(groups_names=(group_id,))

        resp, _ = await self._call(group_id, make, lambda r: r.results[0].error_code)
        return ErrorCode(resp.results[0].error_code)

    async def offsets(self, partitions: Sequence[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """ListOffsets: EARLIEST, LATEST or a timestamp; partitions that fail are left out."""
        if not partitions:
            return {}
        result = await self.admin.list_offsets(dict.fromkeys(partitions, spec))
        return {tp: r.offset for tp, r in result.items() if r.error is None}


# --- output ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LagRow:
    """One partition of a group's offsets: committed offset, high watermark, lag and owner (or None)."""

    tp: TopicPartition
    committed: int | None
    log_end: int | None
    lag: int | None
    owner: Member | None


async def lag_rows(client: GroupsClient, group: Group) -> list[LagRow]:
    """Assigned partitions (members with most partitions first), then committed partitions no member
    owns: the rows of ``--describe --offsets``, shared with the console."""
    committed = await client.committed(group.group_id)
    owners: dict[TopicPartition, Member] = {}
    for member in sorted(group.members, key=lambda m: -len(m.partitions)):
        for tp in member.partitions:
            owners.setdefault(tp, member)
    partitions = list(owners) + sorted(tp for tp in committed if tp not in owners)
    log_end = await client.offsets(partitions, LATEST)
    out = []
    for tp in partitions:
        offset, end = committed.get(tp), log_end.get(tp)
        lag = end - offset if offset is not None and end is not None else None
        out.append(LagRow(tp, offset, end, lag, owners.get(tp)))
    return out


async def _describe_offsets(client: GroupsClient, group: Group) -> None:
    rows = [
        (
            group.group_id,
            r.tp.topic,
            r.tp.partition,
            r.committed,
            r.log_end,
            r.lag,
            r.owner.member_id if r.owner else None,
            r.owner.host if r.owner else None,
            r.owner.client_id if r.owner else None,
        )
        for r in await lag_rows(client, group)
    ]
    print()
    header = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    for line in table(header, rows, (15, 15, 10, 15, 15, 15, 15, 15, None)):
        print(line)


# --- actions ----------------------------------------------------------------------------------------


async def _list(client: GroupsClient, args: argparse.Namespace) -> int:
    groups = await client.list_groups()
    if args.state is None and args.type is None:
        for g in groups:
            print(g.group_id)
        return 0
    states = {s.strip().lower() for s in (args.state or "").split(",") if s.strip()}
    types = {t.strip().lower() for t in (args.type or "").split(",") if t.strip()}
    chosen = [g for g in groups if (not states or g.state.lower() in states) and (not types or g.group_type in types)]
    header: tuple[str, ...] = ("GROUP",)
    if args.type is not None:
        header += ("TYPE",)
    if args.state is not None:
        header += ("STATE",)
    rows = [
        (
            g.group_id,
            *((g.group_type,) if args.type is not None else ()),
            *((g.state,) if args.state is not None else ()),
        )
        for g in chosen
    ]
    for line in table(header, rows, (15,) * (len(header) - 1) + (None,)):
        print(line)
    return 0


async def _describe(client: GroupsClient, args: argparse.Namespace) -> int:
    names = args.group or []
    if args.all_groups:
        names = [g.group_id for g in await client.list_groups()]
    if not names:
        raise CommandError("Option [describe] takes one of these options: [all-groups], [group]")
    status = 0
    for name in names:
        group = await client.describe(name)
        if args.members:
            if state_notice(group):
                describe_members(group, args.verbose)
            else:
                status = 1
        elif args.state is not None:
            if group.state == "Dead":
                state_notice(group)
                status = 1
            else:
                describe_state(group)
        elif state_notice(group):
            await _describe_offsets(client, group)
        else:
            status = 1
    return status


async def _delete(client: GroupsClient, args: argparse.Namespace) -> int:
    if not args.group:
        raise CommandError("Option [delete] takes the option: [group]")
    failed = {}
    for name in args.group:
        code = await client.delete(name)
        if code is not ErrorCode.none:
            failed[name] = code
    ok = [g for g in args.group if g not in failed]
    if ok:
        listed = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({listed}) was successful.")
    if failed:
        print("Deletion of some consumer groups failed:")
        for name, code in failed.items():
            print(f"* Group '{name}' could not be deleted due to: {error_name(code)}")
        return 1
    return 0


def _parse_topics(values: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    out = []
    for value in values:
        topic, sep, parts = value.partition(":")
        if not topic:
            raise CommandError(f"invalid --topic {value!r}")
        try:
            out.append((topic, [int(p) for p in parts.split(",")] if sep else None))
        except ValueError:
            raise CommandError(f"invalid --topic {value!r}: expected topic or topic:0,1,2") from None
    return out


def parse_datetime(text: str) -> int:
    """``YYYY-MM-DDTHH:mm:SS.sss`` (optionally with ``Z`` or ``+hh:mm``; local time otherwise) -> ms."""
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"invalid --to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


async def _reset_targets(
    client: GroupsClient, args: argparse.Namespace, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    if not args.topic:
        raise CommandError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    specs = _parse_topics(args.topic)
    missing = [t for t, parts in specs if parts is None]
    known = await client.cluster.refresh(missing) if missing else {}
    targets: list[TopicPartition] = []
    for topic, parts in specs:
        if parts is None:
            desc = known.get(topic)
            if desc is None or desc.error_code or not desc.partitions:
                raise CommandError(f"Topic '{topic}' does not exist")
            parts = sorted(desc.partitions)
        targets.extend(TopicPartition(topic, p) for p in parts)
    return targets


RESET_KINDS = ("earliest", "latest", "current", "offset", "shift", "timestamp")
"""How :func:`reset_plan` picks new offsets (Kafka's ``--to-earliest``, ``--to-latest``,
``--to-current``, ``--to-offset N``, ``--shift-by N``, ``--to-datetime`` as ms)."""


async def reset_plan(
    client: GroupsClient,
    targets: Sequence[TopicPartition],
    committed: dict[TopicPartition, int],
    how: str,
    value: int | None,
) -> dict[TopicPartition, int]:
    """The new offset of each target partition, clamped to [log start, high watermark] as Kafka's
    ``ConsumerGroupCommand``; CommandError when offsets cannot be read or a shift has no commit.
    Shared by ``odradek consumer-groups --reset-offsets`` and the console."""
    if how not in RESET_KINDS or (how in ("offset", "shift", "timestamp") and value is None):
        raise CommandError(f"invalid reset {how!r}")
    earliest = await client.offsets(targets, EARLIEST)
    latest = await client.offsets(targets, LATEST)
    new: dict[TopicPartition, int] = {}
    for tp in targets:
        low, high = earliest.get(tp), latest.get(tp)
        if low is None or high is None:
            raise CommandError(f"cannot read the offsets of {tp}")
        if how == "earliest":
            offset = low
        elif how == "latest":
            offset = high
        elif how == "current":
            offset = committed.get(tp, high)
        elif how == "offset":
            assert value is not None
            offset = value
        elif how == "shift":
            assert value is not None
            if tp not in committed:
                raise CommandError(f"Cannot shift offset for partition {tp} since there is no current committed offset")
            offset = committed[tp] + value
        else:
            assert value is not None
            by_time = await client.offsets([tp], value)
            offset = by_time.get(tp, -1)
            if offset < 0:
                offset = high
        new[tp] = min(max(offset, low), high)
    return new


async def _reset(client: GroupsClient, args: argparse.Namespace) -> int:
    if not args.group or len(args.group) != 1:
        raise CommandError("Option [reset-offsets] takes exactly one [group]")
    name = args.group[0]
    group = await client.describe(name)
    if group.state not in ("Empty", "Dead"):
        raise CommandError(
            f"Assignments can only be reset if the group '{name}' is inactive, but the current state is {group.state}."
        )
    committed = await client.committed(name) if group.state != "Dead" else {}
    targets = await _reset_targets(client, args, committed)
    if args.to_earliest:
        how, value = "earliest", None
    elif args.to_latest:
        how, value = "latest", None
    elif args.to_current:
        how, value = "current", None
    elif args.to_offset is not None:
        how, value = "offset", args.to_offset
    elif args.shift_by is not None:
        how, value = "shift", args.shift_by
    else:
        how, value = "timestamp", parse_datetime(args.to_datetime)
    new = await reset_plan(client, targets, committed, how, value)
    if args.execute:
        errors = await client.commit(name, new)
        bad = {tp: e for tp, e in errors.items() if e is not ErrorCode.none}
        if bad:
            raise CommandError("; ".join(f"{tp}: {error_name(e)}" for tp, e in sorted(bad.items())))
    rows = [(name, tp.topic, tp.partition, offset) for tp, offset in sorted(new.items())]
    print()
    for line in table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows, (30, 30, 10, None)):
        print(line)
    return 0


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="odradek consumer-groups", description="List, describe, delete consumer groups and reset their offsets."
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker(s) to connect to, comma-separated")
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/chroot]", help="ZooKeeper consumer groups instead (see zk_groups.py)"
    )
    add_zk_tls_config(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    for action, doc in (
        ("list", "list every group"),
        ("describe", "describe groups"),
        ("delete", "delete empty groups"),
        ("reset-offsets", "reset a group's committed offsets"),
    ):
        actions.add_argument(f"--{action}", action="store_true", help=doc)
    parser.add_argument("--group", action="append", help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="describe every group")
    parser.add_argument("--offsets", action="store_true", help="describe: committed offsets and lag (default)")
    parser.add_argument("--members", action="store_true", help="describe: the members")
    parser.add_argument("--verbose", action="store_true", help="describe --members: instance ids and assignments")
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATES",
        help="describe: the group's state; list: show states (optionally only these, comma-separated)",
    )
    parser.add_argument(
        "--type",
        nargs="?",
        const="",
        default=None,
        metavar="TYPES",
        help="list: show group types (optionally only these, comma-separated: classic, consumer)",
    )
    parser.add_argument("--topic", action="append", help="reset-offsets: topic or topic:0,1 (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="reset-offsets: every topic with a committed offset")
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    scenario.add_argument("--to-latest", action="store_true", help="reset to the high watermark")
    scenario.add_argument("--to-current", action="store_true", help="reset to the committed offset")
    scenario.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    scenario.add_argument(
        "--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="reset to the first offset at/after it"
    )
    scenario.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    run_mode = parser.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (default)")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_command_config(parser)
    parser.add_argument("--timeout", type=int, default=30000, help="request timeout in ms")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    if args.reset_offsets and not any(
        (
            args.to_earliest,
            args.to_latest,
            args.to_current,
            args.to_offset is not None,
            args.to_datetime,
            args.shift_by is not None,
        )
    ):
        print(
            "odradek consumer-groups: error: --reset-offsets needs one of --to-earliest, --to-latest, "
            "--to-current, --to-offset, --to-datetime, --shift-by (see --help)",
            file=sys.stderr,
        )
        return 2

    if (args.bootstrap_server is None) == (args.zookeeper is None):
        print("odradek consumer-groups: error: exactly one of --bootstrap-server and --zookeeper", file=sys.stderr)
        return 2

    async def command() -> int:
        if args.zookeeper is not None:
            return await zk_groups(args)
        async with AdminClient(
            args.bootstrap_server,
            client_id="odradek-consumer-groups",
            request_timeout_ms=args.timeout,
            security=client_security(args),
        ) as admin:
            client = GroupsClient(admin)
            if args.list:
                return await _list(client, args)
            if args.describe:
                return await _describe(client, args)
            if args.delete:
                return await _delete(client, args)
            return await _reset(client, args)

    return run("odradek consumer-groups", command, "Error: ")
