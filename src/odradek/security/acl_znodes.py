"""ACLs in ZooKeeper, as Kafka's ZooKeeper-mode ``AclAuthorizer`` stores them (``kafka.zk.ZkData``).

Layout::

    /kafka-acl/<Type>/<name>                          LITERAL patterns (Type: Topic, Group, Cluster,
                                                      TransactionalId, DelegationToken, User)
    /kafka-acl-extended/prefixed/<Type>/<prefix>      PREFIXED patterns
    /kafka-acl-changes/acl_changes_<seq>              change notice for a LITERAL pattern
    /kafka-acl-extended-changes/acl_changes_<seq>     change notice for a PREFIXED pattern

A pattern's znode holds Jackson's compact JSON::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}

(keys in that order, operation and permission in PascalCase: ``Read``, ``DescribeConfigs``,
``Allow``). An empty znode means no ACLs; any version other than 1 is refused.

Change notices (sequential znodes the writer creates after changing a pattern's znode; every broker
rereads the pattern named): a LITERAL one holds the UTF-8 text ``<TYPE>:<name>`` with Kafka 3.9's
enum name (``TOPIC:orders``; split at the first colon, the type read in any case, so the
``Topic:orders`` older brokers wrote is read too); a PREFIXED one holds
``{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}``.
Pure functions; any thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from odradek.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_name,
    pascal_name,
)
from odradek.security.principal import KafkaPrincipal

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CURRENT_VERSION = 1

CONCRETE_RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))


def store_path(pattern_type: PatternType) -> str:
    """``/kafka-acl`` for LITERAL, ``/kafka-acl-extended/<pattern type lower case>`` otherwise."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{store_path(pattern_type)}/{pascal_name(resource_type)}"


def resource_path(pattern: ResourcePattern) -> str:
    """The znode holding ``pattern``'s ACLs (``ResourceZNode.path``)."""
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def change_path(pattern_type: PatternType) -> str:
    """The parent of the change notices for ``pattern_type``."""
    return LITERAL_ACL_CHANGES_PATH if pattern_type == PatternType.LITERAL else EXTENDED_ACL_CHANGES_PATH


def paths_to_create() -> list[str]:
    """Every path Kafka's ``createAclPaths`` makes at start-up (stores, per-type parents, changes)."""
    paths: list[str] = []
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        paths.append(store_path(pattern_type))
        paths.extend(resource_type_path(pattern_type, t) for t in CONCRETE_RESOURCE_TYPES)
        paths.append(change_path(pattern_type))
    return paths


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern znode's body; entries keep their order, duplicates dropped."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": pascal_name(e.permission_type),
            "operation": pascal_name(e.operation),
            "host": e.host,
        }
        for e in dict.fromkeys(entries)
    ]
    return _compact({"version": CURRENT_VERSION, "acls": acls})


def decode_acls(data: bytes | None) -> list[AccessControlEntry]:
    """The entries of a pattern znode (``AclEntry.fromBytes``); ``ValueError`` for a bad body.

    Unknown operation or permission names decode as UNKNOWN, as Kafka's do.
    """
    if not data:
        return []
    try:
        body = json.loads(data)
        if body["version"] != CURRENT_VERSION:
            raise ValueError(f"unsupported ACL znode version {body['version']}")
        entries = []
        for item in body["acls"]:
            principal = str(item["principal"])
            KafkaPrincipal.parse(principal)
            entries.append(
                AccessControlEntry(
                    principal,
                    str(item["host"]),
                    from_name(AclOperation, str(item["operation"])),
                    from_name(AclPermissionType, str(item["permissionType"])),
                )
            )
    except (KeyError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"invalid ACL znode data: {e}") from None
    return list(dict.fromkeys(entries))


def encode_change(pattern: ResourcePattern) -> bytes:
    """A change notice's body for ``pattern`` (created under :func:`change_path` with the prefix
    :data:`ACL_CHANGE_PREFIX`, sequential)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return _compact(
        {
            "version": CURRENT_VERSION,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        }
    )


def decode_literal_change(data: bytes) -> ResourcePattern:
    """A ``/kafka-acl-changes`` notice (``LiteralAclChangeStore.decode``)."""
    text = data.decode("utf-8")
    resource_type, sep, name = text.partition(":")
    if not sep:
        raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text}")
    return ResourcePattern(from_name(ResourceType, resource_type), name, PatternType.LITERAL)


def decode_extended_change(data: bytes) -> ResourcePattern:
    """A ``/kafka-acl-extended-changes`` notice (``ExtendedAclChangeStore.decode``)."""
    try:
        event = json.loads(data)
        if int(event["version"]) > CURRENT_VERSION:
            raise ValueError(f"Acl change event received for unsupported version: {event['version']}")
        return ResourcePattern(
            from_name(ResourceType, str(event["resourceType"])),
            str(event["name"]),
            from_name(PatternType, str(event["patternType"])),
        )
    except (KeyError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"Failed to parse ACL change event: {e}") from None


def decode_change(parent: str, data: bytes) -> ResourcePattern:
    """A notice under either changes path, by its parent."""
    if parent == LITERAL_ACL_CHANGES_PATH:
        return decode_literal_change(data)
    if parent == EXTENDED_ACL_CHANGES_PATH:
        return decode_extended_change(data)
    raise ValueError(f"not an ACL changes path: {parent}")
