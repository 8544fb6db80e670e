"""``odradek <command> ...``: the command-line entry point.

Each command lives in its own module with ``main(argv) -> int``; this module only dispatches.
Commands are imported lazily so ``odradek zk`` does not load the broker, and ``odradek demo``
alone loads Spark.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("odradek.cli.broker", "run a broker (Kafka's kafka-server-start)"),
    "cluster": ("odradek.cli.cluster", "run N local brokers on one ZooKeeper, for development"),
    "topics": ("odradek.cli.topics", "create, list, describe, alter and delete topics (kafka-topics)"),
    "console-producer": ("odradek.cli.console_producer", "produce lines from stdin (kafka-console-producer)"),
    "console-consumer": ("odradek.cli.console_consumer", "print records to stdout (kafka-console-consumer)"),
    "consumer-groups": (
        "odradek.cli.consumer_groups",
        "list, describe, delete, reset groups (kafka-consumer-groups)",
    ),
    "share-groups": (
        "odradek.cli.share_groups",
        "list, describe, delete share groups, reset their offsets (kafka-share-groups)",
    ),
    "leader-election": (
        "odradek.cli.leader_election",
        "preferred or unclean leader election (kafka-leader-election)",
    ),
    "reassign-partitions": (
        "odradek.cli.reassign_partitions",
        "move partition replicas between brokers (kafka-reassign-partitions)",
    ),
    "log-dirs": ("odradek.cli.log_dirs", "describe the brokers' log directories (kafka-log-dirs)"),
    "transactions": ("odradek.cli.transactions", "list and describe transactions (kafka-transactions)"),
    "configs": ("odradek.cli.configs", "describe and alter entity configs, SCRAM users (kafka-configs)"),
    "acls": ("odradek.cli.acls", "add, remove and list ACLs kept in ZooKeeper (kafka-acls)"),
    "delegation-tokens": (
        "odradek.cli.delegation_tokens",
        "create, renew, expire and describe delegation tokens (kafka-delegation-tokens)",
    ),
    "dump-log": ("odradek.cli.dump_log", "print segment and index files (kafka-dump-log)"),
    "schema-registry": (
        "odradek.cli.schema_registry",
        "serve Confluent's Schema Registry API over the _schemas topic",
    ),
    "ui": ("odradek.console.main", "serve the web console (topics, groups, messages, ACLs)"),
    "zk": ("odradek.cli.zk", "browse the znode tree: ls, get, tree"),
    "zookeeper-security-migration": (
        "odradek.cli.zk_security_migration",
        "set or remove the ACLs of Kafka's znodes (zookeeper-security-migration)",
    ),
    "demo": ("odradek.cli.demo", "run the clickstream pipeline demo end to end"),
    "demo-cluster": (
        "odradek.cli.demo_cluster",
        "the demo on 3 brokers and a Spark standalone cluster, with faults",
    ),
}


def usage() -> str:
    lines = ["usage: odradek <command> [options]", "", "commands:"]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name:<{width}} {doc}" for name, (_, doc) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"odradek: unknown command {name!r}\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    result: int = module.main(rest)
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
