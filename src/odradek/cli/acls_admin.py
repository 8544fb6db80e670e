"""``odradek acls --bootstrap-server``: the ACL verbs through the brokers' CreateAcls,
DeleteAcls and DescribeAcls, as Kafka's ``AclCommand.AdminClientService`` does.

:class:`AdminAcls` offers the three calls the tool makes on an authorizer (``create_acls``,
``delete_acls``, ``describe``), with the same per-binding results, so the tool's add, remove and
list code runs unchanged in both modes. A top-level error (CLUSTER_AUTHORIZATION_FAILED,
SECURITY_DISABLED) stops the command with the broker's message. Event loop only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from odradek.cli.common import CommandError
from odradek.client.admin import AdminClient
from odradek.errors import ErrorCode
from odradek.metadata.authorizer import AclBindingDeleteResult, AclCreateResult, AclDeleteResult
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
)
from odradek.server.apis.acl_support import binding

__all__ = ["AdminAcls"]


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": int(f.pattern_filter.resource_type),
        "resource_name_filter": f.pattern_filter.name,
        "pattern_type_filter": int(f.pattern_filter.pattern_type),
        "principal_filter": f.entry_filter.principal,
        "host_filter": f.entry_filter.host,
        "operation": int(f.entry_filter.operation),
        "permission_type": int(f.entry_filter.permission_type),
    }


def _binding(wire: Any, resource: Any) -> AclBinding:
    """A binding of a DescribeAcls ``AclDescription`` under its resource, or of a DeleteAcls
    matching ACL (``resource`` the entity itself)."""
    return binding(
        int(resource.resource_type),
        str(resource.resource_name),
        int(resource.pattern_type),
        str(wire.principal),
        str(wire.host),
        int(wire.operation),
        int(wire.permission_type),
    )


def _check(error_code: int, message: str | None) -> None:
    if error_code != ErrorCode.none:
        raise CommandError(message or ErrorCode(error_code).name.upper())


class AdminAcls:
    """The ACL verbs of one cluster through its brokers (any broker answers them)."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    async def _send(self, api_key: int, **fields: Any) -> Any:
        conn = await self.admin.cluster.any_connection()
        rb = conn.builder(api_key, min_version=1, max_version=3)
        return await conn.send(rb(**fields))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]:
        conn = await self.admin.cluster.any_connection()
        rb = conn.builder(ApiKey.CREATE_ACLS, min_version=1, max_version=3)
        creations = tuple(
            rb.make(
                "AclCreation",
                resource_type=int(b.pattern.resource_type),
                resource_name=b.pattern.name,
                resource_pattern_type=int(b.pattern.pattern_type),
                principal=b.entry.principal,
                host=b.entry.host,
                operation=int(b.entry.operation),
                permission_type=int(b.entry.permission_type),
            )
            for b in bindings
        )
        response = await conn.send(rb(creations=creations))
        return [AclCreateResult(ErrorCode(r.error_code), r.error_message) for r in response.results]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        conn = await self.admin.cluster.any_connection()
        rb = conn.builder(ApiKey.DELETE_ACLS, min_version=1, max_version=3)
        response = await conn.send(rb(filters=tuple(rb.make("DeleteAclsFilter", **_filter_fields(f)) for f in filters)))
        results = []
        for r in response.filter_results:
            _check(r.error_code, r.error_message)
            results.append(
                AclDeleteResult(
                    ErrorCode(r.error_code),
                    r.error_message,
                    [
                        AclBindingDeleteResult(_binding(m, m), ErrorCode(m.error_code), m.error_message)
                        for m in r.matching_acls
                    ],
                )
            )
        return results

    async def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        response = await self._send(ApiKey.DESCRIBE_ACLS, **_filter_fields(binding_filter))
        _check(response.error_code, response.error_message)
        found = [_binding(acl, resource) for resource in response.resources for acl in resource.acls]
        return found
