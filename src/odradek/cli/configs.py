"""``odradek configs``: Kafka's ``kafka-configs.sh``.

Exactly one action, with Kafka 3.9's flags::

    odradek configs --zookeeper HOST:PORT[/chroot] --alter --entity-type users --entity-name alice
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    odradek configs --zookeeper Z --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    odradek configs --zookeeper Z --describe --entity-type users [--entity-name alice]
    odradek configs --zookeeper Z --alter --entity-type brokers (--entity-name 0 | --entity-default)
        --add-config k=v                                 (only while that broker is down, as Kafka)
    odradek configs --bootstrap-server H:P --describe --entity-type topics|brokers [--entity-name N] [--all]
    odradek configs --bootstrap-server H:P --alter --entity-type topics|brokers --entity-name N
        --add-config k=v --delete-config k2
    odradek configs --bootstrap-server H:P --alter --entity-type users --entity-name alice
        [--entity-type clients --entity-default] --add-config producer_byte_rate=1048576
    odradek configs --bootstrap-server H:P --describe --entity-type users|clients [--entity-name N]
    odradek configs --bootstrap-server H:P --describe --entity-type groups [--entity-name G] [--all]
    odradek configs --bootstrap-server H:P --alter --entity-type groups --entity-name G
        --add-config consumer.session.timeout.ms=50000 --delete-config consumer.heartbeat.interval.ms

``--user``/``--broker``/``--topic``/``--client`` and ``--user-defaults``/``--broker-defaults``/
``--client-defaults`` stand for ``--entity-type``/``--entity-name``/``--entity-default``.
``--add-config`` is Kafka's ``k1=v1,k2=[v1,v2]``: commas inside brackets stay in the value, the
brackets are dropped. ``--add-config-file`` reads a properties file.

``--zookeeper`` (Kafka 3.9's deprecated mode, which lets the inter-broker SCRAM user exist before
any broker runs) writes ``/config`` directly for ``users`` (SCRAM credentials only: the password is
hashed here, only ``salt``, ``stored_key``, ``server_key`` and ``iterations`` are stored) and
``brokers`` (refused while the broker, or for the default any broker, is registered). Writes merge
into the entity's map conditionally on its version and notify ``/config/changes``
(:mod:`odradek.metadata.config_entities`). Output as Kafka's ``ConfigCommand``: two deprecation
lines, then ``Completed updating config for entity: user-principal 'alice'.`` or, for
``--describe``, ``Configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096,...``
(Kafka prints the stored salt and keys there; odradek shows the iterations only, as Kafka's
``--bootstrap-server`` mode does).

``--bootstrap-server`` serves topics, brokers and groups (Kafka 4's group configs) through
DescribeConfigs and IncrementalAlterConfigs (topics, groups) / AlterConfigs (brokers); users and clients through
DescribeClientQuotas / AlterClientQuotas (quota keys, :mod:`odradek.cli.configs_quotas`) and
Describe/AlterUserScramCredentials (SCRAM keys of a named user).
Errors print one line on stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from odradek.cli.common import (
    ArgumentParser,
    CommandError,
    add_zk_tls_config,
    client_security,
    coordination_store,
    parse_args,
    run,
)
from odradek.cli.configs_users import alter_users_with_admin, describe_users_with_admin, parse_scram_input
from odradek.errors import InvalidConfigError
from odradek.metadata.config_entities import (
    DEFAULT_ENTITY,
    alter_entity_config,
    desanitize,
    fetch_all_entity_configs,
    fetch_entity_config,
    sanitize,
)
from odradek.metadata.errors import CoordinationError
from odradek.metadata.store import CoordinationStore
from odradek.security.sasl.scram import MECHANISMS, ScramCredential, generate_credential

__all__ = ["main", "parse_add_config"]

PROG = "odradek configs"
ZK_TYPES = ("users", "brokers")
BROKER_TYPES = ("topics", "clients", "users", "brokers", "ips", "groups")
DEFAULT_ITERATIONS = 4096
DEPRECATION = (
    "Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.\n"
    "Use --bootstrap-server instead to specify a broker to connect to."
)
_ENTITY_FLAGS = {"topic": "topics", "client": "clients", "user": "users", "broker": "brokers"}
_DEFAULT_FLAGS = {"client_defaults": "clients", "user_defaults": "users", "broker_defaults": "brokers"}


class _EntityName(argparse.Action):
    """``--entity-name N`` and ``--entity-default`` share one list, in command-line order."""

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, value: object, opt: object = None
    ) -> None:
        ns.entity_names = [*(ns.entity_names or []), value if isinstance(value, str) else ""]


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=PROG, description="Describe and alter entity configs (kafka-configs).")
    parser.add_argument("--zookeeper", metavar="URLS", help="DEPRECATED: ZooKeeper connect string")
    add_zk_tls_config(parser)
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker(s) to connect to")
    parser.add_argument("--command-config", help="client properties file (with --bootstrap-server)")
    parser.add_argument("--alter", action="store_true", help="alter the configuration of the entity")
    parser.add_argument("--describe", action="store_true", help="list configs for the given entity")
    parser.add_argument("--all", action="store_true", help="list all configs of a topic, broker or group")
    parser.add_argument("--entity-type", action="append", default=[], help="topics/clients/users/brokers/groups")
    parser.add_argument("--entity-name", action=_EntityName, dest="entity_names", help="name of the entity")
    parser.add_argument("--entity-default", action=_EntityName, nargs=0, dest="entity_names", help="default entity")
    parser.add_argument("--add-config", help="k1=v1,k2=[v1,v2,v2],k3=v3")
    parser.add_argument("--add-config-file", help="properties file with configs to add")
    parser.add_argument("--delete-config", action="append", default=[], help="config keys to remove: k1,k2")
    parser.add_argument("--force", action="store_true", help="suppress console prompts")
    for flag in _ENTITY_FLAGS:
        parser.add_argument(f"--{flag}", help=f"the {flag}'s name")
    for flag in _DEFAULT_FLAGS:
        parser.add_argument(f"--{flag.replace('_', '-')}", action="store_true", help="the config defaults")
    parser.set_defaults(entity_names=[])
    return parser


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's ``--add-config`` syntax: split at commas outside brackets, then at the first ``=``
    outside brackets; brackets dropped from values (``k=[a,b]`` -> ``a,b``)."""
    outside = r"(?=[^\]]*(?:\[|$))"
    out: dict[str, str] = {}
    for item in re.split("," + outside, text):
        pair = re.split(r"\s*=\s*" + outside, item)
        if len(pair) != 2:
            raise CommandError('Invalid entity config: all configs to be added must be in the format "key=val".')
        key = pair[0].strip()
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise CommandError(f"Invalid character found for config key: {key}")
        out[key] = re.sub(r"\[?\]?", "", pair[1]).strip()
    return out


def _read_properties(path: str) -> dict[str, str]:
    """A Java properties file's ``key=value`` / ``key: value`` / ``key value`` lines."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
            key, value = (m[1], m[2]) if m else (line, "")
            out[key] = value
    return out


def _entities(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    types = list(args.entity_type)
    names = list(args.entity_names)
    for flag, entity_type in _ENTITY_FLAGS.items():
        if getattr(args, flag) is not None:
            types.append(entity_type)
            names.append(getattr(args, flag))
    for flag, entity_type in _DEFAULT_FLAGS.items():
        if getattr(args, flag):
            types.append(entity_type)
            names.append("")
    return types, names


def check_args(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """``ConfigCommandOptions.checkArgs``: the entity types and names; CommandError otherwise."""
    if int(args.alter) + int(args.describe) != 1:
        raise CommandError("Command must include exactly one action: --describe, --alter")
    if args.describe:
        for flag in ("add_config", "add_config_file", "delete_config"):
            if getattr(args, flag):
                raise CommandError(f'Option "[describe]" can\'t be used with option "[{flag.replace("_", "-")}]"')
    types, names = _entities(args)
    if len(types) != len(set(types)):
        raise CommandError(
            f"Duplicate entity type(s) specified: {','.join(sorted({t for t in types if types.count(t) > 1}))}"
        )
    connects = [c for c in (args.bootstrap_server, args.zookeeper) if c]
    if not connects:
        raise CommandError("One of the required --bootstrap-server or --zookeeper arguments must be specified")
    if len(connects) > 1:
        raise CommandError("Only one of --bootstrap-server and --zookeeper can be specified")
    allowed, connect = (BROKER_TYPES, "--bootstrap-server") if args.bootstrap_server else (ZK_TYPES, "--zookeeper")
    for entity_type in types:
        if entity_type not in allowed:
            raise CommandError(
                f"Invalid entity type {entity_type}, the entity type must be one of {', '.join(allowed)} "
                f"with a {connect} argument"
            )
    if not types:
        raise CommandError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise CommandError("Only 'users' and 'clients' entity types may be specified together")
    if args.all and args.zookeeper:
        raise CommandError("--bootstrap-server must be specified for --all")
    if "brokers" in types:
        for name in (n for n in names if n):
            if not name.lstrip("-").isdigit():
                raise CommandError(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    if args.alter:
        if types[0] in ("users", "clients", "brokers", "ips"):
            if not names:
                raise CommandError(
                    "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
                )
        elif not any(names):
            raise CommandError(f"an entity name must be specified with --alter of {','.join(types)}")
        if args.add_config and args.add_config_file:
            raise CommandError("Only one of --add-config or --add-config-file must be specified")
        if not (args.add_config or args.add_config_file or args.delete_config):
            raise CommandError(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
            )
    return types, names


def entity_label(entity_type: str, sanitized: str) -> str:
    """Kafka's ``Entity.toString``: ``user-principal 'alice'``, ``default user-principal``, ``brokers '0'``."""
    type_name = {"users": "user-principal", "clients": "client-id", "topics": "topic"}.get(entity_type, entity_type)
    if sanitized == DEFAULT_ENTITY:
        return f"default {type_name}"
    name = desanitize(sanitized) if entity_type in ("users", "clients") else sanitized
    return f"{type_name} '{name}'"


def _sanitized(entity_type: str, name: str) -> str:
    if not name:
        return DEFAULT_ENTITY
    return sanitize(name) if entity_type in ("users", "clients") else name


def _configs_to_add(args: argparse.Namespace) -> dict[str, str]:
    added = _read_properties(args.add_config_file) if args.add_config_file else {}
    if args.add_config:
        added.update(parse_add_config(args.add_config))
    return added


def _configs_to_delete(args: argparse.Namespace) -> list[str]:
    return [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]


def scram_credential(mechanism_name: str, text: str) -> str:
    """``[iterations=N,]password=P`` hashed into the stored form (``preProcessScramCredentials``)."""
    password, iterations = parse_scram_input(mechanism_name, text)
    try:
        return generate_credential(mechanism_name, password, iterations).to_string()
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _shown(key: str, value: str) -> str:
    if key in MECHANISMS:
        try:
            return f"iterations={ScramCredential.from_string(value).iterations}"
        except ValueError:
            return "<unreadable credential>"
    return value


async def _check_brokers_down(store: CoordinationStore, name: str, message: str) -> None:
    info = (
        "Broker configuration operations using ZooKeeper are only supported if the affected broker(s) are not running."
    )
    try:
        running = await store.get_children("/brokers/ids")
    except CoordinationError:
        running = []
    if name == DEFAULT_ENTITY:
        if running:
            raise CommandError(f"{message} - {len(running)} brokers are running. {info}")
    elif name in running:
        raise CommandError(f"{message} - broker {name} is running. {info}")


async def alter_with_zk(store: CoordinationStore, types: list[str], names: list[str], args: argparse.Namespace) -> None:
    added, deleted = _configs_to_add(args), _configs_to_delete(args)
    entity_type, name = types[0], _sanitized(types[0], names[0])
    message = (  # keys only: the values may hold passwords
        f"--bootstrap-server option must be specified to update {entity_type} configs: "
        f"{{add: {sorted(added)}, delete: {deleted}}}"
    )
    if entity_type == "users":
        if any(k not in MECHANISMS for k in (*added, *deleted)):
            info = "User configuration updates using ZooKeeper are only supported for SCRAM credential updates."
            raise CommandError(f"{message}. {info}")
        added = {k: scram_credential(k, v) for k, v in added.items()}
    else:
        await _check_brokers_down(store, name, message)
    try:
        await alter_entity_config(store, entity_type, name, added, deleted, require_existing=True)
    except InvalidConfigError as exc:
        raise CommandError(str(exc)) from None
    print(f"Completed updating config for entity: {entity_label(entity_type, name)}.")


async def describe_with_zk(store: CoordinationStore, types: list[str], names: list[str]) -> None:
    entity_type = types[0]
    name = _sanitized(entity_type, names[0]) if names else None
    if entity_type == "brokers":
        await _check_brokers_down(
            store, name or DEFAULT_ENTITY, "--bootstrap-server option must be specified to describe brokers"
        )
    if name is None:
        entities = await fetch_all_entity_configs(store, entity_type)
    else:
        entities = {name: await fetch_entity_config(store, entity_type, name)}
    for entity, configs in entities.items():
        if configs or not (entity_type == "users" and name is None):
            shown = ",".join(f"{k}={_shown(k, v)}" for k, v in configs.items())
            print(f"Configs for {entity_label(entity_type, entity)} are {shown}")


async def _with_zookeeper(args: argparse.Namespace, store: CoordinationStore | None) -> int:
    types, names = check_args(args)
    print(DEPRECATION)
    try:
        async with coordination_store(args.zookeeper, store, zk_tls_config_file=args.zk_tls_config_file) as zk:
            if args.alter:
                await alter_with_zk(zk, types, names, args)
            else:
                await describe_with_zk(zk, types, names)
    except CoordinationError as exc:
        raise CommandError(str(exc)) from None
    return 0


async def _with_brokers(args: argparse.Namespace) -> int:
    from odradek.cli.configs_admin import alter_with_admin, describe_with_admin

    types, names = check_args(args)
    if types[0] in ("users", "clients", "ips"):
        await _quotas_and_credentials(args, types, names)
        return 0
    if args.alter:
        await alter_with_admin(
            args.bootstrap_server,
            types[0],
            names[0],
            _configs_to_add(args),
            _configs_to_delete(args),
            client_security(args),
        )
    else:
        await describe_with_admin(
            args.bootstrap_server, types[0], names[0] if names else None, args.all, client_security(args)
        )
    return 0


async def _quotas_and_credentials(args: argparse.Namespace, types: list[str], names: list[str]) -> None:
    """Users and clients through the brokers: SCRAM credentials of one named user, quotas of any
    (user, client id) entity (:mod:`odradek.cli.configs_quotas`)."""
    from odradek.cli.configs_quotas import alter_quotas_with_admin, describe_quotas_with_admin, split_scram

    bootstrap = args.bootstrap_server
    if not args.alter:
        await describe_quotas_with_admin(bootstrap, types, names)
        if types == ["users"]:
            await describe_users_with_admin(bootstrap, names[0] or None if names else None)
        return
    added, deleted = _configs_to_add(args), _configs_to_delete(args)
    scram_added, scram_deleted = split_scram(added, deleted)
    if scram_added or scram_deleted:
        if types != ["users"] or not names[0]:
            raise CommandError("SCRAM credentials can only be set for one named user (--entity-type users)")
        await alter_users_with_admin(bootstrap, names[0], scram_added, scram_deleted)
    quota_added = {k: v for k, v in added.items() if k not in scram_added}
    quota_deleted = [k for k in deleted if k not in scram_deleted]
    if quota_added or quota_deleted:
        await alter_quotas_with_admin(bootstrap, types, names, quota_added, quota_deleted)


def main(argv: Sequence[str] | None = None, *, store: CoordinationStore | None = None) -> int:
    """The command; ``store`` replaces the ZooKeeper connection of ``--zookeeper`` (tests)."""
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    if args.bootstrap_server:
        status = run(PROG, lambda: _with_brokers(args), "")
    else:
        status = run(PROG, lambda: _with_zookeeper(args, store), "")
    sys.stdout.flush()
    return status
