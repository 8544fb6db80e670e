"""Acting for a principal the console cannot log in as: the user an authenticating proxy names.

With ``--auth-proxy-header H`` the person is ``User:<value of H>`` and the console has no password
to log in as them, so it connects with its own identity (``--command-config``, which must be allowed
to describe the ACLs) and **evaluates the cluster's ACLs for that principal** with odradek's
authorizer code (:func:`odradek.security.acl.authorize` over :func:`~odradek.security.acl.matching_acls`:
super users, deny over allow, implied operations, literal, prefixed and wildcard patterns), as a
broker would for a connection of theirs:

- :class:`GuardedCluster` answers Metadata as the broker answers that principal: a topic without
  DESCRIBE is left out of every list and answered TOPIC_AUTHORIZATION_FAILED when named, so every
  page built on topic metadata (lists, details, offsets, fetches) never sees it;
- :func:`check` is the explicit question for everything else (groups, cluster pages, changes): it
  raises the Kafka authorization error a broker would answer, and is a no-op for a plain
  :class:`AdminClient` (signed-in users, whose own connection the brokers check).

The ACLs are read with DescribeAcls (all of them) at most every :data:`REFRESH_S` seconds;
``super.users`` and ``allow.everyone.if.no.acl.found`` are the console's own options, as they are a
broker's (a broker does not publish them). ACLs naming a host are matched against
:data:`PROXY_HOST` (the console does not know the person's address), so host-restricted ALLOW
entries do not apply and host-restricted DENY entries do not either: use wildcard hosts for people
behind the proxy.

Run on the console's client loop only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from odradek.cli.acls_admin import AdminAcls
from odradek.client.admin import AdminClient
from odradek.client.cluster import Cluster, TopicDescription
from odradek.client.errors import error_for
from odradek.errors import ErrorCode
from odradek.security.acl import (
    ANY_ENTRY_FILTER,
    ANY_PATTERN_FILTER,
    AccessControlEntry,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourcePattern,
    ResourceType,
    authorize,
    matching_acls,
)
from odradek.security.principal import KafkaPrincipal

__all__ = ["PROXY_HOST", "REFRESH_S", "AclGuard", "GuardedAdmin", "GuardedCluster", "allowed", "check", "visible"]

REFRESH_S = 5.0
PROXY_HOST = "0.0.0.0"
"""The host a proxied principal is checked from: matches only wildcard-host entries."""

_DENIED = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}


class AclGuard:
    """The cluster's ACLs, evaluated for one principal."""

    def __init__(
        self,
        principal: KafkaPrincipal,
        super_users: frozenset[KafkaPrincipal] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.principal = principal
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, list[AccessControlEntry]] = {}
        self._loaded_at = float("-inf")
        self._lock = asyncio.Lock()

    async def load(self, admin: AdminClient) -> None:
        """Re-read every ACL (DescribeAcls) unless read in the last :data:`REFRESH_S` seconds."""
        async with self._lock:
            if time.monotonic() - self._loaded_at < REFRESH_S:
                return
            bindings = await AdminAcls(admin).describe(AclBindingFilter(ANY_PATTERN_FILTER, ANY_ENTRY_FILTER))
            acls: dict[ResourcePattern, list[AccessControlEntry]] = {}
            for b in bindings:
                acls.setdefault(b.pattern, []).append(b.entry)
            self._acls = acls
            self._loaded_at = time.monotonic()

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return authorize(
            self.principal,
            PROXY_HOST,
            operation,
            ResourcePattern(resource_type, name, PatternType.LITERAL),
            matching_acls(self._acls, resource_type, name),
            self.super_users,
            self.allow_everyone_if_no_acl_found,
        )


class GuardedCluster(Cluster):
    """A :class:`Cluster` whose Metadata answers are cut to the topics the guard's principal may describe."""

    guard: AclGuard
    admin: AdminClient

    async def refresh(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> dict[str, TopicDescription]:
        answered = await super().refresh(None if topics is None else list(topics), allow_auto_create=False)
        await self.guard.load(self.admin)
        named = topics is not None
        out: dict[str, TopicDescription] = {}
        for name, desc in answered.items():
            if self.guard.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                out[name] = desc
                continue
            self.topics.pop(name, None)
            if named:
                out[name] = TopicDescription(name, error_code=ErrorCode.topic_authorization_failed)
        return out


class GuardedAdmin(AdminClient):
    """An admin client acting for ``guard.principal`` (see the module docstring)."""

    def __init__(self, guard: AclGuard, bootstrap_servers: str, **kwargs: object) -> None:
        super().__init__(bootstrap_servers, **kwargs)  # type: ignore[arg-type]
        plain = self.cluster
        cluster = GuardedCluster(
            bootstrap_servers,
            client_id=plain.client_id,
            request_timeout_ms=plain.request_timeout_ms,
            connect_timeout_ms=plain.connect_timeout_ms,
            retries=plain.retries,
            security=plain.security,
        )
        cluster.guard = guard
        cluster.admin = self
        self.cluster = cluster
        self.guard = guard


def allowed(admin: AdminClient, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """Whether ``admin``'s principal may; always True for a plain admin client (the broker decides)."""
    if not isinstance(admin, GuardedAdmin):
        return True
    return admin.guard.allowed(operation, resource_type, name)


async def visible(
    admin: AdminClient, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """The ``names`` ``admin``'s principal may ``operation`` (all of them for a plain admin client)."""
    if not isinstance(admin, GuardedAdmin):
        return set(names)
    await admin.guard.load(admin)
    return {n for n in names if admin.guard.allowed(operation, resource_type, n)}


async def check(admin: AdminClient, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    """Raise the broker's authorization error unless ``admin``'s principal may do ``operation``."""
    if isinstance(admin, GuardedAdmin):
        await admin.guard.load(admin)
        if not admin.guard.allowed(operation, resource_type, name):
            raise error_for(_DENIED.get(resource_type, ErrorCode.cluster_authorization_failed), None, name)
