"""``odradek reassign-partitions``: move partition replicas between brokers (Kafka's
kafka-reassign-partitions.sh).

    odradek reassign-partitions --bootstrap-server B --generate
        --topics-to-move-json-file topics.json --broker-list "0,1,2"
    odradek reassign-partitions --bootstrap-server B --execute --reassignment-json-file f.json
    odradek reassign-partitions --bootstrap-server B --verify --reassignment-json-file f.json
    odradek reassign-partitions --bootstrap-server B --cancel --reassignment-json-file f.json
    odradek reassign-partitions --bootstrap-server B --list

Files are Kafka's: ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1,2]}]}``
(with ``log_dirs``: see :mod:`odradek.cli.replica_log_dirs`) and, for ``--generate``, ``{"version":1,"topics":[{"topic":
"t"}]}``. Requests go to the controller (AlterPartitionReassignments, ListPartitionReassignments).
Output lines are Kafka's: ``--execute`` prints the current assignment for rollback and
"Successfully started partition reassignment(s) for t-0,t-1"; ``--verify`` prints one status line
per partition ("Reassignment of partition t-0 is completed." / "... is still in progress.").
``--generate`` proposes Kafka's rack-unaware round-robin assignment over the broker list, keeping
each partition's replication factor. ``--throttle R`` (``--execute``) sets Kafka's throttles before
the move: ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` = R on
every broker involved (dynamic broker configs), ``leader.replication.throttled.replicas`` = the
current replicas and ``follower.replication.throttled.replicas`` = the added ones on each topic;
``--verify`` clears them once every partition is done (unless ``--preserve-throttles``).
Exit status 0 on success (``--verify`` too, as Kafka), 1 on a refused request, a bad file or an
unreachable cluster, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from odradek.cli.common import ArgumentParser, CommandError, add_command_config, client_security, parse_args, run
from odradek.cli.replica_log_dirs import execute_moves, parse_log_dirs, verify_moves
from odradek.client.admin import AdminClient, AlterConfigOp, ConfigResource
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.server.replica_assignment import assign_replicas

Assignment = dict[tuple[str, int], list[int]]


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="odradek reassign-partitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    add_command_config(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("generate", "execute", "verify", "cancel", "list"):
        action.add_argument(f"--{name}", action="store_true")
    parser.add_argument("--reassignment-json-file", type=Path)
    parser.add_argument("--topics-to-move-json-file", type=Path)
    parser.add_argument("--broker-list")
    parser.add_argument("--throttle", type=int, default=-1, help="replication bytes/s while moving (--execute)")
    parser.add_argument("--preserve-throttles", action="store_true", help="--verify leaves the throttles in place")
    parser.add_argument("--timeout", type=int, default=30000, help="ms to wait for the controller")
    return parser


def read_json(path: Path | None, option: str) -> Any:
    if path is None:
        raise CommandError(f"{option} is required")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None


def parse_reassignment(data: Any) -> Assignment:
    """Kafka's reassignment JSON -> {(topic, partition): replicas}. CommandError when malformed."""
    try:
        entries = data["partitions"]
        out: Assignment = {}
        for e in entries:
            tp = (str(e["topic"]), int(e["partition"]))
            if tp in out:
                raise CommandError(f"partition {tp[0]}-{tp[1]} appears more than once")
            out[tp] = [int(r) for r in e["replicas"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"malformed reassignment JSON: {exc!r}") from None
    if not out:
        raise CommandError("the reassignment JSON names no partition")
    return out


def format_reassignment(assignment: Assignment) -> str:
    """Kafka's compact JSON, partitions in topic, partition order."""
    partitions = [
        {"topic": t, "partition": p, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}
        for (t, p), replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def propose(current: Assignment, brokers: list[int]) -> Assignment:
    """Kafka's rack-unaware assignment (start index and shift 0) of each topic's partitions over
    ``brokers``, keeping every partition's replication factor."""
    out: Assignment = {}
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), replicas in sorted(current.items()):
        by_topic.setdefault(t, []).append((p, len(replicas)))
    for topic, partitions in by_topic.items():
        rf = max(r for _, r in partitions)
        if rf > len(brokers):
            raise CommandError(f"replication factor {rf} of {topic} is larger than the broker list")
        proposed = assign_replicas(brokers, len(partitions), rf, start_index=0)
        for index, (partition, own_rf) in enumerate(partitions):
            out[(topic, partition)] = proposed[index][:own_rf]
    return out


async def current_assignment(admin: AdminClient, topics: set[str]) -> Assignment:
    described = await admin.describe_topics(sorted(topics))
    out: Assignment = {}
    for name in sorted(topics):
        desc = described.get(name)
        if desc is None or desc.error_code != ErrorCode.none:
            raise CommandError(f"topic {name} does not exist")
        for p, info in desc.partitions.items():
            out[(name, p)] = list(info.replicas)
    return out


async def controller_request(admin: AdminClient, api_key: int, make: Any) -> Any:
    """``make(builder)`` sent to the controller; once more after NOT_CONTROLLER."""
    for attempt in range(2):
        conn = await admin.cluster.controller_connection()
        response: Any = await conn.send(make(conn.builder(api_key, 0, 0)))
        error = ErrorCode(response.error_code)
        if error == ErrorCode.not_controller and attempt == 0:
            await admin.cluster.refresh(topics=[])
            continue
        if error != ErrorCode.none:
            raise CommandError(f"{error.name.upper()}: {response.error_message}")
        return response
    raise CommandError("no controller answered")


async def alter(
    admin: AdminClient, targets: dict[tuple[str, int], list[int] | None], timeout_ms: int
) -> dict[str, str]:
    """AlterPartitionReassignments; the error message per failed partition ("t-0")."""
    by_topic: dict[str, list[tuple[int, list[int] | None]]] = {}
    for (t, p), replicas in sorted(targets.items()):
        by_topic.setdefault(t, []).append((p, replicas))

    def make(rb: Any) -> Any:
        topics = tuple(
            rb.make(
                "ReassignableTopic",
                name=t,
                partitions=tuple(
                    rb.make("ReassignablePartition", partition_index=p, replicas=None if r is None else tuple(r))
                    for p, r in parts
                ),
            )
            for t, parts in by_topic.items()
        )
        return rb(timeout=datetime.timedelta(milliseconds=timeout_ms), topics=topics)

    response = await controller_request(admin, ApiKey.ALTER_PARTITION_REASSIGNMENTS, make)
    errors = {}
    for topic in response.responses:
        for part in topic.partitions:
            if part.error_code != ErrorCode.none:
                code = ErrorCode(part.error_code).name.upper()
                errors[f"{topic.name}-{part.partition_index}"] = f"{code}: {part.error_message}"
    return errors


async def ongoing(admin: AdminClient) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """The moves in progress: (replicas, adding, removing) per partition."""
    response = await controller_request(
        admin, ApiKey.LIST_PARTITION_REASSIGNMENTS, lambda rb: rb(timeout=datetime.timedelta(seconds=30), topics=None)
    )
    return {
        (t.name, int(p.partition_index)): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in response.topics
        for p in t.partitions
    }


THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLE_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def throttled_replicas(current: Assignment, proposed: Assignment) -> dict[str, tuple[str, str]]:
    """Kafka's topic throttles for a move, per topic: (leader side: every current replica of a
    moving partition, follower side: the replicas it adds), as ``partition:broker`` lists."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for (t, p), target in sorted(proposed.items()):
        now = current.get((t, p), [])
        if now == target:
            continue
        leaders, followers = out.setdefault(t, ([], []))
        leaders += [f"{p}:{b}" for b in now]
        followers += [f"{p}:{b}" for b in target if b not in now]
    return {t: (",".join(lead), ",".join(follow)) for t, (lead, follow) in out.items()}


async def set_throttles(admin: AdminClient, current: Assignment, proposed: Assignment, rate: int) -> None:
    ops: dict[ConfigResource, list[AlterConfigOp]] = {}
    for topic, (lead, follow) in throttled_replicas(current, proposed).items():
        ops[ConfigResource.topic(topic)] = [
            AlterConfigOp(THROTTLE_REPLICAS[0], AlterConfigOp.SET, lead),
            AlterConfigOp(THROTTLE_REPLICAS[1], AlterConfigOp.SET, follow),
        ]
    brokers = {b for replicas in (*current.values(), *proposed.values()) for b in replicas}
    for b in sorted(brokers):
        ops[ConfigResource.broker(b)] = [AlterConfigOp(k, AlterConfigOp.SET, str(rate)) for k in THROTTLE_RATES]
    await _checked(admin.incremental_alter_configs(ops))


async def clear_throttles(admin: AdminClient, proposed: Assignment) -> None:
    live = {b[0] for b in (await admin.describe_cluster()).brokers}
    brokers = sorted(live | {b for replicas in proposed.values() for b in replicas})
    topics = sorted({t for t, _ in proposed})
    plural = "" if len(brokers) == 1 else "s"
    print(f"Clearing broker-level throttles on broker{plural} {','.join(map(str, brokers))}")
    ops = {ConfigResource.broker(b): [AlterConfigOp(k, AlterConfigOp.DELETE) for k in THROTTLE_RATES] for b in brokers}
    ops[ConfigResource(ConfigResource.BROKER, "")] = [AlterConfigOp(k, AlterConfigOp.DELETE) for k in THROTTLE_RATES]
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    for t in topics:
        ops[ConfigResource.topic(t)] = [AlterConfigOp(k, AlterConfigOp.DELETE) for k in THROTTLE_REPLICAS]
    await _checked(admin.incremental_alter_configs(ops))


async def _checked(pending: Any) -> None:
    errors = {r: e for r, e in (await pending).items() if e is not None}
    if errors:
        raise CommandError("; ".join(f"{r.name or '<default>'}: {e}" for r, e in errors.items()))


def _names(tps: Sequence[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(tps))


async def execute(admin: AdminClient, args: argparse.Namespace) -> int:
    data = read_json(args.reassignment_json_file, "--reassignment-json-file")
    proposed = parse_reassignment(data)
    moves = parse_log_dirs(data)
    current = await current_assignment(admin, {t for t, _ in proposed})
    missing = [tp for tp in proposed if tp not in current]
    if missing:
        raise CommandError(f"unknown partitions: {_names(missing)}")
    rollback = format_reassignment({tp: current[tp] for tp in proposed})
    print(f"Current partition replica assignment\n\n{rollback}\n\n", end="")
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        await set_throttles(admin, current, proposed, args.throttle)
        print(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed."
        )
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    changed: dict[tuple[str, int], list[int] | None] = {
        tp: list(r) for tp, r in proposed.items() if current[tp] != r or not moves
    }
    errors = await alter(admin, changed, args.timeout) if changed else {}
    if errors:
        print("Error reassigning partition(s):", file=sys.stderr)
        for name, message in sorted(errors.items()):
            print(f"{name}: {message}", file=sys.stderr)
        return 1
    if changed:
        plural = "" if len(changed) == 1 else "s"
        print(f"Successfully started partition reassignment{plural} for {_names(list(changed))}")
    return await execute_moves(admin, moves) if moves else 0


async def verify(admin: AdminClient, args: argparse.Namespace) -> int:
    data = read_json(args.reassignment_json_file, "--reassignment-json-file")
    proposed = parse_reassignment(data)
    moves = parse_log_dirs(data)
    moving = await ongoing(admin)
    current = await current_assignment(admin, {t for t, _ in proposed})
    print("Status of partition reassignment:")
    done = True
    for tp, target in sorted(proposed.items()):
        name = f"{tp[0]}-{tp[1]}"
        if tp in moving:
            done = False
            print(f"Reassignment of partition {name} is still in progress.")
        elif current.get(tp) == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            now = ",".join(map(str, current.get(tp, [])))
            want = ",".join(map(str, target))
            print(f"There is no active reassignment of partition {name}, but replica set is {now} rather than {want}.")
    if moves:
        print("Reassignment of replicas' log directories:")
        done = await verify_moves(admin, moves) and done
    if done and not args.preserve_throttles:
        await clear_throttles(admin, proposed)
    return 0


async def cancel(admin: AdminClient, args: argparse.Namespace) -> int:
    proposed = parse_reassignment(read_json(args.reassignment_json_file, "--reassignment-json-file"))
    errors = await alter(admin, dict.fromkeys(proposed), args.timeout)
    cancelled = [tp for tp in proposed if f"{tp[0]}-{tp[1]}" not in errors]
    if cancelled:
        plural = "" if len(cancelled) == 1 else "s"
        print(f"Successfully cancelled partition reassignment{plural} for: {_names(cancelled)}")
    for name, message in sorted(errors.items()):
        print(f"{name}: {message}", file=sys.stderr)
    return 1 if errors else 0


async def generate(admin: AdminClient, args: argparse.Namespace) -> int:
    data = read_json(args.topics_to_move_json_file, "--topics-to-move-json-file")
    try:
        topics = {str(t["topic"]) for t in data["topics"]}
        brokers = [int(b) for b in str(args.broker_list).split(",")]
    except (KeyError, TypeError, ValueError) as exc:
        raise CommandError(f"--generate needs topics JSON and --broker-list: {exc!r}") from None
    current = await current_assignment(admin, topics)
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment(propose(current, brokers))}")
    return 0


async def list_moves(admin: AdminClient) -> int:
    moves = await ongoing(admin)
    if not moves:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (t, p), (replicas, adding, removing) in sorted(moves.items()):
        joined = [",".join(map(str, x)) for x in (replicas, adding, removing)]
        print(f"{t}-{p}: replicas: {joined[0]}. adding: {joined[1]}. removing: {joined[2]}.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args

    async def go() -> int:
        async with AdminClient(args.bootstrap_server, security=client_security(args)) as admin:
            if args.execute:
                return await execute(admin, args)
            if args.verify:
                return await verify(admin, args)
            if args.cancel:
                return await cancel(admin, args)
            if args.generate:
                return await generate(admin, args)
            return await list_moves(admin)

    return run("odradek reassign-partitions", go)
