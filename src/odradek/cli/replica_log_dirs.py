"""The ``log_dirs`` part of a reassignment JSON: moving replicas between a broker's log dirs.

Kafka's reassignment files may carry, per partition, ``"log_dirs": ["any", "/data/b", ...]``
aligned with ``replicas``: the directory each replica should live in ("any": wherever it is).
``reassign-partitions --execute`` sends AlterReplicaLogDirs (key 34) to each broker named with a
path and prints ``Successfully started log directory move for: t-0-1,...`` (replica names are
``topic-partition-broker``); a broker that does not host the replica yet answers
REPLICA_NOT_AVAILABLE and creates it in that directory when the reassignment adds it.
``--verify`` asks each broker (DescribeLogDirs) where its replicas are and prints Kafka's lines:
``Reassignment of replica t-0-1 completed successfully.`` or ``... is still in progress.``
"""

from __future__ import annotations

from typing import Any

from odradek.cli.common import CommandError
from odradek.cli.log_dirs import describe
from odradek.client.admin import AdminClient
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey

ANY = "any"
Replica = tuple[str, int, int]
"""(topic, partition, broker)."""


def parse_log_dirs(data: Any) -> dict[Replica, str]:
    """The replicas a reassignment JSON pins to a directory."""
    out: dict[Replica, str] = {}
    try:
        for e in data["partitions"]:
            dirs = e.get("log_dirs")
            if dirs is None:
                continue
            replicas = [int(r) for r in e["replicas"]]
            if len(dirs) != len(replicas):
                raise CommandError(f"log_dirs of {e['topic']}-{e['partition']} do not match its replicas")
            for broker, path in zip(replicas, dirs, strict=True):
                if str(path) != ANY:
                    out[(str(e["topic"]), int(e["partition"]), broker)] = str(path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CommandError(f"malformed reassignment JSON: {exc!r}") from None
    return out


def replica_name(replica: Replica) -> str:
    return f"{replica[0]}-{replica[1]}-{replica[2]}"


async def alter_log_dirs(admin: AdminClient, moves: dict[Replica, str]) -> dict[Replica, ErrorCode]:
    """AlterReplicaLogDirs to each broker; the answer per replica."""
    by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
    for (topic, partition, broker), path in sorted(moves.items()):
        by_broker.setdefault(broker, {}).setdefault(path, {}).setdefault(topic, []).append(partition)
    out: dict[Replica, ErrorCode] = {}
    for broker, dirs in by_broker.items():
        conn = await admin.cluster.connection(broker)
        rb = conn.builder(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2)
        request = rb(
            dirs=tuple(
                rb.make(
                    "AlterReplicaLogDir",
                    path=path,
                    topics=tuple(
                        rb.make("AlterReplicaLogDirTopic", name=t, partitions=tuple(ps)) for t, ps in topics.items()
                    ),
                )
                for path, topics in dirs.items()
            )
        )
        response: Any = await conn.send(request)
        for topic in response.results:
            for p in topic.partitions:
                out[(str(topic.topic_name), int(p.partition_index), broker)] = ErrorCode(p.error_code)
    return out


async def current_log_dirs(admin: AdminClient, replicas: list[Replica]) -> dict[Replica, str]:
    """The directory each replica lives in now (absent: not found on its broker)."""
    brokers = sorted({b for _t, _p, b in replicas})
    topics = sorted({t for t, _p, _b in replicas})
    where: dict[Replica, str] = {}
    for entry in await describe(admin, brokers, topics):
        for d in entry["logDirs"]:
            for p in d["partitions"]:
                if not p["isFuture"]:
                    topic, _, index = str(p["partition"]).rpartition("-")
                    where[(topic, int(index), int(entry["broker"]))] = str(d["logDir"])
    return where


async def execute_moves(admin: AdminClient, moves: dict[Replica, str]) -> int:
    """Start the moves; 1 when a broker refused one."""
    answers = await alter_log_dirs(admin, moves)
    started = [r for r, code in answers.items() if code in (ErrorCode.none, ErrorCode.replica_not_available)]
    failed = {r: code for r, code in answers.items() if r not in started}
    if started:
        print(f"Successfully started log directory move for: {','.join(replica_name(r) for r in sorted(started))}")
    for replica, code in sorted(failed.items()):
        print(f"Failed to move {replica_name(replica)} to {moves[replica]}: {code.name.upper()}")
    return 1 if failed else 0


async def verify_moves(admin: AdminClient, moves: dict[Replica, str]) -> bool:
    """Print one status line per replica; True when every replica is where it should be."""
    where = await current_log_dirs(admin, list(moves))
    done = True
    for replica, path in sorted(moves.items()):
        name = replica_name(replica)
        if replica not in where:
            done = False
            print(f"Partition {replica[0]}-{replica[1]} is not found in any live log dir on broker {replica[2]}.")
        elif where[replica] == path:
            print(f"Reassignment of replica {name} completed successfully.")
        else:
            done = False
            print(f"Reassignment of replica {name} is still in progress.")
    return done
