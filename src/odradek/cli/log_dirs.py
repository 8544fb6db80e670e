"""``odradek log-dirs``: describe the brokers' log directories (Kafka's kafka-log-dirs.sh).

    odradek log-dirs --bootstrap-server B --describe [--broker-list 1,2] [--topic-list t1,t2]

Sends DescribeLogDirs to each broker (all live brokers unless ``--broker-list``) and prints, as
Kafka's LogDirsCommand, two lines: ``Querying brokers for log directories information`` and
``Received log directory information from brokers 1,2,3``, then one JSON document:
``{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,"partitions":
[{"partition":"t-0","size":1234,"offsetLag":0,"isFuture":false}]}]}]}``. Exit status 0, 1 when
a broker cannot be reached, 2 for a usage error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from odradek.cli.common import ArgumentParser, CommandError, add_command_config, client_security, parse_args, run
from odradek.client.admin import AdminClient
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek log-dirs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    add_command_config(parser)
    parser.add_argument("--describe", action="store_true", required=True)
    parser.add_argument("--broker-list", help="comma-separated broker ids (default: every live broker)")
    parser.add_argument("--topic-list", help="comma-separated topics (default: every topic)")
    return parser


async def describe(admin: AdminClient, brokers: list[int] | None, topics: list[str] | None) -> list[dict[str, Any]]:
    if brokers is None:
        brokers = [b[0] for b in (await admin.describe_cluster()).brokers]
    partitions = None
    if topics is not None:
        described = await admin.describe_topics(topics)
        partitions = {t: sorted(d.partitions) for t, d in described.items() if d.error_code == ErrorCode.none}
    out = []
    for broker_id in brokers:
        conn = await admin.cluster.connection(broker_id)
        rb = conn.builder(ApiKey.DESCRIBE_LOG_DIRS, 1, 4)
        request = rb(
            topics=None
            if partitions is None
            else tuple(rb.make("DescribableLogDirTopic", topic=t, partitions=tuple(ps)) for t, ps in partitions.items())
        )
        response: Any = await conn.send(request)
        dirs = []
        for result in response.results:
            error = ErrorCode(result.error_code)
            dirs.append(
                {
                    "logDir": result.log_dir,
                    "error": None if error == ErrorCode.none else error.name.upper(),
                    "partitions": [
                        {
                            "partition": f"{t.name}-{p.partition_index}",
                            "size": int(p.partition_size),
                            "offsetLag": int(p.offset_lag),
                            "isFuture": bool(p.is_future_key),
                        }
                        for t in result.topics
                        for p in t.partitions
                    ],
                }
            )
        out.append({"broker": broker_id, "logDirs": dirs})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args

    async def go() -> int:
        try:
            brokers = None if args.broker_list is None else [int(b) for b in args.broker_list.split(",")]
        except ValueError:
            raise CommandError(f"--broker-list must be comma-separated broker ids: {args.broker_list!r}") from None
        topics = None if args.topic_list is None else [t for t in args.topic_list.split(",") if t]
        print("Querying brokers for log directories information")
        async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
            described = await describe(admin, brokers, topics)
        print(f"Received log directory information from brokers {','.join(str(b['broker']) for b in described)}")
        print(json.dumps({"version": 1, "brokers": described}, separators=(",", ":")))
        return 0

    return run("odradek log-dirs", go)
