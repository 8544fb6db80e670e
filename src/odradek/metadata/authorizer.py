"""Kafka's ZooKeeper-mode ``AclAuthorizer``: every ACL cached, followed through the change folders.

Configured by the broker's keys::

    authorizer.class.name=kafka.security.authorizer.AclAuthorizer
        (kafka.security.auth.SimpleAclAuthorizer, Kafka's class before 3.0, is accepted as an alias)
    super.users=User:admin;User:broker           principals allowed everything
    allow.everyone.if.no.acl.found=false         a resource with no ACL at all: allowed when true

:meth:`AclAuthorizer.start` creates the ACL folders, loads every pattern of ``/kafka-acl`` and
``/kafka-acl-extended/prefixed`` and follows ``/kafka-acl-changes`` and
``/kafka-acl-extended-changes`` (:class:`~odradek.metadata.change_notifications.
ZkNodeChangeNotificationListener`, notices purged after 15 minutes): a notice names a pattern,
whose znode is re-read into the cache. So every broker's authorizer sees another's changes once the
notice's watch fires.

:meth:`AclAuthorizer.authorize` answers from the cache through
:func:`odradek.security.acl.authorize` (super users, deny over allow, host match, implied
operations, ``allow.everyone.if.no.acl.found``). :meth:`~AclAuthorizer.create_acls`,
:meth:`~AclAuthorizer.delete_acls` and :meth:`~AclAuthorizer.acls` are CreateAcls, DeleteAcls and
DescribeAcls with Kafka's per-binding results: a pattern's znode is rewritten conditionally on its
version (re-read and retried on a concurrent writer, at most 10 retries), deleted when its last
ACL goes, and announced by a change notice. Loop-only: every method runs on the store's loop;
:meth:`authorize` is synchronous and never touches the store.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.errors import ErrorCode
from odradek.metadata.acl_store import (
    ACL_STORE_PATTERN_TYPES,
    NO_ACLS,
    VersionedAcls,
    conditional_delete,
    conditional_set_acls,
    create_acl_change_notification,
    create_acl_paths,
    create_acls_if_not_exists,
    get_resource_names,
    get_resource_types,
    get_versioned_acls,
    resource_type_of,
)
from odradek.metadata.change_notifications import CHANGE_EXPIRATION_MS, ZkNodeChangeNotificationListener
from odradek.metadata.store import CoordinationStore
from odradek.security.acl import (
    ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG,
    SUPER_USERS_CONFIG,
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    authorize,
    parse_super_users,
    validate_acl_binding,
)
from odradek.security.acl_znodes import (
    ACL_CHANGE_PREFIX,
    EXTENDED_ACL_CHANGES_PATH,
    LITERAL_ACL_CHANGES_PATH,
    decode_extended_change,
    decode_literal_change,
)
from odradek.security.principal import KafkaPrincipal

__all__ = [
    "ACL_AUTHORIZER_CLASS",
    "AUTHORIZER_CLASS_NAME_CONFIG",
    "SIMPLE_ACL_AUTHORIZER_CLASS",
    "AclAuthorizer",
    "AclBindingDeleteResult",
    "AclCreateResult",
    "AclDeleteResult",
    "Action",
    "is_acl_authorizer",
]

log = logging.getLogger(__name__)
audit = logging.getLogger("kafka.authorizer.logger")

AUTHORIZER_CLASS_NAME_CONFIG = "authorizer.class.name"
ACL_AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
SIMPLE_ACL_AUTHORIZER_CLASS = "kafka.security.auth.SimpleAclAuthorizer"
MAX_UPDATE_RETRIES = 10
DECISION_CACHE_SIZE = 10_000
"""Authorization answers remembered between ACL changes; the memory is emptied when it is full."""


def is_acl_authorizer(class_name: str | None) -> bool:
    """Whether ``authorizer.class.name`` names this authorizer (blank: no authorizer); ``ValueError``
    for any other class, which cannot be loaded here."""
    name = (class_name or "").strip()
    if not name:
        return False
    if name in (ACL_AUTHORIZER_CLASS, SIMPLE_ACL_AUTHORIZER_CLASS):
        return True
    raise ValueError(
        f"{AUTHORIZER_CLASS_NAME_CONFIG}={name} is not supported: only {ACL_AUTHORIZER_CLASS} "
        f"(or its old name {SIMPLE_ACL_AUTHORIZER_CLASS}) is available"
    )


@dataclass(frozen=True)
class Action:
    """One question of a batch; ``log_if_denied`` False for filtering questions (Metadata's topic
    list), whose refusals Kafka does not log at INFO."""

    operation: AclOperation
    resource_type: ResourceType
    name: str
    log_if_denied: bool = True


@dataclass(frozen=True)
class AclCreateResult:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True)
class AclBindingDeleteResult:
    binding: AclBinding
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass
class AclDeleteResult:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    bindings: list[AclBindingDeleteResult] = field(default_factory=list)


class AclAuthorizer:
    """See the module docstring. ``config`` holds the broker's keys (only the authorizer's are read)."""

    def __init__(
        self,
        store: CoordinationStore,
        config: Mapping[str, str] | None = None,
        *,
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        config = config or {}
        self.store = store
        self.super_users = parse_super_users(config.get(SUPER_USERS_CONFIG))
        allow = str(config.get(ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG, "false")).strip().lower()
        self.allow_everyone_if_no_acl_found = allow == "true"
        self._versioned: dict[ResourcePattern, VersionedAcls] = {}
        self._entries: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._by_name: dict[tuple[ResourceType, PatternType], dict[str, frozenset[AccessControlEntry]]] = {}
        self._decisions: dict[tuple[KafkaPrincipal, str, AclOperation, ResourceType, str], bool] = {}
        """Answers given since the cache last changed (emptied by every change)."""
        """The same entries by (type, pattern type) then name: what :meth:`authorize` looks up, with
        plain string keys (no pattern object built per question)."""
        self._lock = asyncio.Lock()
        extra = {} if clock_ms is None else {"clock_ms": clock_ms}
        self._listeners = [
            ZkNodeChangeNotificationListener(
                store,
                path,
                ACL_CHANGE_PREFIX,
                self._notification_handler(decode),
                change_expiration_ms=change_expiration_ms,
                **extra,
            )
            for path, decode in (
                (LITERAL_ACL_CHANGES_PATH, decode_literal_change),
                (EXTENDED_ACL_CHANGES_PATH, decode_extended_change),
            )
        ]

    # --- life cycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await create_acl_paths(self.store)
        async with self._lock:
            for pattern_type in ACL_STORE_PATTERN_TYPES:
                for type_name in await get_resource_types(self.store, pattern_type):
                    resource_type = resource_type_of(type_name)
                    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                        log.warning("Ignoring unknown ResourceType: %s", type_name)
                        continue
                    for name in await get_resource_names(self.store, pattern_type, resource_type):
                        pattern = ResourcePattern(resource_type, name, pattern_type)
                        self._update_cache(pattern, await get_versioned_acls(self.store, pattern))
        for listener in self._listeners:
            await listener.init()

    async def close(self) -> None:
        for listener in self._listeners:
            await listener.close()

    def _notification_handler(self, decode: Callable[[bytes], ResourcePattern]) -> Callable[[bytes], Awaitable[None]]:
        return lambda data: self.process_acl_change_notification(decode(data))

    async def process_acl_change_notification(self, pattern: ResourcePattern) -> None:
        async with self._lock:
            versioned = await get_versioned_acls(self.store, pattern)
            log.info("Processing Acl change notification for %s, zkVersion: %d", pattern, versioned.zk_version)
            self._update_cache(pattern, versioned)

    def _update_cache(self, pattern: ResourcePattern, versioned: VersionedAcls) -> None:
        self._decisions.clear()
        if versioned.acls:
            self._versioned[pattern] = versioned
            self._entries[pattern] = versioned.acls
            self._by_name.setdefault((pattern.resource_type, pattern.pattern_type), {})[pattern.name] = versioned.acls
        else:
            self._versioned.pop(pattern, None)
            self._entries.pop(pattern, None)
            self._by_name.get((pattern.resource_type, pattern.pattern_type), {}).pop(pattern.name, None)

    # --- authorization ---------------------------------------------------------------------------

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the literal resource.

        A refusal is logged at INFO on ``kafka.authorizer.logger`` (DEBUG without ``log_if_denied``).
        Decisions are remembered until the next ACL change (at most :data:`DECISION_CACHE_SIZE`)."""
        key = (principal, host, operation, resource_type, name)
        allowed = self._decisions.get(key)
        if allowed is None:
            allowed = authorize(
                principal,
                host,
                operation,
                ResourcePattern(resource_type, name, PatternType.LITERAL),
                self._matching(resource_type, name),
                self.super_users,
                self.allow_everyone_if_no_acl_found,
            )
            if len(self._decisions) >= DECISION_CACHE_SIZE:
                self._decisions.clear()
            self._decisions[key] = allowed
        if not allowed:
            resource = ResourcePattern(resource_type, name, PatternType.LITERAL)
            audit.log(
                logging.INFO if log_if_denied else logging.DEBUG,
                "Principal = %s is Denied Operation = %s from host = %s on resource = %s",
                principal,
                operation.name,
                host,
                resource,
            )
        return allowed

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """:func:`odradek.security.acl.matching_acls` from the by-name index: the entries on the
        literal ``*``, on ``name`` and on every prefix of it."""
        found: list[AccessControlEntry] = []
        literal = self._by_name.get((resource_type, PatternType.LITERAL))
        if literal:
            found.extend(literal.get(WILDCARD_RESOURCE, ()))
            if name != WILDCARD_RESOURCE:
                found.extend(literal.get(name, ()))
        prefixed = self._by_name.get((resource_type, PatternType.PREFIXED))
        if prefixed:
            for length in range(1 if name else 0, len(name) + 1):
                entries = prefixed.get(name[:length])
                if entries:
                    found.extend(entries)
        return found

    def authorize_actions(self, principal: KafkaPrincipal, host: str, actions: Iterable[Action]) -> list[bool]:
        """:meth:`authorize` for each action, in order (Kafka's ``authorize(context, actions)``)."""
        return [
            self.authorize(principal, host, a.operation, a.resource_type, a.name, log_if_denied=a.log_if_denied)
            for a in actions
        ]

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of ``resource_type``
        (Kafka's ``Authorizer.authorizeByResourceType``; InitProducerId without a transactional id
        asks it for WRITE on topics): a super user, or (as Kafka checks a made-up name first) a
        type with no ACL under ``allow.everyone.if.no.acl.found``; never with a DENY on the
        literal ``*``; else some ALLOW pattern no DENY covers (the same literal name, or a
        prefixed DENY that is a prefix of it)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode", log_if_denied=False):
            return True
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for pattern, entries in self._entries.items():
            if pattern.resource_type != resource_type or pattern.pattern_type not in allow:
                continue
            for entry in entries:
                if entry.operation not in (operation, AclOperation.ALL):
                    continue
                if entry.host not in (WILDCARD_HOST, host) or entry.principal not in (str(principal), "User:*"):
                    continue
                target = allow if entry.permission_type == AclPermissionType.ALLOW else deny
                target[pattern.pattern_type].add(pattern.name)
        if WILDCARD_RESOURCE in deny[PatternType.LITERAL]:
            return False

        def denied(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in deny[PatternType.PREFIXED])

        if any(n not in deny[PatternType.LITERAL] and not denied(n) for n in allow[PatternType.LITERAL]):
            return True
        return any(not denied(n) for n in allow[PatternType.PREFIXED])

    # --- CreateAcls / DeleteAcls / DescribeAcls -----------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every cached binding the filter matches, by pattern then entry."""
        return [
            AclBinding(pattern, entry)
            for pattern in sorted(self._entries)
            for entry in sorted(self._entries[pattern])
            if binding_filter.matches(AclBinding(pattern, entry))
        ]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]:
        """One result per binding: INVALID_REQUEST "Failed to create ACL: <why>" for an invalid one,
        the write's error for every binding of a pattern whose write failed."""
        results: list[AclCreateResult | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            try:
                validate_acl_binding(binding)
            except ValueError as exc:
                results[index] = AclCreateResult(ErrorCode.invalid_request, f"Failed to create ACL: {exc}")
                continue
            by_pattern.setdefault(binding.pattern, []).append(index)
        async with self._lock:
            for pattern, indexes in by_pattern.items():
                new = frozenset(bindings[i].entry for i in indexes)
                try:
                    await self._update_resource_acls(pattern, _adder(new))
                    result = AclCreateResult()
                except Exception as exc:
                    result = AclCreateResult(ErrorCode.unknown_server_error, str(exc))
                for index in indexes:
                    results[index] = result
        return [r if r is not None else AclCreateResult() for r in results]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """One result per filter with the bindings it deleted (a binding matched by several filters
        is reported under the first); patterns not yet cached are found only for filters that
        name one pattern (LITERAL, PREFIXED or ANY with a name), as Kafka does."""
        deleted: dict[AclBinding, int] = {}
        errors: dict[AclBinding, str] = {}
        async with self._lock:
            resources = dict.fromkeys(self._versioned)
            for f in filters:
                if f.pattern_filter.find_indefinite_field() is None:
                    resources.update(dict.fromkeys(_filter_to_resources(f.pattern_filter)))
            for resource in resources:
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(resource)]
                if not matching:
                    continue
                being_deleted: list[AclBinding] = []
                remove = _remover(resource, matching, deleted, being_deleted)
                try:
                    await self._update_resource_acls(resource, remove)
                except Exception as exc:
                    for binding in being_deleted:
                        errors.setdefault(binding, str(exc))
        results = [AclDeleteResult() for _ in filters]
        for binding, index in sorted(deleted.items(), key=lambda kv: (kv[0].pattern, kv[0].entry)):
            error = errors.get(binding)
            code = ErrorCode.none if error is None else ErrorCode.unknown_server_error
            results[index].bindings.append(AclBindingDeleteResult(binding, code, error))
        return results

    async def _update_resource_acls(
        self,
        pattern: ResourcePattern,
        new_acls: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> bool:
        """``updateResourceAcls``: True when the pattern's ACLs changed (then a notice is written)."""
        current = self._versioned.get(pattern) or await get_versioned_acls(self.store, pattern)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            acls = new_acls(current.acls)
            if acls:
                if current.exists:
                    ok, version = await conditional_set_acls(self.store, pattern, acls, current.zk_version)
                else:
                    ok, version = await create_acls_if_not_exists(self.store, pattern, acls)
            else:
                ok, version = await conditional_delete(self.store, pattern, current.zk_version), 0
            if ok:
                break
            await asyncio.sleep((100 + random.randrange(50)) / 1000)
            current = await get_versioned_acls(self.store, pattern)
        else:
            raise RuntimeError(
                f"Failed to update ACLs for {pattern} after trying a maximum of {MAX_UPDATE_RETRIES} times"
            )
        updated = VersionedAcls(acls, version) if acls else NO_ACLS
        self._update_cache(pattern, updated)
        if acls != current.acls:
            log.info("Updated ACLs for %s with new version %d", pattern, version)
            await create_acl_change_notification(self.store, pattern)
            return True
        return False


def _filter_to_resources(pattern_filter: ResourcePatternFilter) -> list[ResourcePattern]:
    assert pattern_filter.name is not None
    if pattern_filter.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        return [ResourcePattern(pattern_filter.resource_type, pattern_filter.name, pattern_filter.pattern_type)]
    if pattern_filter.pattern_type == PatternType.ANY:
        return [
            ResourcePattern(pattern_filter.resource_type, pattern_filter.name, PatternType.LITERAL),
            ResourcePattern(pattern_filter.resource_type, pattern_filter.name, PatternType.PREFIXED),
        ]
    raise ValueError(f"Cannot determine matching resources for patternType {pattern_filter.pattern_type.name}")


Entries = frozenset[AccessControlEntry]


def _adder(new: Entries) -> Callable[[Entries], Entries]:
    return lambda current: current | new


def _remover(
    resource: ResourcePattern,
    matching: list[tuple[int, AclBindingFilter]],
    deleted: dict[AclBinding, int],
    being_deleted: list[AclBinding],
) -> Callable[[Entries], Entries]:
    """The entries of ``resource`` no matching filter selects; each removed binding is recorded
    under the first filter that selects it."""

    def remove(current: Entries) -> Entries:
        gone = set()
        for entry in current:
            index = next((i for i, f in matching if f.entry_filter.matches(entry)), None)
            if index is not None:
                binding = AclBinding(resource, entry)
                deleted.setdefault(binding, index)
                being_deleted.append(binding)
                gone.add(entry)
        return current - gone

    return remove
