"""``odradek acls``: Kafka's ``kafka-acls.sh`` writing the ACLs in ZooKeeper, as Kafka 3.9's tool
does with ``--authorizer-properties``::

    odradek acls --authorizer-properties zookeeper.connect=HOST:PORT[/chroot] --add
        --allow-principal User:alice [--allow-host 10.0.0.1] --operation Read --operation Describe
        --topic orders [--resource-pattern-type prefixed]
    odradek acls --authorizer-properties zookeeper.connect=Z --add --allow-principal User:app
        --producer --topic orders [--transactional-id tx] [--idempotent]
    odradek acls --authorizer-properties zookeeper.connect=Z --add --allow-principal User:app
        --consumer --topic orders --group g
    odradek acls --authorizer-properties zookeeper.connect=Z --remove [--force] [--deny-principal ...] --topic orders
    odradek acls --authorizer-properties zookeeper.connect=Z --list [--topic t] [--principal User:alice]
        [--resource-pattern-type match|any|literal|prefixed]

Resources: ``--topic``, ``--group``, ``--transactional-id``, ``--delegation-token``,
``--user-principal`` (each repeatable) and ``--cluster``; ``*`` names every resource of the type.
``--operation`` repeats (default ``All``); ``--allow-host``/``--deny-host`` default to ``*``.
``--producer`` is Write, Describe and Create on the topics, Write and Describe on the transactional
ids, and IdempotentWrite on the cluster with ``--idempotent``; ``--consumer`` is Read and Describe
on the topics and Read on the groups. The tool runs Kafka's ``AclAuthorizer``
(:class:`odradek.metadata.authorizer.AclAuthorizer`) on the store: znodes and change notices are
exactly the brokers'. ``--remove`` asks ``(y/n)`` on stdin unless ``--force``; an answer other than
``y``, or the end of stdin, removes nothing.

Output as Kafka's ``AclCommand``: ``Adding ACLs for resource `ResourcePattern(resourceType=TOPIC,
name=orders, patternType=LITERAL)`:`` then one tab-indented ``(principal=User:alice, host=*,
operation=READ, permissionType=ALLOW)`` per entry; ``--list`` prints ``Current ACLs for resource
`...`:`` blocks. The deprecation warning of the authorizer mode goes to stderr. ``--bootstrap-server``
runs the same verbs through the brokers' CreateAcls, DeleteAcls and DescribeAcls
(:mod:`odradek.cli.acls_admin`; the principal needs ALTER, or DESCRIBE to list, on the cluster).
Errors: one line on stderr, exit 1; invalid option combinations exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Protocol

from odradek.cli.acls_admin import AdminAcls
from odradek.cli.common import (
    ArgumentParser,
    CommandError,
    add_zk_tls_config,
    coordination_store,
    parse_args,
    parse_key_values,
    run,
)
from odradek.client.admin import AdminClient
from odradek.metadata.authorizer import (
    ACL_AUTHORIZER_CLASS,
    AclAuthorizer,
    AclCreateResult,
    AclDeleteResult,
    is_acl_authorizer,
)
from odradek.metadata.errors import CoordinationError
from odradek.metadata.store import CoordinationStore
from odradek.security.acl import (
    ANY_BINDING_FILTER,
    ANY_ENTRY_FILTER,
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    pascal_name,
    supported_operations,
)
from odradek.security.principal import KafkaPrincipal

__all__ = ["entry_text", "filter_text", "main"]

PROG = "odradek acls"
DEPRECATION = (
    "Warning: support for ACL configuration directly through the authorizer is deprecated and will be removed "
    "in a future release. Please use --bootstrap-server instead to set ACLs through the admin client."
)
CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
Entries = list[AccessControlEntry]


class UsageProblem(Exception):
    """A combination of options Kafka's tool refuses with its usage text (exit 2 here)."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=PROG, description="Manage the ACLs kept in ZooKeeper (kafka-acls).")
    p.add_argument("--bootstrap-server", help="brokers to connect to (needs CreateAcls/DeleteAcls/DescribeAcls)")
    p.add_argument("--command-config", help="admin client properties (with --bootstrap-server)")
    p.add_argument("--authorizer", help=f"DEPRECATED: authorizer class (default {ACL_AUTHORIZER_CLASS})")
    p.add_argument("--authorizer-properties", action="append", help="DEPRECATED: zookeeper.connect=HOST:PORT")
    add_zk_tls_config(p)
    for flag in ("add", "remove", "list"):
        p.add_argument(f"--{flag}", action="store_true", help=f"{flag} ACLs")
    for flag in ("topic", "group", "transactional-id", "delegation-token", "user-principal"):
        p.add_argument(f"--{flag}", action="append", default=[], help=f"a {flag} resource (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="LITERAL", help="LITERAL|PREFIXED|MATCH|ANY (default LITERAL)")
    p.add_argument("--operation", action="append", default=[], help="operation allowed or denied (default All)")
    for flag in ("allow-principal", "deny-principal", "allow-host", "deny-host"):
        p.add_argument(f"--{flag}", action="append", default=[], help=f"{flag.replace('-', ' ')} (repeatable)")
    p.add_argument("--principal", action="append", default=[], help="with --list: only this principal's ACLs")
    p.add_argument("--producer", action="store_true", help="Write, Describe, Create on topics")
    p.add_argument("--consumer", action="store_true", help="Read, Describe on topics, Read on groups")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="assume yes to every question")
    return p


def entry_text(entry: AccessControlEntry) -> str:
    """Kafka's ``AccessControlEntry.toString``."""
    return (
        f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
        f"permissionType={entry.permission_type.name})"
    )


def filter_text(f: ResourcePatternFilter) -> str:
    """Kafka's ``ResourcePatternFilter.toString``."""
    name = "<any>" if f.name is None else f.name
    return f"ResourcePattern(resourceType={f.resource_type.name}, name={name}, patternType={f.pattern_type.name})"


def _block(entries: Iterable[AccessControlEntry]) -> str:
    return "\n".join("\t" + entry_text(e) for e in entries)


def check_args(args: argparse.Namespace) -> None:
    """``AclCommandOptions.checkArgs``; UsageProblem with Kafka's message."""
    if args.bootstrap_server and args.authorizer:
        raise UsageProblem("Only one of --bootstrap-server or --authorizer must be specified")
    if not args.bootstrap_server and not args.authorizer_properties:
        raise UsageProblem('Missing required argument "[authorizer-properties]"')
    if args.command_config and not args.bootstrap_server:
        raise UsageProblem("The --command-config option can only be used with --bootstrap-server option")
    if args.authorizer_properties and args.bootstrap_server:
        raise UsageProblem("The --authorizer-properties option can only be used with --authorizer option")
    if int(args.add) + int(args.remove) + int(args.list) != 1:
        raise UsageProblem("Command must include exactly one action: --list, --add, --remove. ")
    if args.list:
        for flag in ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"):
            if getattr(args, flag):
                raise UsageProblem(f'Option "[list]" can\'t be used with option "[{flag.replace("_", "-")}]"')
    for role in ("producer", "consumer"):
        if getattr(args, role):
            for flag in ("operation", "deny_principal", "deny_host"):
                if getattr(args, flag):
                    raise UsageProblem(f'Option "[{role}]" can\'t be used with option "[{flag.replace("_", "-")}]"')
    if args.principal and not args.list:
        raise UsageProblem("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageProblem("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageProblem("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        not args.topic or not args.group or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise UsageProblem(
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id "
            "option should be specified."
        )


def pattern_type(text: str) -> PatternType:
    for member in PatternType:
        if member.name == text.strip().upper() and member != PatternType.UNKNOWN:
            return member
    raise UsageProblem(f"Unknown resource-pattern-type: {text}")


def operation(text: str) -> AclOperation:
    """Kafka's ``SecurityUtils.operation``: ``Read``, ``READ``, ``IdempotentWrite``, ``idempotentwrite``..."""
    key = text.strip().upper().replace("_", "")
    return next((op for op in AclOperation if op.name.replace("_", "") == key), AclOperation.UNKNOWN)


def resource_filters(args: argparse.Namespace, *, die_if_none: bool = True) -> list[ResourcePatternFilter]:
    kind = pattern_type(args.resource_pattern_type)
    filters = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), kind) for t in args.topic]
    if kind == PatternType.LITERAL and (args.cluster or args.idempotent):
        filters.append(CLUSTER_FILTER)
    filters += [ResourcePatternFilter(ResourceType.GROUP, g.strip(), kind) for g in args.group]
    filters += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, t, kind) for t in args.transactional_id]
    filters += [ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, t.strip(), kind) for t in args.delegation_token]
    filters += [ResourcePatternFilter(ResourceType.USER, u.strip(), kind) for u in args.user_principal]
    if not filters and die_if_none:
        raise UsageProblem(
            "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
            "--delegation-token <Delegation Token ID>"
        )
    return list(dict.fromkeys(filters))


def _principals(values: Sequence[str]) -> list[KafkaPrincipal]:
    try:
        return list(dict.fromkeys(KafkaPrincipal.parse(v.strip()) for v in values))
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def entries_for(args: argparse.Namespace, operations: Iterable[AclOperation]) -> Entries:
    """``getAcl``: every allowed principal x operation x allowed host, then the denied ones."""
    out: Entries = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        if not principals:
            continue
        for principal in _principals(principals):
            for op in operations:
                for host in dict.fromkeys(h.strip() for h in hosts) if hosts else (WILDCARD_HOST,):
                    out.append(AccessControlEntry(str(principal), host, op, permission))
    return list(dict.fromkeys(out))


def filter_to_entries(args: argparse.Namespace) -> dict[ResourcePatternFilter, Entries]:
    """``getResourceFilterToAcls``: the entries each resource filter gets (``--producer`` and
    ``--consumer`` roles, or the CLI's operations), operations checked against the resource type."""
    result: dict[ResourcePatternFilter, Entries] = {}
    filters = resource_filters(args)
    if not args.producer and not args.consumer:
        ops = [operation(o) for o in args.operation] or [AclOperation.ALL]
        result = {f: entries_for(args, ops) for f in filters}
    if args.producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                result[f] = entries_for(args, (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE))
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                result[f] = entries_for(args, (AclOperation.WRITE, AclOperation.DESCRIBE))
        if args.idempotent:
            result[CLUSTER_FILTER] = entries_for(args, (AclOperation.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                extra = entries_for(args, (AclOperation.READ, AclOperation.DESCRIBE))
            elif f.resource_type == ResourceType.GROUP:
                extra = entries_for(args, (AclOperation.READ,))
            else:
                continue
            result[f] = list(dict.fromkeys([*extra, *result.get(f, [])]))
    for f, entries in result.items():
        valid = supported_operations(f.resource_type) | {AclOperation.ALL}
        if any(e.operation not in valid for e in entries):
            names = ", ".join(pascal_name(op) for op in sorted(valid))
            raise UsageProblem(f"ResourceType {f.resource_type.name} only supports operations {names}")
    return result


def _confirm(args: argparse.Namespace, message: str) -> bool:
    if args.force:
        return True
    print(message, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"


def resource_to_entries(args: argparse.Namespace) -> dict[ResourcePattern, Entries]:
    """``getResourceToAcls``: what ``--add`` writes; UsageProblem for a non-specific pattern type or
    a resource without principals."""
    kind = pattern_type(args.resource_pattern_type)
    if not kind.is_specific:
        raise UsageProblem(f"A '--resource-pattern-type' value of '{kind.name}' is not valid when adding acls.")
    out = {}
    for f, entries in filter_to_entries(args).items():
        if not entries:
            raise UsageProblem("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        assert f.name is not None
        out[ResourcePattern(f.resource_type, f.name, f.pattern_type)] = entries
    return out


class AclVerbs(Protocol):
    """What the tool does with ACLs: the ZooKeeper authorizer's calls, or the brokers' APIs
    (:class:`odradek.cli.acls_admin.AdminAcls`)."""

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]: ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]: ...

    async def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...


class ZkAcls:
    """:class:`AclVerbs` of an :class:`AclAuthorizer` running in the tool."""

    def __init__(self, authorizer: AclAuthorizer) -> None:
        self.authorizer = authorizer

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]:
        return await self.authorizer.create_acls(bindings)

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        return await self.authorizer.delete_acls(filters)

    async def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.acls(binding_filter)


async def add_acls(authorizer: AclVerbs, args: argparse.Namespace) -> None:
    for pattern, entries in resource_to_entries(args).items():
        print(f"Adding ACLs for resource `{pattern}`: \n {_block(entries)} \n")
        for result in await authorizer.create_acls([AclBinding(pattern, e) for e in entries]):
            if result.error_message is not None:
                print(f"Error while adding ACLs: {result.error_message}")


async def remove_acls(authorizer: AclVerbs, args: argparse.Namespace) -> None:
    for f, entries in filter_to_entries(args).items():
        if not entries:
            question = f"Are you sure you want to delete all ACLs for resource filter `{filter_text(f)}`? (y/n)"
            filters = [AclBindingFilter(f, ANY_ENTRY_FILTER)]
        else:
            question = (
                f"Are you sure you want to remove ACLs: \n {_block(entries)} \n from resource filter "
                f"`{filter_text(f)}`? (y/n)"
            )
            filters = [
                AclBindingFilter(f, AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type))
                for e in entries
            ]
        if not _confirm(args, question):
            continue
        for result in await authorizer.delete_acls(filters):
            for message in [result.error_message] + [b.error_message for b in result.bindings]:
                if message is not None:
                    print(f"Error while removing ACLs: {message}")


async def list_acls(authorizer: AclVerbs, args: argparse.Namespace) -> None:
    filters = resource_filters(args, die_if_none=False)
    bindings = (
        await authorizer.describe(ANY_BINDING_FILTER)
        if not filters
        else [b for f in filters for b in await authorizer.describe(AclBindingFilter(f, ANY_ENTRY_FILTER))]
    )
    by_pattern: dict[ResourcePattern, Entries] = {}
    for binding in dict.fromkeys(bindings):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    principals = _principals(args.principal)
    groups = (
        [(None, by_pattern)]
        if not principals
        else [(p, {r: [e for e in es if e.principal == str(p)] for r, es in by_pattern.items()}) for p in principals]
    )
    for principal, patterns in groups:
        if principal is not None:
            print(f"ACLs for principal `{principal}`")
        for pattern, entries in patterns.items():
            if entries:
                print(f"Current ACLs for resource `{pattern}`: \n {_block(entries)} \n")


def _zookeeper_connect(args: argparse.Namespace) -> str:
    props = parse_key_values(args.authorizer_properties, "--authorizer-properties")
    connect = props.get("authorizer.zookeeper.url") or props.get("zookeeper.connect")
    if not connect:
        raise CommandError("--authorizer-properties must name zookeeper.connect=HOST:PORT")
    return connect


async def _apply(verbs: AclVerbs, args: argparse.Namespace) -> None:
    if args.add:
        await add_acls(verbs, args)
    elif args.remove:
        await remove_acls(verbs, args)
    else:
        await list_acls(verbs, args)


async def _run(args: argparse.Namespace, store: CoordinationStore | None) -> int:
    if args.bootstrap_server:
        async with AdminClient(args.bootstrap_server) as admin:
            await _apply(AdminAcls(admin), args)
        return 0
    try:
        is_acl_authorizer(args.authorizer or ACL_AUTHORIZER_CLASS)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    connect = _zookeeper_connect(args)
    try:
        async with coordination_store(connect, store, zk_tls_config_file=args.zk_tls_config_file) as zk:
            authorizer = AclAuthorizer(zk)
            await authorizer.start()
            try:
                await _apply(ZkAcls(authorizer), args)
            finally:
                await authorizer.close()
    except CoordinationError as exc:
        raise CommandError(str(exc)) from None
    return 0


def main(argv: Sequence[str] | None = None, *, store: CoordinationStore | None = None) -> int:
    """The command; ``store`` replaces the ZooKeeper connection (tests)."""
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    try:
        check_args(args)
        if not args.bootstrap_server:
            print(DEPRECATION, file=sys.stderr)
        if args.add:
            resource_to_entries(args)  # usage problems before connecting
        elif args.remove:
            filter_to_entries(args)
        else:
            resource_filters(args, die_if_none=False)
    except UsageProblem as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except CommandError as exc:
        print(f"Error while executing ACL command: {exc}", file=sys.stderr)
        return 1

    async def command() -> int:
        try:
            return await _run(args, store)
        except UsageProblem as exc:
            raise CommandError(str(exc)) from None

    status = run(PROG, command, "Error while executing ACL command: ")
    sys.stdout.flush()
    return status
