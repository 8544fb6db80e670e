"""DescribeAcls (key 29): the ACL bindings a filter matches.

v1..v3 (v0 left with Kafka 4.0, KIP-896). Needs DESCRIBE on the cluster
(CLUSTER_AUTHORIZATION_FAILED); SECURITY_DISABLED "No Authorizer is configured." without an
authorizer; a filter with UNKNOWN values INVALID_REQUEST. The bindings come from the authorizer's
cache (every ACL of ZooKeeper's ``/kafka-acl`` and ``/kafka-acl-extended/prefixed``), grouped by
resource pattern as Kafka's ``DescribeAclsResponse.aclsResources``. Runs on the broker's event loop.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.security.acl import AclBinding, ResourcePattern
from odradek.server.apis.acl_support import filter_of, refusal, unknown_filter_message
from odradek.server.auth_helper import AclOperation
from odradek.server.request import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis.request_types import DescribeAclsRequest

API_KEY = ApiKey.DESCRIBE_ACLS
MIN_VERSION = 1
MAX_VERSION = 3


def _answer(ctx: RequestContext, error: ErrorCode, message: str | None, resources: tuple[Any, ...] = ()) -> Any:
    return ctx.response(
        throttle_time=datetime.timedelta(0), error_code=error, error_message=message, resources=resources
    )


async def handle(ctx: RequestContext[DescribeAclsRequest]) -> Any:
    authorizer = ctx.services.authorizer
    refused = refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None or authorizer is None:
        return _answer(ctx, *(refused or (ErrorCode.security_disabled, None)))
    try:
        binding_filter = filter_of(ctx.request)
    except ValueError as exc:
        return _answer(ctx, ErrorCode.invalid_request, str(exc))
    unknown = unknown_filter_message(binding_filter)
    if unknown is not None:
        return _answer(ctx, ErrorCode.invalid_request, unknown)
    by_pattern: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in authorizer.acls(binding_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding)
    resources = tuple(
        ctx.make(
            "DescribeAclsResource",
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            acls=tuple(
                ctx.make(
                    "AclDescription",
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=b.entry.operation,
                    permission_type=b.entry.permission_type,
                )
                for b in bindings
            ),
        )
        for pattern, bindings in by_pattern.items()
    )
    return _answer(ctx, ErrorCode.none, None, resources)
