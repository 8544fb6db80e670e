"""ACL znodes in the coordination store: Kafka's ``KafkaZkClient`` ACL verbs.

Layout and JSON are :mod:`odradek.security.acl_znodes` (``/kafka-acl/<Type>/<name>``,
``/kafka-acl-extended/prefixed/<Type>/<prefix>``, ``/kafka-acl-changes``,
``/kafka-acl-extended-changes``). A pattern's ACLs are read with their znode version
(:class:`VersionedAcls`) so a writer can replace them conditionally, as ``AclAuthorizer`` does:
:func:`conditional_set_acls`, :func:`create_acls_if_not_exists` and :func:`conditional_delete`
answer ``(succeeded, new version)`` instead of raising on a concurrent writer. Loop-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.metadata.errors import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from odradek.metadata.store import CoordinationStore
from odradek.security.acl import AccessControlEntry, PatternType, ResourcePattern, ResourceType, from_name
from odradek.security.acl_znodes import (
    ACL_CHANGE_PREFIX,
    change_path,
    decode_acls,
    encode_acls,
    encode_change,
    paths_to_create,
    resource_path,
    resource_type_path,
    store_path,
)

__all__ = [
    "ACL_STORE_PATTERN_TYPES",
    "VersionedAcls",
    "conditional_delete",
    "conditional_set_acls",
    "create_acl_change_notification",
    "create_acl_paths",
    "create_acls_if_not_exists",
    "get_resource_names",
    "get_resource_types",
    "get_versioned_acls",
]

ACL_STORE_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
UNKNOWN_VERSION = -2
"""The version of a pattern without a znode (Kafka's ``ZkVersion.UnknownVersion``)."""


@dataclass(frozen=True)
class VersionedAcls:
    acls: frozenset[AccessControlEntry]
    zk_version: int = UNKNOWN_VERSION

    @property
    def exists(self) -> bool:
        return self.zk_version != UNKNOWN_VERSION


NO_ACLS = VersionedAcls(frozenset())


def _encode(entries: Iterable[AccessControlEntry]) -> bytes:
    return encode_acls(sorted(entries, key=lambda e: (e.principal, e.permission_type, e.operation, e.host)))


async def create_acl_paths(store: CoordinationStore) -> None:
    """Kafka's ``createAclPaths``: the stores, their per-type folders and the change folders."""
    for path in paths_to_create():
        await store.ensure_path(path)


async def get_versioned_acls(store: CoordinationStore, pattern: ResourcePattern) -> VersionedAcls:
    try:
        data, stat = await store.get(resource_path(pattern))
    except NoNodeError:
        return NO_ACLS
    return VersionedAcls(frozenset(decode_acls(data)), stat.version)


async def conditional_set_acls(
    store: CoordinationStore, pattern: ResourcePattern, acls: Iterable[AccessControlEntry], version: int
) -> tuple[bool, int]:
    try:
        stat = await store.set(resource_path(pattern), _encode(acls), version)
    except (BadVersionError, NoNodeError):
        return False, UNKNOWN_VERSION
    return True, stat.version


async def create_acls_if_not_exists(
    store: CoordinationStore, pattern: ResourcePattern, acls: Iterable[AccessControlEntry]
) -> tuple[bool, int]:
    try:
        await store.create(resource_path(pattern), _encode(acls), makepath=True)
    except NodeExistsError:
        return False, UNKNOWN_VERSION
    return True, 0


async def conditional_delete(store: CoordinationStore, pattern: ResourcePattern, version: int) -> bool:
    """Delete the pattern's znode at ``version``; True when gone (also when it was already)."""
    if version < 0:  # believed absent: true only if it still is
        return await store.exists(resource_path(pattern)) is None
    try:
        await store.delete(resource_path(pattern), version)
    except NoNodeError:
        return True
    except (BadVersionError, NotEmptyError):
        return False
    return True


async def create_acl_change_notification(store: CoordinationStore, pattern: ResourcePattern) -> str:
    """``acl_changes_<seq>`` under the pattern type's change folder; the created path."""
    parent = change_path(pattern.pattern_type)
    await store.ensure_path(parent)
    return await store.create(f"{parent}/{ACL_CHANGE_PREFIX}", encode_change(pattern), sequential=True)


async def get_resource_types(store: CoordinationStore, pattern_type: PatternType) -> list[str]:
    try:
        return await store.get_children(store_path(pattern_type))
    except NoNodeError:
        return []


async def get_resource_names(
    store: CoordinationStore, pattern_type: PatternType, resource_type: ResourceType
) -> list[str]:
    try:
        return await store.get_children(resource_type_path(pattern_type, resource_type))
    except NoNodeError:
        return []


def resource_type_of(name: str) -> ResourceType:
    """A per-type folder's name (``Topic``) as a type; UNKNOWN for a folder Kafka would ignore."""
    return from_name(ResourceType, name)
