"""``odradek share-groups``: Kafka's ``kafka-share-groups.sh`` (KIP-932 share groups: list,
describe, delete, reset and delete offsets).

Exactly one action, with Kafka's flags::

    odradek share-groups --bootstrap-server H:P --list [--state [STATE,...]]
    odradek share-groups --bootstrap-server H:P --describe (--group g ... | --all-groups)
                         [--offsets | --members [--verbose] | --state [--verbose]]
    odradek share-groups --bootstrap-server H:P --delete --group g [--group g2 ...]
    odradek share-groups --bootstrap-server H:P --reset-offsets --group g (--topic t[:p,p] ... | --all-topics)
                         (--to-earliest | --to-latest | --to-offset N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss)
                         [--dry-run | --execute]
    odradek share-groups --bootstrap-server H:P --delete-offsets --group g --topic t [--topic t2 ...]

Output (columns padded to the widest value, at least 15):

- ``--describe`` (offsets, the default): ``GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET LAG``
  (DescribeShareGroupOffsets; ``-`` where the share-partition was never placed or the lag is not
  known).
- ``--members``: ``GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS``; ``--verbose`` adds
  ``MEMBER-EPOCH`` and ``ASSIGNMENT`` (``topic:0,1;other:2``).
- ``--state``: ``GROUP COORDINATOR (ID) STATE #MEMBERS``; ``--verbose`` adds ``GROUP-EPOCH`` and
  ``ASSIGNMENT-EPOCH``.
- ``--reset-offsets``: ``GROUP TOPIC PARTITION NEW-OFFSET``; only ``--execute`` changes them
  (AlterShareGroupOffsets, which needs the group empty).
- ``--list``: group ids (ListGroups, type ``share``); with ``--state``: ``GROUP STATE``.

Errors print one line on stderr and exit 1 (2 for usage errors). Requests go to each group's
coordinator, retried while it loads.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from odradek.cli.common import ArgumentParser, CommandError, add_command_config, client_security, parse_args, run, table
from odradek.cli.consumer_groups import EARLIEST, LATEST, GroupsClient, _parse_topics, parse_datetime
from odradek.client.admin import AdminClient
from odradek.client.connection import KafkaConnection
from odradek.client.errors import error_for, error_name
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.storage.topic_partition import TopicPartition

_WIDTH = 15


class ShareGroupsClient(GroupsClient):
    """Share group requests routed to each group's coordinator."""

    async def share_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group."""
        return [(g.group_id, g.state) for g in await self.list_groups() if g.group_type == "share"]

    async def describe_share(self, group_id: str) -> tuple[Any, int]:
        def make(conn: KafkaConnection) -> Any:
            return conn.builder(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1)(
                group_ids=(group_id,), include_authorized_operations=False
            )

        resp, node = await self._call(group_id, make, lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code:
            raise error_for(g.error_code, g.error_message, f"share group {group_id}")
        return g, node

    async def start_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None) -> Any:
        def make(conn: KafkaConnection) -> Any:
            rb = conn.builder(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1)
            wanted = (
                None
                if topics is None
                else tuple(
                    rb.make("DescribeShareGroupOffsetsRequestTopic", topic_name=t, partitions=tuple(ps))
                    for t, ps in topics
                )
            )
            group = rb.make("DescribeShareGroupOffsetsRequestGroup", group_id=group_id, topics=wanted)
            return rb(groups=(group,))

        resp, _ = await self._call(group_id, make, lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code:
            raise error_for(g.error_code, g.error_message, f"share group {group_id}")
        return g

    async def alter(self, group_id: str, offsets: dict[TopicPartition, int]) -> Any:
        def make(conn: KafkaConnection) -> Any:
            rb = conn.builder(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0)
            by_topic: dict[str, list[Any]] = {}
            for tp, offset in sorted(offsets.items()):
                by_topic.setdefault(tp.topic, []).append(
                    rb.make("AlterShareGroupOffsetsRequestPartition", partition_index=tp.partition, start_offset=offset)
                )
            topics = tuple(
                rb.make("AlterShareGroupOffsetsRequestTopic", topic_name=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            )
            return rb(group_id=group_id, topics=topics)

        resp, _ = await self._call(group_id, make, lambda r: r.error_code)
        if resp.error_code:
            raise error_for(resp.error_code, resp.error_message, f"share group {group_id}")
        return resp

    async def delete_offsets(self, group_id: str, topics: list[str]) -> Any:
        def make(conn: KafkaConnection) -> Any:
            rb = conn.builder(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0)
            return rb(
                group_id=group_id,
                topics=tuple(rb.make("DeleteShareGroupOffsetsRequestTopic", topic_name=t) for t in topics),
            )

        resp, _ = await self._call(group_id, make, lambda r: r.error_code)
        if resp.error_code:
            raise error_for(resp.error_code, resp.error_message, f"share group {group_id}")
        return resp


def _print(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    for line in table(header, [tuple(str(c) for c in r) for r in rows], (_WIDTH,) * (len(header) - 1) + (None,)):
        print(line)


async def _list(client: ShareGroupsClient, args: argparse.Namespace) -> int:
    groups = await client.share_groups()
    if args.state is None:
        for group_id, _ in groups:
            print(group_id)
        return 0
    states = {s.strip().lower() for s in args.state.split(",") if s.strip()}
    _print(("GROUP", "STATE"), [(g, s) for g, s in groups if not states or s.lower() in states])
    return 0


def _assignment(assignment: Any) -> str:
    return ";".join(
        f"{t.topic_name}:{','.join(str(p) for p in sorted(t.partitions))}" for t in assignment.topic_partitions
    )


async def _describe_one(client: ShareGroupsClient, args: argparse.Namespace, group_id: str) -> None:
    if args.members or args.state is not None:
        g, node = await client.describe_share(group_id)
        if args.members:
            header: tuple[str, ...] = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
            header += ("MEMBER-EPOCH", "ASSIGNMENT") if args.verbose else ()
            rows = []
            for m in g.members:
                count = sum(len(t.partitions) for t in m.assignment.topic_partitions)
                row: tuple[Any, ...] = (group_id, m.member_id, m.client_host, m.client_id, count)
                rows.append(row + ((m.member_epoch, _assignment(m.assignment) or "-") if args.verbose else ()))
            _print(header, rows)
            return
        broker = client.cluster.brokers.get(node)
        where = f"{broker.host}:{broker.port} ({node})" if broker else f"({node})"
        header = ("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS")
        header += ("GROUP-EPOCH", "ASSIGNMENT-EPOCH") if args.verbose else ()
        row = (group_id, where, g.group_state, len(g.members))
        _print(header, [row + ((g.group_epoch, g.assignment_epoch) if args.verbose else ())])
        return
    g = await client.start_offsets(group_id, None)
    rows = []
    for t in sorted(g.topics, key=lambda t: t.topic_name):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            if p.error_code:
                raise error_for(p.error_code, p.error_message, f"{t.topic_name}-{p.partition_index}")
            start = p.start_offset if p.start_offset >= 0 else "-"
            epoch = p.leader_epoch if p.leader_epoch >= 0 else "-"
            lag = p.lag if getattr(p, "lag", -1) >= 0 else "-"
            rows.append((group_id, t.topic_name, p.partition_index, epoch, start, lag))
    _print(("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"), rows)


async def _describe(client: ShareGroupsClient, args: argparse.Namespace) -> int:
    groups = [g for g, _ in await client.share_groups()] if args.all_groups else list(args.group or [])
    if not groups:
        raise CommandError("Option [describe] takes one of these options: [all-groups], [group]")
    for i, group_id in enumerate(groups):
        if i:
            print()
        await _describe_one(client, args, group_id)
    return 0


async def _delete(client: ShareGroupsClient, args: argparse.Namespace) -> int:
    failed = 0
    for group_id in args.group or []:
        error = await client.delete(group_id)
        if error is ErrorCode.none:
            print(f"Deletion of requested share groups ('{group_id}') was successful.")
        else:
            failed += 1
            print(f"Deletion of share group '{group_id}' failed: {error_name(error)}", file=sys.stderr)
    return 1 if failed else 0


async def _reset(client: ShareGroupsClient, args: argparse.Namespace) -> int:
    if not args.group or len(args.group) != 1:
        raise CommandError("Option [reset-offsets] takes exactly one [group]")
    group_id = args.group[0]
    if args.all_topics:
        current = await client.start_offsets(group_id, None)
        targets = [TopicPartition(t.topic_name, p.partition_index) for t in current.topics for p in t.partitions]
    elif args.topic:
        specs = _parse_topics(args.topic)
        known = await client.cluster.refresh([t for t, ps in specs if ps is None])
        targets = []
        for topic, parts in specs:
            if parts is None:
                desc = known.get(topic)
                if desc is None or desc.error_code or not desc.partitions:
                    raise CommandError(f"Topic '{topic}' does not exist")
                parts = sorted(desc.partitions)
            targets += [TopicPartition(topic, p) for p in parts]
    else:
        raise CommandError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    if args.to_offset is not None:
        new = dict.fromkeys(targets, args.to_offset)
    else:
        spec = EARLIEST if args.to_earliest else LATEST if args.to_latest else parse_datetime(args.to_datetime)
        new = await client.offsets(targets, spec)
        if spec >= 0:  # no record at or after the time: the end
            new |= {tp: o for tp, o in (await client.offsets(targets, LATEST)).items() if new.get(tp, -1) < 0}
    if args.execute:
        resp = await client.alter(group_id, new)
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    raise error_for(p.error_code, p.error_message, f"{t.topic_name}-{p.partition_index}")
    _print(
        ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
        [(group_id, tp.topic, tp.partition, o) for tp, o in sorted(new.items())],
    )
    return 0


async def _delete_offsets(client: ShareGroupsClient, args: argparse.Namespace) -> int:
    if not args.group or len(args.group) != 1 or not args.topic:
        raise CommandError("Option [delete-offsets] takes exactly one [group] and at least one [topic]")
    resp = await client.delete_offsets(args.group[0], [t.split(":")[0] for t in args.topic])
    rows = [
        (t.topic_name, error_name(ErrorCode(t.error_code)) if t.error_code else "Successful") for t in resp.responses
    ]
    _print(("TOPIC", "STATUS"), rows)
    return 1 if any(t.error_code for t in resp.responses) else 0


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek share-groups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", required=True, help="the broker(s) to connect to")
    add_command_config(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    for action, doc in (
        ("list", "list the share groups"),
        ("describe", "describe share groups"),
        ("delete", "delete share groups"),
        ("reset-offsets", "reset a share group's start offsets"),
        ("delete-offsets", "delete a share group's state for topics"),
    ):
        actions.add_argument(f"--{action}", action="store_true", help=doc)
    parser.add_argument("--group", action="append", help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="describe every share group")
    parser.add_argument("--offsets", action="store_true", help="describe: start offsets and lag (default)")
    parser.add_argument("--members", action="store_true", help="describe: the members")
    parser.add_argument("--verbose", action="store_true", help="describe --members/--state: more columns")
    parser.add_argument(
        "--state", nargs="?", const="", default=None, help="list: filter by states; describe: the state"
    )
    parser.add_argument("--topic", action="append", help="topic or topic:0,1 (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="reset-offsets: every topic the group consumes")
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    scenario.add_argument("--to-latest", action="store_true", help="reset to the high watermark")
    scenario.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    scenario.add_argument(
        "--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="reset to the first record at or after it"
    )
    run_mode = parser.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (default)")
    run_mode.add_argument("--execute", action="store_true", help="set the new offsets")
    parser.add_argument("--timeout", type=int, default=30000, help="request timeout in ms")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    if args.reset_offsets and not (
        args.to_earliest or args.to_latest or args.to_offset is not None or args.to_datetime
    ):
        print(
            "odradek share-groups: error: --reset-offsets needs one of --to-earliest, --to-latest, --to-offset, "
            "--to-datetime (see --help)",
            file=sys.stderr,
        )
        return 2

    async def command() -> int:
        async with AdminClient(
            args.bootstrap_server,
            client_id="odradek-share-groups",
            request_timeout_ms=args.timeout,
            security=client_security(args),
        ) as admin:
            client = ShareGroupsClient(admin)
            if args.list:
                return await _list(client, args)
            if args.describe:
                return await _describe(client, args)
            if args.delete:
                return await _delete(client, args)
            if args.delete_offsets:
                return await _delete_offsets(client, args)
            return await _reset(client, args)

    return run("odradek share-groups", command, "Error: ")
