"""What DescribeAcls, CreateAcls and DeleteAcls share: their wire entities as
:mod:`odradek.security.acl` values.

A binding or filter that does not decode (an unknown code, an ANY where a value is needed, a
principal that does not parse) is reported as the ``ValueError`` message Kafka's request classes
give (answered INVALID_REQUEST by the API). Pure functions.
"""

from __future__ import annotations

from typing import Protocol

from odradek.errors import ErrorCode
from odradek.security.acl import (
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
    from_code,
)
from odradek.server.auth_helper import CLUSTER_AUTHORIZATION_MESSAGE, authorize_cluster
from odradek.server.request import RequestContext

NO_AUTHORIZER_MESSAGE = "No Authorizer is configured."
"""SECURITY_DISABLED's message when ``authorizer.class.name`` is not set (Kafka's)."""


class WireAclCreation(Protocol):
    """A CreateAcls ``AclCreation`` of any served version (v1+)."""

    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def resource_pattern_type(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


class WireAclFilter(Protocol):
    """A DescribeAcls request or DeleteAcls ``DeleteAclsFilter`` of any served version (v1+)."""

    @property
    def resource_type_filter(self) -> int: ...
    @property
    def resource_name_filter(self) -> str | None: ...
    @property
    def pattern_type_filter(self) -> int: ...
    @property
    def principal_filter(self) -> str | None: ...
    @property
    def host_filter(self) -> str | None: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


def refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why an ACL API is not served: SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED
    without ``operation`` on the cluster (ALTER to change ACLs, DESCRIBE to read them); None to serve it."""
    if ctx.services.authorizer is None:
        return ErrorCode.security_disabled, NO_AUTHORIZER_MESSAGE
    if not authorize_cluster(ctx, operation):
        return ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_MESSAGE
    return None


def binding(
    resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int, permission: int
) -> AclBinding:
    """A binding from its wire codes (unknown codes UNKNOWN); ValueError for ANY or MATCH values."""
    return AclBinding(
        ResourcePattern(from_code(ResourceType, resource_type), name, from_code(PatternType, pattern_type)),
        AccessControlEntry(
            principal, host, from_code(AclOperation, operation), from_code(AclPermissionType, permission)
        ),
    )


def binding_of(creation: WireAclCreation) -> AclBinding:
    """A CreateAcls ``AclCreation`` as a binding; ValueError for ANY or MATCH values."""
    return binding(
        int(creation.resource_type),
        str(creation.resource_name),
        int(creation.resource_pattern_type),
        str(creation.principal),
        str(creation.host),
        int(creation.operation),
        int(creation.permission_type),
    )


def filter_of(wire: WireAclFilter) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls ``DeleteAclsFilter`` as a binding filter."""
    return AclBindingFilter(
        ResourcePatternFilter(
            from_code(ResourceType, int(wire.resource_type_filter)),
            wire.resource_name_filter,
            from_code(PatternType, int(wire.pattern_type_filter)),
        ),
        AccessControlEntryFilter(
            wire.principal_filter,
            wire.host_filter,
            from_code(AclOperation, int(wire.operation)),
            from_code(AclPermissionType, int(wire.permission_type)),
        ),
    )


def unknown_filter_message(binding_filter: AclBindingFilter) -> str | None:
    """Kafka's refusal of a filter naming an UNKNOWN value, else None."""
    if binding_filter.pattern_filter.is_unknown or binding_filter.entry_filter.is_unknown:
        return "The filter contains UNKNOWN elements."
    return None
