"""``odradek console-producer``: Kafka's ``kafka-console-producer.sh``, one record per stdin line.

::

    odradek console-producer --bootstrap-server H:P --topic t
        [--property parse.key=true --property key.separator=:]
        [--compression-codec [gzip|snappy|lz4|zstd|none]] [--request-required-acks -1|0|1]
        [--producer-property acks=1 ...] [--batch-size N] [--sync]

Each line (without its line ending) is a record value. With ``parse.key=true`` the text before the
first ``key.separator`` (default a tab) is the key; a line without the separator is an error
(exit 1) unless ``ignore.error=true``, which sends the whole line as the value with no key.
``null.marker=X`` makes a key or value equal to ``X`` null. ``parse.headers=true`` reads headers
before the key/value: ``h1:v1,h2:v2<TAB>value`` (``headers.delimiter`` default tab,
``headers.separator`` ``,``, ``headers.key.separator`` ``:``).

``--compression-codec`` alone means gzip (as Kafka). Lines are sent as they arrive; lines that
are already waiting are sent together (at most ``--batch-size`` per request, default 200;
``--sync`` sends every line on its own). The command ends at end of input after every record is
acknowledged. Errors (unreachable broker, unknown topic with auto-creation off, a record too
large) print one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from typing import Any, TextIO

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
    zk_tls_context,
)
from odradek.client.producer import Producer, Record, compression_codec
from odradek.zkclients.producer import Producer as ZkProducer


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek console-producer", description="Produce stdin lines to a topic.")
    parser.add_argument(
        "--bootstrap-server",
        "--broker-list",
        dest="bootstrap_server",
        metavar="HOST:PORT",
        help="the broker(s) to connect to, comma-separated",
    )
    parser.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        help="find brokers and partition leaders in ZooKeeper instead (seed 004's broker discovery)",
    )
    add_zk_tls_config(parser)
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="line reader properties: parse.key, key.separator, ignore.error, null.marker, "
        "parse.headers, headers.delimiter, headers.separator, headers.key.separator",
    )
    parser.add_argument(
        "--producer-property",
        action="append",
        metavar="KEY=VALUE",
        help="producer properties: acks, compression.type, client.id, request.timeout.ms, security.protocol, "
        "ssl.*, sasl.* (over --producer.config)",
    )
    add_command_config(
        parser,
        "--producer.config",
        "--command-config",
        help="a properties file of producer keys (the same as --producer-property takes)",
    )
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        default=None,
        help="none, gzip (the default when the flag has no value), snappy, lz4 or zstd",
    )
    parser.add_argument("--request-required-acks", default=None, help="-1 (all, the default), 0 or 1")
    parser.add_argument("--request-timeout-ms", type=int, default=None, help="produce request timeout")
    parser.add_argument("--batch-size", type=int, default=200, help="most lines sent in one request")
    parser.add_argument("--sync", action="store_true", help="send each line on its own")
    return parser


class LineParser:
    """Turns one input line into a Record according to the reader properties."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.key_separator = props.get("key.separator", "\t")
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"
        self.null_marker = props.get("null.marker")
        self.parse_headers = props.get("parse.headers", "false").lower() == "true"
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        if self.parse_key and not self.key_separator:
            raise CommandError("key.separator must not be empty")

    def _bytes(self, text: str) -> bytes | None:
        return None if self.null_marker is not None and text == self.null_marker else text.encode("utf-8")

    def parse(self, line: str, number: int) -> Record:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, sep, line = line.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise CommandError(f"No headers delimiter found on line number {number}: '{head}'")
                line = head
            else:
                for item in filter(None, head.split(self.headers_separator)):
                    name, _, value = item.partition(self.headers_key_separator)
                    headers.append((name, self._bytes(value)))
        if not self.parse_key:
            return Record(None, self._bytes(line), headers)
        key, sep, value = line.partition(self.key_separator)
        if not sep:
            if self.ignore_error:
                return Record(None, self._bytes(line), headers)
            raise CommandError(f"No key separator found on line number {number}: '{line}'")
        return Record(self._bytes(key), self._bytes(value), headers)


def _start_reader(stream: TextIO, queue: asyncio.Queue[str | None], loop: asyncio.AbstractEventLoop) -> None:
    """Read ``stream`` on a daemon thread, putting lines (then None at end of input) on ``queue``."""

    def read() -> None:
        try:
            for line in stream:
                loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\r\n"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            print(f"odradek console-producer: cannot read input: {exc}", file=sys.stderr)
        finally:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except RuntimeError:  # the loop is closed: the command already ended
                pass

    threading.Thread(target=read, name="console-producer-stdin", daemon=True).start()


async def _produce(args: argparse.Namespace, stream: TextIO) -> int:
    reader_props = parse_key_values(args.property, "--property")
    producer_props = client_properties(args, parse_key_values(args.producer_property, "--producer-property"))
    lines = LineParser(reader_props)
    acks_text = args.request_required_acks or producer_props.get("acks", "-1")
    acks = -1 if acks_text == "all" else int(acks_text)
    codec = compression_codec(args.compression_codec or producer_props.get("compression.type", "none"))
    timeout_ms = args.request_timeout_ms or int(producer_props.get("request.timeout.ms", "30000"))
    batch_size = 1 if args.sync else max(1, args.batch_size)
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    _start_reader(stream, queue, asyncio.get_running_loop())
    number = 0
    if (args.bootstrap_server is None) == (args.zookeeper is None):
        raise CommandError("exactly one of --bootstrap-server and --zookeeper is required")
    config: dict[str, Any] = {
        "acks": acks,
        "compression": codec,
        "client_id": producer_props.get("client.id", "console-producer"),
        "request_timeout_ms": timeout_ms,
        "security": command_security(producer_props),
    }
    producer_ = (
        ZkProducer(zookeeper_connect=args.zookeeper, zookeeper_tls=zk_tls_context(args.zk_tls_config_file), **config)
        if args.zookeeper
        else None
    )
    async with producer_ or Producer(args.bootstrap_server, **config) as producer:
        await producer.partitions_for(args.topic)  # fail fast on an unknown topic or unreachable broker
        done = False
        while not done:
            line = await queue.get()
            pending: list[Record] = []
            try:
                while line is not None:
                    number += 1
                    pending.append(lines.parse(line, number))
                    if len(pending) >= batch_size or queue.empty():
                        break
                    line = queue.get_nowait()
            finally:  # lines before a bad one are still sent, as Kafka's producer does
                if pending:
                    await producer.send_batch(args.topic, pending)
            done = line is None
    return 0


def main(argv: list[str] | None = None, stdin: TextIO | None = None) -> int:
    """Run the command; ``stdin`` defaults to ``sys.stdin`` (tests pass a StringIO)."""
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    stream = stdin if stdin is not None else sys.stdin
    return run("odradek console-producer", lambda: _produce(args, stream))
