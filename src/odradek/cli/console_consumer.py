"""``odradek console-consumer``: Kafka's ``kafka-console-consumer.sh``, records to stdout.

::

    odradek console-consumer --bootstrap-server H:P --topic t
        [--from-beginning] [--partition N [--offset earliest|latest|N]]
        [--max-messages N] [--timeout-ms N]
        [--property print.key=true --property key.separator=: ...] [--isolation-level read_uncommitted]

Reads every partition of the topic (or only ``--partition N``), from the log start with
``--from-beginning`` or ``--offset earliest``, from offset N with ``--offset N``, else from the end.
``--offset`` needs ``--partition`` and excludes ``--from-beginning`` (as Kafka). No consumer
group is joined and no offsets are committed.

Output as Kafka's ``DefaultMessageFormatter``; properties ``print.timestamp``
(``CreateTime:<ms>``), ``print.partition`` (``Partition:<n>``), ``print.offset``
(``Offset:<n>``), ``print.headers`` (``k:v`` joined by ``headers.separator``, ``NO_HEADERS``
when none), ``print.key``, ``print.value`` (default true), in that order, separated by
``key.separator`` (default a tab), each record ended by ``line.separator`` (default newline);
a null key or value prints ``null.literal`` (default ``null``). Bytes are written as they are.

With ``--zookeeper`` (and ``--group``, ``--whitelist``) it joins a ZooKeeper consumer group instead:
see :mod:`odradek.cli.zk_console`.

Ends after ``--max-messages`` records, or when no record arrived for ``--timeout-ms``, or on
Ctrl-C; then prints ``Processed a total of N messages`` on stderr. Errors (unreachable broker,
unknown topic or partition, bad flag) print one line on stderr and exit 1 (2 for a usage error).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import BinaryIO

from odradek.cli.common import (
    ArgumentParser,
    CommandError,
    add_command_config,
    add_zk_tls_config,
    client_properties,
    command_security,
    parse_args,
    parse_key_values,
    run,
)
from odradek.cli.zk_console import write_records, zk_consume
from odradek.client.cluster import TopicPartition
from odradek.client.consumer import Consumer, ConsumerRecord

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek console-consumer", description="Print a topic's records.")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker(s) to connect to, comma-separated")
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/chroot]", help="join a ZooKeeper consumer group instead (see zk_console.py)"
    )
    add_zk_tls_config(parser)
    parser.add_argument("--topic", help="the topic to consume")
    parser.add_argument("--whitelist", help="with --zookeeper: a regex of topics to consume")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    parser.add_argument("--partition", type=int, help="consume only this partition")
    parser.add_argument("--offset", help="earliest, latest (default) or an offset; needs --partition")
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument("--timeout-ms", type=int, help="exit when no record arrived for this long")
    parser.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="formatter properties: print.key, print.value, print.timestamp, print.partition, "
        "print.offset, print.headers, key.separator, line.separator, headers.separator, "
        "null.literal",
    )
    parser.add_argument(
        "--consumer-property",
        action="append",
        metavar="KEY=VALUE",
        help="consumer properties: client.id, fetch.max.wait.ms, max.partition.fetch.bytes, security.protocol, "
        "ssl.*, sasl.* (over --consumer.config)",
    )
    add_command_config(
        parser,
        "--consumer.config",
        "--command-config",
        help="a properties file of consumer keys (the same as --consumer-property takes)",
    )
    parser.add_argument(
        "--isolation-level",
        default="read_uncommitted",
        choices=["read_uncommitted"],
        help="read_uncommitted (read_committed is not supported by this tool)",
    )
    parser.add_argument("--group", help="with --zookeeper: the consumer group (default console-consumer-<random>)")
    return parser


class Formatter:
    """Kafka's DefaultMessageFormatter over bytes."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, "true" if default else "false").lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(props.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(props.get("headers.separator", ",")).encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, record: ConsumerRecord) -> bytes:
        columns: list[bytes] = []
        if self.print_timestamp:
            columns.append(f"{TIMESTAMP_TYPES.get(record.timestamp_type, 'CreateTime')}:{record.timestamp_ms}".encode())
        if self.print_partition:
            columns.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            columns.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            headers = [
                name.encode() + b":" + (self.null_literal if value is None else value) for name, value in record.headers
            ]
            columns.append(self.headers_separator.join(headers) if headers else b"NO_HEADERS")
        if self.print_key:
            columns.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            columns.append(self.null_literal if record.value is None else record.value)
        return self.key_separator.join(columns) + self.line_separator


def _unescape(text: str) -> str:
    """``\\t`` / ``\\n`` / ``\\r`` typed on a shell command line become the characters."""
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def _start_offset(args: argparse.Namespace) -> int | str:
    if args.offset is not None:
        if args.partition is None:
            raise CommandError("The partition is required when offset is specified.")
        if args.from_beginning:
            raise CommandError("Options from-beginning and offset cannot be specified together.")
        if args.offset in ("earliest", "latest"):
            return str(args.offset)
        try:
            offset = int(args.offset)
        except ValueError:
            raise CommandError(
                f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                "'earliest', 'latest', or a non-negative long."
            ) from None
        if offset < 0:
            raise CommandError(
                f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                "'earliest', 'latest', or a non-negative long."
            )
        return offset
    return "earliest" if args.from_beginning else "latest"


async def _consume(args: argparse.Namespace, out: BinaryIO) -> int:
    if (args.bootstrap_server is None) == (args.zookeeper is None):
        raise CommandError("exactly one of --bootstrap-server and --zookeeper is required")
    formatter = Formatter(parse_key_values(args.property, "--property"))
    consumer_props = client_properties(args, parse_key_values(args.consumer_property, "--consumer-property"))
    if args.zookeeper is not None:
        return await zk_consume(args, consumer_props, formatter, out)
    if args.group:
        raise CommandError("--group needs --zookeeper: with --bootstrap-server this tool reads partitions directly")
    if args.topic is None:
        raise CommandError("--topic is required")
    start = _start_offset(args)
    count = 0
    started = False
    try:
        async with Consumer(
            args.bootstrap_server,
            auto_offset_reset="earliest" if start == "earliest" else "latest",
            client_id=consumer_props.get("client.id", "console-consumer"),
            max_wait_ms=int(consumer_props.get("fetch.max.wait.ms", "500")),
            max_partition_fetch_bytes=int(consumer_props.get("max.partition.fetch.bytes", str(1024 * 1024))),
            security=command_security(consumer_props),
        ) as consumer:
            partitions = await consumer.partitions_for(args.topic)
            if args.partition is not None:
                if args.partition not in partitions:
                    raise CommandError(
                        f"Partition {args.partition} of topic {args.topic} does not exist (it has {len(partitions)})"
                    )
                partitions = [args.partition]
            tps = [TopicPartition(args.topic, p) for p in partitions]
            if isinstance(start, int):
                for tp in tps:
                    await consumer.seek(tp, start)
            await consumer.assign(tps)
            started = True
            loop = asyncio.get_running_loop()
            last_record = loop.time()
            while args.max_messages is None or count < args.max_messages:
                wait_ms = 1000
                if args.timeout_ms is not None:
                    left_ms = int((last_record + args.timeout_ms / 1000 - loop.time()) * 1000)
                    if left_ms <= 0:
                        break
                    wait_ms = min(wait_ms, left_ms)
                records = await consumer.poll(wait_ms)
                if records:
                    last_record = loop.time()
                count = write_records(records, formatter, out, count, args.max_messages)
    finally:
        if started:
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None, stdout: BinaryIO | None = None) -> int:
    """Run the command; records go to ``stdout`` (default ``sys.stdout``'s byte stream)."""
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    if stdout is None:
        sys.stdout.flush()
        stdout = sys.stdout.buffer
    out = stdout
    return run("odradek console-consumer", lambda: _consume(args, out))
