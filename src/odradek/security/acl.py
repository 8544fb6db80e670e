"""Kafka's ACL model and ``AclAuthorizer``'s decision, as pure data and functions.

Enums carry Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType`` of ``org.apache.kafka.common``); ``.name`` is Kafka's enum name
(``TRANSACTIONAL_ID``), :func:`pascal_name` the name ZooKeeper's JSON and the znode paths use
(``TransactionalId``, Kafka's ``SecurityUtils.toPascalCase``).

:class:`ResourcePattern` (type, name, LITERAL or PREFIXED; ``*`` is the wildcard name),
:class:`AccessControlEntry` (principal string, host, operation, permission), :class:`AclBinding`
and the filters DescribeAcls/DeleteAcls use, matching as Kafka's ``ResourcePatternFilter`` and
``AccessControlEntryFilter`` do (``None`` name/principal/host and ANY match anything; a MATCH
pattern filter matches the literal name, the wildcard and every prefix of the name).

:func:`authorize` is ``AclAuthorizer.authorizeAction``: super users are allowed; otherwise the ACLs
that apply to the resource (literal, ``*`` and prefixed, gathered by :func:`matching_acls`) decide:
none at all -> ``allow.everyone.if.no.acl.found``; a matching DENY -> denied; a matching ALLOW ->
allowed (Read, Write, Delete and Alter imply Describe; AlterConfigs implies DescribeConfigs; ALL
implies every operation); else denied. An entry matches when its principal is the session's or
``User:*`` and its host is the client's address or ``*``.

ZooKeeper layout and JSON (Kafka's ZooKeeper-mode ``ZkData``) are in :mod:`.acl_znodes`.
Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from odradek.errors import ErrorCode
from odradek.security.principal import WILDCARD_PRINCIPAL, KafkaPrincipal

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG = "allow.everyone.if.no.acl.found"
CLUSTER_NAME = "kafka-cluster"
"""The name of the one CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``)."""


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


AnyAclEnum = ResourceType | PatternType | AclOperation | AclPermissionType
E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def pascal_name(value: AnyAclEnum) -> str:
    """``TRANSACTIONAL_ID`` -> ``TransactionalId`` (Kafka's ``SecurityUtils.toPascalCase``)."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def from_code(enum: type[E], code: int) -> E:
    """The member with wire code ``code``, UNKNOWN for codes this version does not know."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


def from_name(enum: type[E], name: str) -> E:
    """The member named ``name``, either Kafka's enum name in any case (``fromString``) or the
    PascalCase name of the JSON (``Topic``, ``TransactionalId``); UNKNOWN when neither."""
    upper = name.upper()
    for member in enum:
        if member.name == upper or pascal_name(member) == name:
            return member
    return enum(0)


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __post_init__(self) -> None:
        if self.resource_type == ResourceType.ANY:
            raise ValueError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise ValueError(f"patternType must not be {self.pattern_type.name}")

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        if self.operation == AclOperation.ANY:
            raise ValueError("operation must not be ANY")
        if self.permission_type == AclPermissionType.ANY:
            raise ValueError("permissionType must not be ANY")

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    @property
    def kafka_principal(self) -> KafkaPrincipal:
        return KafkaPrincipal.parse(self.principal)

    def __str__(self) -> str:
        return (
            f"{self.principal} has {self.permission_type.name} permission for operations: "
            f"{self.operation.name} from hosts: {self.host}"
        )


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown


@dataclass(frozen=True)
class ResourcePatternFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        raise ValueError(f"Unsupported PatternType: {pattern.pattern_type.name}")

    def find_indefinite_field(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN


@dataclass(frozen=True)
class AccessControlEntryFilter:
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation == AclOperation.ANY or self.operation == entry.operation)
            and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type)
        )

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        for value in (self.operation, self.permission_type):
            if value.name in ("ANY", "UNKNOWN"):
                label = "Operation" if isinstance(value, AclOperation) else "Permission type"
                return f"{label} is {value.name}"
        return None

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN


@dataclass(frozen=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown


ANY_PATTERN_FILTER = ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)
ANY_ENTRY_FILTER = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)
ANY_BINDING_FILTER = AclBindingFilter(ANY_PATTERN_FILTER, ANY_ENTRY_FILTER)


def validate_acl_binding(binding: AclBinding) -> None:
    """CreateAcls' checks (``AclAuthorizer.validateAclBinding``); ``ValueError`` with Kafka's message."""
    if binding.is_unknown:
        raise ValueError("ACL binding contains unknown elements")
    if "/" in binding.pattern.name:
        raise ValueError(f"ACL binding contains invalid resource name: {binding.pattern.name}")


def parse_super_users(value: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:broker``), blanks trimmed."""
    if not value:
        return frozenset()
    return frozenset(KafkaPrincipal.parse(part.strip()) for part in value.split(";"))


_SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(  # the configs ones since Kafka 3.8 (group configs, KIP-848)
        {
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

_AUTHORIZATION_ERRORS = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    ResourceType.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
}


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """The operations an ACL on ``resource_type`` can name (Kafka's ``AclEntry.supportedOperations``)."""
    try:
        return _SUPPORTED_OPERATIONS[resource_type]
    except KeyError:
        raise ValueError("Not a concrete resource type") from None


def authorization_error(resource_type: ResourceType) -> ErrorCode:
    """TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_/DELEGATION_TOKEN_AUTHORIZATION_FAILED."""
    try:
        return _AUTHORIZATION_ERRORS[resource_type]
    except KeyError:
        raise ValueError("Authorization error type not known") from None


def matching_acls(
    acls: Mapping[ResourcePattern, Collection[AccessControlEntry]], resource_type: ResourceType, name: str
) -> list[AccessControlEntry]:
    """The entries that apply to the literal resource ``(resource_type, name)``: those on the
    wildcard ``*``, on ``name`` itself and on every prefix of ``name`` (``AclAuthorizer.matchingAcls``).

    ``acls`` maps each stored pattern to its entries (the authorizer's cache); the prefixes are looked
    up one by one, so the cost grows with the name's length, not with the number of ACLs.
    """
    found: list[AccessControlEntry] = []
    found.extend(acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL), ()))
    if name != WILDCARD_RESOURCE:
        found.extend(acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL), ()))
    for length in range(1 if name else 0, len(name) + 1):
        found.extend(acls.get(ResourcePattern(resource_type, name[:length], PatternType.PREFIXED), ()))
    return found


_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def _matches(
    entry: AccessControlEntry,
    operations: frozenset[AclOperation],
    principal: KafkaPrincipal,
    host: str,
    permission: AclPermissionType,
) -> bool:
    if entry.permission_type != permission:
        return False
    if entry.operation != AclOperation.ALL and entry.operation not in operations:
        return False
    if entry.host != WILDCARD_HOST and entry.host != host:
        return False
    try:
        entry_principal = entry.kafka_principal
    except ValueError:
        return False
    return entry_principal in (principal, WILDCARD_PRINCIPAL)


def authorize(
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource: ResourcePattern,
    acls_for_resource: Iterable[AccessControlEntry],
    super_users: Collection[KafkaPrincipal] = frozenset(),
    allow_everyone_if_no_acl_found: bool = False,
) -> bool:
    """Kafka's ``AclAuthorizer.authorizeAction`` for one literal resource.

    ``host`` is the client's address as text (``127.0.0.1``); ``acls_for_resource`` the entries
    :func:`matching_acls` gathered for the resource. ``ValueError`` for a non-literal resource.
    """
    if resource.pattern_type != PatternType.LITERAL:
        raise ValueError(f"Only literal resources are supported. Got: {resource.pattern_type.name}")
    if principal in super_users:
        return True
    entries = list(acls_for_resource)
    if not entries:
        return allow_everyone_if_no_acl_found
    if any(_matches(e, frozenset({operation}), principal, host, AclPermissionType.DENY) for e in entries):
        return False
    allowing = _IMPLIED_BY.get(operation, frozenset({operation}))
    return any(_matches(e, allowing, principal, host, AclPermissionType.ALLOW) for e in entries)
