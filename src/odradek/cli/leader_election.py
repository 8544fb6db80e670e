"""``odradek leader-election``: preferred or unclean leader election (Kafka's kafka-leader-election.sh).

    odradek leader-election --bootstrap-server B --election-type preferred|unclean
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)

The JSON file is Kafka's: ``{"partitions": [{"topic": "t", "partition": 0}, ...]}``. The request
(ElectLeaders) goes to the controller. Output, as Kafka's LeaderElectionCommand:

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: PREFERRED_LEADER_NOT_AVAILABLE

Exit status 0 when every partition was elected or needed no election, 1 otherwise (and for an
unreachable cluster or a bad file), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from odradek.cli.common import ArgumentParser, CommandError, add_command_config, client_security, parse_args, run
from odradek.client.admin import AdminClient
from odradek.client.security import PLAINTEXT_SECURITY, ClientSecurity
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek leader-election", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    add_command_config(parser)
    parser.add_argument("--election-type", required=True, choices=sorted(ELECTION_TYPES), type=str.lower)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--topic")
    target.add_argument("--all-topic-partitions", action="store_true")
    target.add_argument("--path-to-json-file", type=Path)
    parser.add_argument("--partition", type=int)
    return parser


def partitions_from(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """The partitions to elect, or None for every partition. CommandError for a bad selection."""
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is None:
            raise CommandError("--partition is required with --topic")
        return [(args.topic, args.partition)]
    try:
        data = json.loads(args.path_to_json_file.read_text())
        return [(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"cannot read partitions from {args.path_to_json_file}: {exc}") from None


def report(election: str, results: dict[tuple[str, int], ErrorCode]) -> tuple[list[str], bool]:
    """Kafka's output lines, and whether every partition ended with a valid leader."""
    name = election.upper()
    done = [f"{t}-{p}" for (t, p), e in sorted(results.items()) if e == ErrorCode.none]
    noop = [f"{t}-{p}" for (t, p), e in sorted(results.items()) if e == ErrorCode.election_not_needed]
    failed = [
        (t, p, e) for (t, p), e in sorted(results.items()) if e not in (ErrorCode.none, ErrorCode.election_not_needed)
    ]
    lines = []
    if done:
        lines.append(f"Successfully completed leader election ({name}) for partitions {', '.join(done)}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(noop)}")
    for t, p, e in failed:
        lines.append(f"Error completing leader election ({name}) for partition: {t}-{p}: {e.name.upper()}")
    return lines, not failed


async def elect(
    bootstrap: str,
    election: str,
    partitions: list[tuple[str, int]] | None,
    security: ClientSecurity = PLAINTEXT_SECURITY,
) -> dict[tuple[str, int], ErrorCode]:
    async with AdminClient(bootstrap, security=security) as admin:
        for attempt in range(2):
            conn = await admin.cluster.controller_connection()
            rb = conn.builder(ApiKey.ELECT_LEADERS, 0, 2)
            topics: dict[str, list[int]] = {}
            for t, p in partitions or ():
                topics.setdefault(t, []).append(p)
            request = rb(
                election_type=ELECTION_TYPES[election],
                topic_partitions=None
                if partitions is None
                else tuple(rb.make("TopicPartitions", topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
                timeout=datetime.timedelta(seconds=30),
            )
            response: Any = await conn.send(request)
            error = ErrorCode(getattr(response, "error_code", 0))
            if error == ErrorCode.not_controller and attempt == 0:
                await admin.cluster.refresh(topics=[])
                continue
            if error != ErrorCode.none:
                raise CommandError(f"leader election failed: {error.name.upper()}")
            return {
                (r.topic, int(p.partition_id)): ErrorCode(p.error_code)
                for r in response.replica_election_results
                for p in r.partition_result
            }
    raise CommandError("no controller answered")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args

    async def go() -> int:
        results = await elect(args.bootstrap_server, args.election_type, partitions_from(args), client_security(args))
        lines, ok = report(args.election_type, results)
        print("\n".join(lines))
        return 0 if ok else 1

    return run("odradek leader-election", go)
